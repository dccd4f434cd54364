//! Since 6.4 the module loader holds a module's `.gnu.linkonce.this_module` to the size of the
//! kernel's own `struct module`. `check` learns that size from the target: the kernel's BTF
//! (its image, or `--btf`), else a module of its tree (modpost writes the struct into every
//! module). Each test fails when that source is not read: the check is then "not checked".

use std::path::{Path, PathBuf};

use klpsym::{CacheDir, CheckOptions, Options, Patch, TargetOptions};
use klpsym_livepatch::{CheckStatus, PatchVerdictKind, ProblemKind};
use klpsym_testkit::elf::{At, Fixture};
use klpsym_testkit::module::{build_module, ModSpec};
use object::{Architecture, SectionKind};

/// A folder with a kernel (kallsyms text), and a module tree holding one ordinary module
/// (`dummy.ko`, `tree_module`'s bytes).
fn target(dir: &Path, tree_module: &[u8]) {
    let kallsyms = [
        "ffffffff81000000 T _text",
        "ffffffff81100000 t static_helper",
        "ffffffff81180000 T klp_enable_patch",
    ]
    .join("\n")
        + "\n";
    std::fs::write(dir.join("kallsyms"), kallsyms).unwrap();
    let mods = dir.join("mods/kernel/net");
    std::fs::create_dir_all(&mods).unwrap();
    std::fs::write(mods.join("dummy.ko"), tree_module).unwrap();
}

/// An ordinary module; with `this_module`, a `.gnu.linkonce.this_module` of 4096 bytes (the
/// fixture's smallest section), else none.
fn fixture_module(this_module: bool) -> Vec<u8> {
    let mut f = Fixture::new(Architecture::X86_64);
    f.section(".modinfo", SectionKind::ReadOnlyData, b"name=dummy\0");
    if this_module {
        f.section(".gnu.linkonce.this_module", SectionKind::Data, &[]);
    }
    let text = f.section(".text", SectionKind::Text, &[0xc3; 16]);
    f.sym("dummy_fn", At::Sec(text), 0, 'g', 'f');
    f.bytes()
}

/// A module built like the patch (its `struct module` the same size).
fn same_struct_module() -> Vec<u8> {
    build_module(&ModSpec {
        name: "dummy",
        ..ModSpec::default()
    })
}

/// `check` of the test module against the folder's kernel under `version`'s rules.
fn check(dir: &Path, version: &str, btf: Option<PathBuf>) -> klpsym::KernelCheck {
    let patch = dir.join("lp.ko");
    std::fs::write(&patch, build_module(&ModSpec::default())).unwrap();
    let opts = Options::new()
        .cache(CacheDir::Off)
        .modules(dir.join("mods"))
        .kernel_version(version.parse().unwrap());
    let kernel = klpsym::open(dir.join("kallsyms"), &opts).unwrap();
    let copts = CheckOptions {
        target: TargetOptions {
            btf,
            ..TargetOptions::default()
        },
        ..CheckOptions::default()
    };
    let p = Patch::read(&patch, &opts).unwrap();
    let mut run = klpsym::check(&p, &[&kernel], &copts).unwrap();
    assert!(run.failed.is_empty(), "{:?}", run.failed);
    run.results.remove(0)
}

fn this_module(r: &klpsym::KernelCheck) -> Option<(CheckStatus, String)> {
    r.report
        .loader_checks
        .iter()
        .find(|c| c.check == "this_module")
        .map(|c| (c.status, c.detail.clone()))
}

/// The size of the module the patch module carries (the test kit's `struct module`).
fn patch_struct_size() -> usize {
    let bytes = build_module(&ModSpec::default());
    let m = klpsym_livepatch::LivepatchModule::parse(&bytes).unwrap();
    m.elf
        .sections
        .iter()
        .find(|s| s.name == ".gnu.linkonce.this_module")
        .unwrap()
        .size as usize
}

#[test]
fn a_module_of_the_tree_gives_the_size_and_decides_the_load() {
    let dir = tempfile::tempdir().unwrap();
    // The tree's struct module is another size: refused at load, before the vermagic.
    target(dir.path(), &fixture_module(true));
    let r = check(dir.path(), "6.12", None);
    assert_eq!(r.report.verdict.kind, PatchVerdictKind::RefusedAtLoad);
    let p = r
        .report
        .problems
        .iter()
        .find(|p| p.reached)
        .expect("a problem the kernel reaches");
    assert_eq!(p.kind, ProblemKind::ThisModule);
    assert!(p.log[0].ends_with(
        ".gnu.linkonce.this_module section size must match the kernel's built struct module size at run time"
    ));
    let (status, detail) = this_module(&r).unwrap();
    assert_eq!(status, CheckStatus::Failed);
    assert!(
        detail.contains("sizeof(struct module) is 4096") && detail.contains("dummy.ko"),
        "{detail}"
    );
    // 6.1 has no such check.
    assert_eq!(this_module(&check(dir.path(), "6.1", None)), None);
    // The same size passes.
    let dir = tempfile::tempdir().unwrap();
    target(dir.path(), &same_struct_module());
    let (status, detail) = this_module(&check(dir.path(), "6.12", None)).unwrap();
    assert_eq!(status, CheckStatus::Passed, "{detail}");
}

#[test]
fn without_a_source_it_is_not_checked_and_btf_gives_the_size() {
    let own = patch_struct_size();
    let dir = tempfile::tempdir().unwrap();
    target(dir.path(), &fixture_module(false));
    let r = check(dir.path(), "7.2", None);
    assert_eq!(this_module(&r).unwrap().0, CheckStatus::NotChecked);
    assert!(
        r.unchecked
            .iter()
            .any(|u| u.to_string().contains("this_module")),
        "{:?}",
        r.unchecked
    );
    // --btf: the named BTF's struct module (with the klp structs its layouts need).
    let btf = klpsym_testkit::btf::build_btf(&[
        (
            "klp_func",
            168,
            &[("old_name", 0), ("new_func", 8), ("old_sympos", 16)],
        ),
        ("klp_object", 168, &[("name", 0), ("funcs", 8)]),
        ("klp_patch", 200, &[("mod", 0), ("objs", 8)]),
        ("module", own as u32 + 8, &[("name", 24)]),
    ]);
    std::fs::write(dir.path().join("btf"), btf).unwrap();
    let r = check(dir.path(), "7.2", Some(dir.path().join("btf")));
    let (status, detail) = this_module(&r).unwrap();
    assert_eq!(status, CheckStatus::Failed, "{detail}");
    assert!(detail.contains("struct module in"), "{detail}");
}
