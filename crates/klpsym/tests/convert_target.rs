//! `convert` reads the target as `check` does: the struct layouts of the target's BTF, its
//! configuration, and the Module.symvers of its module tree by default. Before the library
//! gathered one target for both, convert parsed every module with the 6.1 fallback layouts,
//! read no configuration and no tree Module.symvers: each test below fails on that.

use std::path::PathBuf;

use klpsym::{CacheDir, ConvertOptions, Converted, Options, TargetOptions};
use klpsym_testkit::elf::{At, Fixture};
use klpsym_testkit::module::{build_module, ModSpec, ObjSpec};
use object::{Architecture, SectionKind};

use klpsym_livepatch::consts::R_X86_64_PLT32;

/// A folder with a kernel (kallsyms text), a module tree holding an ordinary `nf_tables.ko`
/// (exporting `nft_export_fn`, with a static `nft_static`), and the tree's Module.symvers.
struct Target {
    dir: tempfile::TempDir,
}

impl Target {
    fn new(symvers: bool) -> Target {
        let dir = tempfile::tempdir().unwrap();
        let kallsyms = [
            "ffffffff81000000 T _text",
            "ffffffff81100000 t static_helper",
            "ffffffff81170000 T printk",
            "ffffffff81180000 T klp_enable_patch",
            "ffffffff81190000 r __ksymtab_printk",
            "ffffffff81190010 r __ksymtab_klp_enable_patch",
        ]
        .join("\n")
            + "\n";
        std::fs::write(dir.path().join("kallsyms"), kallsyms).unwrap();
        let mods = dir.path().join("mods");
        std::fs::create_dir_all(mods.join("kernel/net")).unwrap();
        std::fs::create_dir_all(mods.join("build")).unwrap();
        let mut f = Fixture::new(Architecture::X86_64);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=nf_tables\0");
        let text = f.section(".text", SectionKind::Text, &[]);
        f.sym("nft_static", At::Sec(text), 0x10, 'l', 'f');
        f.sym("nft_export_fn", At::Sec(text), 0x40, 'g', 'f');
        std::fs::write(mods.join("kernel/net/nf_tables.ko"), f.bytes()).unwrap();
        if symvers {
            std::fs::write(
                mods.join("build/Module.symvers"),
                "0x00000000\tklp_enable_patch\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
                 0x00000000\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
                 0x00000000\tnft_export_fn\tnet/netfilter/nf_tables\tEXPORT_SYMBOL\t\n",
            )
            .unwrap();
        }
        Target { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn kernel(&self) -> klpsym::Kernel {
        let opts = Options::new()
            .cache(CacheDir::Off)
            .modules(self.path("mods"));
        klpsym::open(self.path("kallsyms"), &opts).unwrap()
    }

    fn convert(&self, module: &[u8], copts: &ConvertOptions) -> klpsym::ConvertRun {
        let input = self.path("in.ko");
        std::fs::write(&input, module).unwrap();
        let kernel = self.kernel();
        klpsym::convert(&input, &self.path("out.ko"), &kernel, copts).unwrap()
    }
}

fn klp_names(run: &klpsym::ConvertRun) -> Vec<String> {
    match &run.outcome {
        Converted::Written(r) => r.conversions.iter().map(|c| c.klp_name.clone()).collect(),
        Converted::Refused(p) => panic!("refused: {p:?}"),
    }
}

fn refusals(run: &klpsym::ConvertRun) -> Vec<String> {
    match &run.outcome {
        Converted::Refused(p) => p.clone(),
        Converted::Written(r) => panic!("converted: {:?}", r.conversions),
    }
}

/// A reference to a symbol a module exports becomes a klp relocation against that module
/// (as klp-build makes it: the patch then loads whether or not the module is loaded), found
/// through the tree's Module.symvers — which convert did not read by default.
#[test]
fn the_trees_module_symvers_is_read_by_default() {
    let spec = ModSpec {
        text_refs: vec![
            ("static_helper", R_X86_64_PLT32, -4),
            ("nft_export_fn", R_X86_64_PLT32, -4),
            ("printk", R_X86_64_PLT32, -4),
        ],
        ..ModSpec::default()
    };
    let module = build_module(&spec);
    let t = Target::new(true);
    let names = klp_names(&t.convert(&module, &ConvertOptions::default()));
    assert_eq!(
        names,
        [
            ".klp.sym.vmlinux.static_helper,0",
            ".klp.sym.nf_tables.nft_export_fn,0"
        ],
        "vmlinux's export printk stays an ordinary relocation"
    );
    // Without the tree's Module.symvers nothing says which module exports the name.
    let bare = Target::new(false);
    let why = refusals(&bare.convert(&module, &ConvertOptions::default()));
    assert!(
        why.iter()
            .any(|p| p.contains("'nft_export_fn' is not defined in the target kernel")),
        "{why:?}"
    );
}

/// The struct layouts come from the target's BTF: a kernel whose `struct klp_object` is 176
/// bytes puts the second object 176 bytes after the first, where the fallback (168) reads
/// garbage and never learns that the patch has an `nf_tables` object to offer the tree's
/// module for.
#[test]
fn the_targets_btf_decides_the_struct_layouts() {
    let spec = ModSpec {
        objects: vec![
            ObjSpec {
                name: None,
                funcs: vec![("static_helper", 0)],
            },
            ObjSpec {
                name: Some("nf_tables"),
                funcs: vec![("nft_static", 0)],
            },
        ],
        func_size: 160,
        object_size: 176,
        text_refs: vec![("nft_static", R_X86_64_PLT32, -4)],
        ..ModSpec::default()
    };
    let module = build_module(&spec);
    let t = Target::new(true);
    let btf = klpsym_testkit::btf::build_btf(&[
        (
            "klp_func",
            160,
            &[("old_name", 0), ("new_func", 8), ("old_sympos", 16)],
        ),
        ("klp_object", 176, &[("name", 0), ("funcs", 8)]),
        ("klp_patch", 200, &[("mod", 0), ("objs", 8)]),
    ]);
    std::fs::write(t.path("btf"), btf).unwrap();
    let with_btf = ConvertOptions {
        target: TargetOptions {
            btf: Some(t.path("btf")),
            ..TargetOptions::default()
        },
        ..ConvertOptions::default()
    };
    let run = t.convert(&module, &with_btf);
    assert_eq!(klp_names(&run), [".klp.sym.nf_tables.nft_static,0"]);
    // With the fallback layouts the second object is not found: the name is not defined.
    let why = refusals(&t.convert(&module, &ConvertOptions::default()));
    assert!(
        why.iter()
            .any(|p| p.contains("'nft_static' is not defined in the target kernel")),
        "{why:?}"
    );
}

/// The target's configuration is read: a kernel without CONFIG_LIVEPATCH refuses every
/// livepatch, which convert says (the conversion itself still happens).
#[test]
fn the_targets_config_is_read() {
    let spec = ModSpec {
        text_refs: vec![("static_helper", R_X86_64_PLT32, -4)],
        ..ModSpec::default()
    };
    let module = build_module(&spec);
    let t = Target::new(true);
    std::fs::write(
        t.path("config"),
        "CONFIG_MODULES=y\n# CONFIG_LIVEPATCH is not set\n",
    )
    .unwrap();
    let copts = ConvertOptions {
        target: TargetOptions {
            kernel_config: Some(t.path("config")),
            ..TargetOptions::default()
        },
        ..ConvertOptions::default()
    };
    let run = t.convert(&module, &copts);
    assert_eq!(klp_names(&run), [".klp.sym.vmlinux.static_helper,0"]);
    let warned = run
        .notes
        .iter()
        .find(|n| n.text.contains("CONFIG_LIVEPATCH not set"))
        .unwrap_or_else(|| panic!("no warning in {:?}", run.notes));
    assert!(
        warned
            .text
            .contains(&t.path("config").display().to_string()),
        "{}",
        warned.text
    );
    // A configuration with livepatch says nothing of the kind.
    std::fs::write(t.path("config"), "CONFIG_MODULES=y\nCONFIG_LIVEPATCH=y\n").unwrap();
    let run = t.convert(&module, &copts);
    assert!(
        !run.notes.iter().any(|n| n.text.contains("not set")),
        "{:?}",
        run.notes
    );
}

/// Debian ships modules as `.ko.xz` (and kbuild can write `.ko.zst` and `.ko.gz`); the module
/// loader sees the decompressed ELF. `check` and `convert` read a compressed module as that
/// ELF (they refused it: "not an ELF file"); convert's output is a plain `.ko`, or compressed
/// as its name says.
#[test]
fn compressed_modules_are_read_and_written_by_their_names() {
    let spec = ModSpec {
        text_refs: vec![("static_helper", R_X86_64_PLT32, -4)],
        ..ModSpec::default()
    };
    let plain = build_module(&spec);
    let t = Target::new(true);
    let kernel = t.kernel();
    let mut xz = Vec::new();
    klpsym_io::write_module(&mut xz, klpsym_io::ModuleCompression::Xz, |w| {
        w.write_all(&plain)
    })
    .unwrap();
    std::fs::write(t.path("lp.ko.xz"), &xz).unwrap();

    // check: the same patch as the plain file.
    let patch = klpsym::Patch::read(t.path("lp.ko.xz"), kernel.options()).unwrap();
    assert_eq!(patch.objects(), ["vmlinux"]);

    // convert: each output name gives its form; every one decompresses to the same module.
    let mut outputs = Vec::new();
    for name in ["out.ko", "out.ko.zst", "out.ko.gz", "out.ko.xz"] {
        let out = t.path(name);
        let run = klpsym::convert(
            &t.path("lp.ko.xz"),
            &out,
            &kernel,
            &ConvertOptions::default(),
        )
        .unwrap();
        assert_eq!(klp_names(&run), [".klp.sym.vmlinux.static_helper,0"]);
        let bytes = std::fs::read(&out).unwrap();
        let elf = klpsym_io::decompressed(&bytes, &out, 1 << 30, &mut klpsym_core::Resched::none())
            .unwrap()
            .into_owned();
        assert_eq!(&elf[..4], b"\x7fELF", "{name}");
        assert_eq!(
            name == "out.ko",
            bytes == elf,
            "{name}: compressed exactly when its name says so"
        );
        outputs.push(elf);
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
}
