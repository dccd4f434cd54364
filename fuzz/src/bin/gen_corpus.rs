//! Writes the seed corpora of the fuzz targets, generated from valid inputs:
//! `gen_corpus <corpus dir>` (run by `fuzz/gen-corpus.sh` after `cargo fuzz build`).
//!
//! The fixtures are the tests' own builders (klpsym-testkit), so the seeds follow the formats
//! the tests exercise: the kallsyms table encoder (every layout era), the `object::write`
//! ELF fixture, the patch-module builder, the package builders.
//! Real-world seeds (prefixes of the Debian files of the lab cache) are added by the script.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use object::{Architecture, SectionKind};

// Built with the fuzz targets' coverage instrumentation, which libFuzzer's runtime provides;
// libFuzzer's own `main` is not pulled in because this binary has one.
use libfuzzer_sys as _;

use klpsym_core::resched::Resched;
use klpsym_testkit::elf::{At, Fixture};
use klpsym_testkit::kallsyms::{encode, symbols, LayoutEra, Options, Sym};
use klpsym_testkit::module::{build_module, ModSpec, ObjSpec};
use klpsym_testkit::packages as pkg_fixture;
use klpsym_livepatch::consts;

struct Out {
    root: PathBuf,
    count: usize,
}

impl Out {
    fn put(&mut self, target: &str, name: &str, bytes: &[u8]) {
        let dir = self.root.join(target);
        fs::create_dir_all(&dir).expect("create corpus dir");
        fs::write(dir.join(name), bytes).expect("write seed");
        self.count += 1;
    }
}

fn main() {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    let mut out = Out { root, count: 0 };
    text_seeds(&mut out);
    table_seeds(&mut out);
    image_seeds(&mut out);
    elf_seeds(&mut out);
    livepatch_seeds(&mut out);
    btf_seeds(&mut out);
    package_seeds(&mut out);
    symvers_seeds(&mut out);
    eprintln!(
        "gen_corpus: {} seeds under {}",
        out.count,
        out.root.display()
    );
}

/// The cache's table encoding of the text seeds' tables (the `table_decode` target).
fn table_seeds(out: &mut Out) {
    let texts: &[(&str, &[u8])] = &[
        ("target-kernel.tab", klpsym_fuzz::TARGET_KALLSYMS.as_bytes()),
        (
            "modules.tab",
            b"ffffffff81000000 T _text\nffffffffc0001000 t ext4_fill_super\t[ext4]\nffffffffc0000100 T ext4_mount\t[ext4]\n",
        ),
    ];
    for (name, text) in texts {
        let t = klpsym_sources::parse_text(text.to_vec(), &mut Resched::none())
            .expect("seed text parses")
            .table;
        let mut enc = Vec::new();
        t.encode(&mut enc, &mut Resched::none()).expect("no cancel flag");
        out.put("table_decode", name, &enc);
    }
}

fn text_seeds(out: &mut Out) {
    let seeds: &[(&str, &[u8])] = &[
        ("target-kernel.txt", klpsym_fuzz::TARGET_KALLSYMS.as_bytes()),
        (
            "vmlinux-only.txt",
            b"ffffffff81000000 T _text\nffffffff81000100 t do_one_initcall\nffffffff81000100 t alias\nffffffff82000000 D jiffies\n",
        ),
        (
            "modules-and-pseudo.txt",
            b"ffffffff81000000 T _text\nffffffffc0001000 t ext4_fill_super\t[ext4]\nffffffffc0001100 T ext4_mount\t[ext4]\nffffffffc0009000 t ftrace_trampoline\t[__builtin__ftrace]\nffffffffc000a000 t bpf_prog_1\t[bpf]\n",
        ),
        (
            "hidden-addresses.txt",
            b"0000000000000000 T _text\n0000000000000000 t dup\n0000000000000000 t dup\t[mod_a]\n",
        ),
        (
            "system-map.txt",
            b"0000000000000000 D __per_cpu_start\n0000000000001000 A irq_stack_backing_store\n         U undefined_sym\nffffffff81000000 T _text\nffffffff81000010 t .L_local\nffffffff81000020 W weak_fn\nffffffff81000030 r __kstrtab_printk\nffffffff81000040 A __crc_printk\n",
        ),
        ("32bit.txt", b"c1000000 T _text\nc1000100 t f\n"),
        (
            "stub-system-map.txt",
            b"ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n",
        ),
        ("no-newline.txt", b"ffffffff81000000 T _text"),
    ];
    for (name, bytes) in seeds {
        out.put("kallsyms_text", name, bytes);
        out.put("loader_detect", name, bytes);
    }
}

/// A kernel image holding `syms` in the layout of `o`, with a banner in clear.
fn raw_kernel(syms: &[Sym], o: Options) -> Vec<u8> {
    let mut v = b"Linux version 6.1.0-57-amd64 (fuzz@seed) (gcc-12) #1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1\n\0".to_vec();
    v.resize(256, 0);
    v.extend_from_slice(&encode(syms, o));
    v
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(b).expect("gzip");
    e.finish().expect("gzip")
}

fn xz(b: &[u8]) -> Vec<u8> {
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(b).expect("xz");
    e.finish().expect("xz")
}

/// An x86 bzImage (boot protocol 2.15) carrying `payload` followed by the decompressed size.
fn bzimage(payload: &[u8], size: usize) -> Vec<u8> {
    let setup_sects = 1u8;
    let mut v = vec![0u8; (usize::from(setup_sects) + 1) * 512];
    v[0x1f1] = setup_sects;
    v[0x202..0x206].copy_from_slice(b"HdrS");
    v[0x206..0x208].copy_from_slice(&0x20fu16.to_le_bytes());
    let off = 0x100u32;
    let len = payload.len() as u32 + 4;
    v[0x248..0x24c].copy_from_slice(&off.to_le_bytes());
    v[0x24c..0x250].copy_from_slice(&len.to_le_bytes());
    v.resize(v.len() + off as usize, 0x90);
    v.extend_from_slice(payload);
    v.extend_from_slice(&(size as u32).to_le_bytes());
    v
}

/// An arm64 EFI zboot image ("MZ", "zimg", payload offset and size at 8 and 12).
fn zboot(payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 64];
    v[0..2].copy_from_slice(b"MZ");
    v[4..8].copy_from_slice(b"zimg");
    v[8..12].copy_from_slice(&64u32.to_le_bytes());
    v[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// An arm64 `Image`: the 64-byte header with "ARM\x64" at 0x38, then the tables.
fn arm64_image(tables: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 64];
    v[0x38..0x3c].copy_from_slice(b"ARM\x64");
    v.extend_from_slice(tables);
    v
}

fn image_seeds(out: &mut Out) {
    const X86_64_TEXT: u64 = 0xffff_ffff_8100_0000;
    const ARM64_TEXT: u64 = 0xffff_8000_8000_0000;
    let eras = [
        ("addresses-first", LayoutEra::AddressesFirst),
        ("with-seqs", LayoutEra::AddressesFirstWithSeqs),
        ("tokens-before-offsets", LayoutEra::TokensBeforeOffsets),
        ("pc-relative", LayoutEra::PcRelative),
    ];
    for (n, long) in [(40usize, false), (300, true)] {
        let syms = symbols(n, long, 0);
        for (era_name, era) in eras {
            let syms: Vec<Sym> = if era == LayoutEra::PcRelative {
                syms.iter()
                    .map(|s| Sym {
                        addr: s.addr - X86_64_TEXT + ARM64_TEXT + 0x10_0000,
                        ..s.clone()
                    })
                    .collect()
            } else {
                syms.clone()
            };
            let o = Options {
                era,
                uleb: long,
                wide_markers: false,
                percpu: false,
                absolute: false,
                vbase: ARM64_TEXT,
                prefix: 4096 + 40,
            };
            let raw = raw_kernel(&syms, o);
            let tag = format!("{era_name}-{n}");
            out.put("image", &format!("raw-{tag}"), &raw);
            if n == 40 {
                out.put("image", &format!("gzip-{tag}"), &gzip(&raw));
                out.put(
                    "image",
                    &format!("bzimage-xz-{tag}"),
                    &bzimage(&xz(&raw), raw.len()),
                );
                out.put(
                    "loader_detect",
                    &format!("bzimage-xz-{tag}"),
                    &bzimage(&xz(&raw), raw.len()),
                );
            }
            if era == LayoutEra::PcRelative {
                let tables = encode(&syms, Options { prefix: 0, ..o });
                out.put("image", &format!("arm64-{tag}"), &arm64_image(&tables));
                out.put(
                    "image",
                    &format!("zboot-gzip-{tag}"),
                    &zboot(&gzip(&arm64_image(&tables))),
                );
            }
        }
    }
    // Older layouts: one-byte lengths, wide markers, absolute per-cpu, absolute addresses.
    let mut syms = symbols(60, false, 6);
    for s in &mut syms {
        s.name.truncate(100);
    }
    for (name, o) in [
        (
            "percpu",
            Options {
                era: LayoutEra::AddressesFirst,
                uleb: false,
                wide_markers: true,
                percpu: true,
                absolute: false,
                vbase: 0,
                prefix: 512,
            },
        ),
        (
            "absolute",
            Options {
                era: LayoutEra::AddressesFirst,
                uleb: false,
                wide_markers: true,
                percpu: false,
                absolute: true,
                vbase: 0,
                prefix: 512,
            },
        ),
    ] {
        let syms: Vec<Sym> = if o.percpu {
            syms.clone()
        } else {
            syms.iter().filter(|s| !s.percpu).cloned().collect()
        };
        out.put("image", &format!("raw-{name}"), &raw_kernel(&syms, o));
    }
}

/// A vmlinux-like object: text, init text, rodata with the banner, data, bss and per-cpu
/// sections, symbols of every binding and kind. `exec` makes it ET_EXEC like a linked vmlinux.
fn vmlinux(exec: bool) -> Vec<u8> {
    let banner = "Linux version 6.1.0-57-amd64 (fuzz@seed) (gcc-12) #1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1\n";
    let mut f = Fixture::new(Architecture::X86_64);
    let text = f.section(".text", SectionKind::Text, &[0x90; 0x4000]);
    let init = f.section(".init.text", SectionKind::Text, &[]);
    let mut ro = vec![0u8; 0x1000];
    ro[0x100..0x100 + banner.len()].copy_from_slice(banner.as_bytes());
    let rodata = f.section(".rodata", SectionKind::ReadOnlyData, &ro);
    let data = f.section(".data", SectionKind::Data, &[]);
    let bss = f.section(".bss", SectionKind::UninitializedData, &[]);
    let pcpu = f.section(".data..percpu", SectionKind::Data, &[]);
    let base = 0xffff_ffff_8100_0000u64;
    f.sym("_text", At::Sec(text), base, 'g', 'n');
    f.sym("_stext", At::Sec(text), base + 0x10, 'g', 'n');
    f.sym("start_kernel", At::Sec(text), base + 0x100, 'g', 'f');
    f.sym("local_fn", At::Sec(text), base + 0x200, 'l', 'f');
    f.sym("local_fn", At::Sec(text), base + 0x300, 'l', 'f');
    f.sym("weak_fn", At::Sec(text), base + 0x400, 'w', 'f');
    f.sym("_etext", At::Sec(text), base + 0x4000, 'g', 'n');
    f.sym("_sinittext", At::Sec(init), base + 0x10_0000, 'g', 'n');
    f.sym("init_fn", At::Sec(init), base + 0x10_0010, 'l', 'f');
    f.sym("_einittext", At::Sec(init), base + 0x10_1000, 'g', 'n');
    f.sym("linux_banner", At::Sec(rodata), base + 0x20_0100, 'g', 'o');
    f.sym("ro_var", At::Sec(rodata), base + 0x20_0400, 'l', 'o');
    f.sym(
        "__kstrtab_start_kernel",
        At::Sec(rodata),
        base + 0x20_0500,
        'l',
        'o',
    );
    f.sym("__crc_start_kernel", At::Abs, 0x1234_5678, 'g', 'n');
    f.sym("jiffies", At::Sec(data), base + 0x30_0000, 'g', 'o');
    f.sym("bss_var", At::Sec(bss), base + 0x40_0000, 'l', 'o');
    f.sym("__per_cpu_start", At::Sec(pcpu), 0, 'g', 'n');
    f.sym("pcpu_var", At::Sec(pcpu), 0x20, 'g', 'o');
    f.sym("__per_cpu_end", At::Sec(pcpu), 0x100, 'g', 'n');
    f.sym("$x", At::Sec(text), base + 0x500, 'l', 'n');
    f.sym("undefined_sym", At::Undef, 0, 'g', 'n');
    let mut b = f.bytes();
    if exec {
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
    }
    b
}

/// A module-like ET_REL: .modinfo, this_module, init/exit text, data, bss, rodata.
fn module() -> Vec<u8> {
    let mut f = Fixture::new(Architecture::X86_64);
    let text = f.section(".text", SectionKind::Text, &[0xc3; 64]);
    let init = f.section(".init.text", SectionKind::Text, &[0xc3; 16]);
    let exit = f.section(".exit.text", SectionKind::Text, &[0xc3; 16]);
    let ro = f.section(".rodata", SectionKind::ReadOnlyData, b"hello\0");
    let data = f.section(".data", SectionKind::Data, &[1; 32]);
    let bss = f.section(".bss", SectionKind::UninitializedData, &[]);
    f.section(
        ".modinfo",
        SectionKind::ReadOnlyData,
        b"license=GPL\0depends=dummy,ext4\0name=fuzz_mod\0vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \0",
    );
    let mut tm = vec![0u8; 0x380];
    tm[24..32].copy_from_slice(b"fuzz_mod");
    let this = f.section(".gnu.linkonce.this_module", SectionKind::Data, &tm);
    f.sym("fuzz_mod.c", At::Abs, 0, 'l', 'n');
    f.sym("helper", At::Sec(text), 0, 'l', 'f');
    f.sym("helper2", At::Sec(text), 0x10, 'l', 'f');
    f.sym("exported_fn", At::Sec(text), 0x20, 'g', 'f');
    f.sym("init_module", At::Sec(init), 0, 'g', 'f');
    f.sym("cleanup_module", At::Sec(exit), 0, 'g', 'f');
    f.sym("message", At::Sec(ro), 0, 'l', 'o');
    f.sym("counter", At::Sec(data), 0, 'g', 'o');
    f.sym("weak_var", At::Sec(data), 8, 'w', 'o');
    f.sym("zeroed", At::Sec(bss), 0, 'l', 'o');
    f.sym("__this_module", At::Sec(this), 0, 'g', 'o');
    f.sym("_printk", At::Undef, 0, 'g', 'n');
    f.bytes()
}

fn elf_seeds(out: &mut Out) {
    out.put("vmlinux_elf", "vmlinux-rel", &vmlinux(false));
    out.put("vmlinux_elf", "vmlinux-exec", &vmlinux(true));
    out.put("loader_detect", "vmlinux-exec", &vmlinux(true));
    out.put("module_elf", "module", &module());
    out.put("loader_detect", "module", &module());
}

fn livepatch_seeds(out: &mut Out) {
    let specs: Vec<(&str, ModSpec)> = vec![
        ("vmlinux-func", ModSpec::default()),
        (
            "module-func",
            ModSpec {
                name: "lp_dummy",
                objects: vec![ObjSpec {
                    name: Some("dummy"),
                    funcs: vec![("dummy_get_stats64", 0)],
                }],
                ..ModSpec::default()
            },
        ),
        (
            "ambiguous-pos",
            ModSpec {
                name: "lp_ambiguous",
                objects: vec![
                    ObjSpec {
                        name: None,
                        funcs: vec![("m_show", 2), ("cxl_set_mem_enable.isra.0", 0)],
                    },
                    ObjSpec {
                        name: Some("dummy"),
                        funcs: vec![("dummy_get_stats64", 0)],
                    },
                ],
                ..ModSpec::default()
            },
        ),
        (
            "text-refs",
            ModSpec {
                name: "lp_refs",
                text_refs: vec![
                    ("saved_command_line", consts::R_X86_64_PC32, -4),
                    ("static_counter", consts::R_X86_64_64, 0),
                    ("numdummies", consts::R_X86_64_32S, 8),
                    ("m_show", consts::R_X86_64_PLT32, -4),
                    ("_printk", consts::R_X86_64_PLT32, -4),
                ],
                ..ModSpec::default()
            },
        ),
        (
            "not-livepatch",
            ModSpec {
                name: "plain",
                livepatch: false,
                ..ModSpec::default()
            },
        ),
        (
            "dirty-slots",
            ModSpec {
                name: "lp_dirty",
                dirty_slots: true,
                text_refs: vec![("saved_command_line", consts::R_X86_64_PC32, -4)],
                ..ModSpec::default()
            },
        ),
        (
            "small-structs",
            ModSpec {
                name: "lp_old",
                func_size: 96,
                object_size: 72,
                ..ModSpec::default()
            },
        ),
    ];
    let target = klpsym_livepatch::Target::new(
        klpsym_fuzz::target_table(),
        klpsym_livepatch::KernelRules::for_version(6, 1),
        klpsym_livepatch::Arch::X86_64,
    );
    let pins = [klpsym_livepatch::Pin {
        file: None,
        object: None,
        name: "m_show".into(),
        position: 2,
    }];
    for (name, spec) in specs {
        let ko = build_module(&spec);
        out.put("livepatch_check", name, &ko);
        out.put("livepatch_convert", name, &ko);
        out.put("module_elf", &format!("lp-{name}"), &ko);
        // Converted modules hold .klp.rela sections and .klp.sym symbols: seeds for `check`.
        if let Ok((converted, report)) =
            klpsym_livepatch::convert(&ko, &target, &pins, &klpsym_fuzz::is_exported)
        {
            if !report.unchanged {
                out.put("livepatch_check", &format!("{name}-converted"), &converted);
                out.put(
                    "livepatch_convert",
                    &format!("{name}-converted"),
                    &converted,
                );
            }
        }
    }
}

fn btf_seeds(out: &mut Out) {
    use klpsym_testkit::btf::build_btf;
    let f61: &[(&str, u32)] = &[
        ("old_name", 0),
        ("new_func", 8),
        ("old_sympos", 16),
        ("nop", 148),
    ];
    let o61: &[(&str, u32)] = &[("name", 0), ("funcs", 8), ("callbacks", 16), ("kobj", 40)];
    let p61: &[(&str, u32)] = &[("mod", 0), ("objs", 8), ("states", 16), ("replace", 24)];
    out.put(
        "btf",
        "klp-6.1",
        &build_btf(&[
            ("klp_func", 152, f61),
            ("klp_object", 168, o61),
            ("klp_patch", 480, p61),
        ]),
    );
    out.put(
        "btf",
        "klp-unrelated-first",
        &build_btf(&[
            ("unrelated", 4, &[("x", 0)]),
            ("klp_patch", 480, p61),
            ("klp_func", 152, f61),
            ("klp_object", 168, o61),
        ]),
    );
    out.put(
        "btf",
        "klp-partial",
        &build_btf(&[("klp_func", 152, &[("old_name", 0)])]),
    );
}

fn package_seeds(out: &mut Out) {
    let files: [(&str, &[u8]); 5] = [
        ("./boot/vmlinuz-1.0.0-1-amd64", b"not really an image"),
        ("./boot/config-1.0.0-1-amd64", b"CONFIG_MODULES=y\n"),
        ("./boot/System.map-1.0.0-1-amd64", b"ffffffff81000000 T _text\n"),
        ("./lib/modules/1.0.0-1-amd64/kernel/fs/x.ko", b"\x7fELF"),
        ("./usr/share/doc/readme", b"ignored"),
    ];
    for c in pkg_fixture::Comp::ALL {
        let name = format!("{c:?}").to_lowercase();
        out.put("package", &format!("deb-{name}"), &pkg_fixture::deb(c, &files));
        out.put("package", &format!("rpm-{name}"), &pkg_fixture::rpm(c, &files));
    }
    // Found by the timed run: a 1 KiB RPM whose signature header claims 48 MiB of store. The
    // header reader once made room for the claim before reading (48 MiB for 1 KiB of input,
    // past the budget); now it holds only the bytes that arrive.
    let mut claim = pkg_fixture::rpm(pkg_fixture::Comp::Plain, &files);
    claim[96 + 12..96 + 16].copy_from_slice(&(48u32 << 20).to_be_bytes());
    claim.truncate(1024);
    out.put("package", "rpm-header-claims-48mib", &claim);
}

/// Module.symvers as kbuild writes it (with and without namespaces, a repeated name), plain
/// and gzip-compressed as distributions ship it (the `symvers` target).
fn symvers_seeds(out: &mut Out) {
    use std::io::Write;
    let text = b"0x1b2c3d4e\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
0x00000000\tusb_stor_probe\tdrivers/usb/storage/usb-storage\tEXPORT_SYMBOL_GPL\tUSB_STORAGE\n\
0xdeadbeef\tprintk\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
0x12345678\tkmalloc_caches\tvmlinux\tEXPORT_SYMBOL\n";
    out.put("symvers", "module-symvers", text);
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(text).expect("gzip in memory");
    out.put("symvers", "symvers-gz", &z.finish().expect("gzip in memory"));
}
