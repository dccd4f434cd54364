//! The real kernel is the judge: klpsym's answers from the Debian kernel package equal what the
//! booted kernel printed in /proc/kallsyms (captured by lab/capture-kallsyms.sh).
//!
//! Inputs come from scripts/test.sh; without them these tests say they skipped, unless
//! KLPSYM_REQUIRE_LAB is set (CI), where a missing input fails.

mod common;
use common::lab;

use std::process::Command;

fn klpsym(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .output()
        .unwrap()
}

/// `klpsym dump --kernel $source_var` must be byte-identical to the booted kernel's capture.
fn assert_dump_equals_capture(source_var: &str) {
    let (Some(source), Some(kallsyms)) = (lab(source_var), lab("KLPSYM_TEST_KALLSYMS_NOMOD"))
    else {
        return;
    };
    let o = klpsym(&["dump".as_ref(), "--kernel".as_ref(), source.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout == std::fs::read(&kallsyms).unwrap(),
        "klpsym dump of {} differs from {}",
        source.display(),
        kallsyms.display()
    );
}

#[test]
fn dump_of_the_debian_vmlinuz_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("KLPSYM_TEST_VMLINUZ");
}

#[test]
fn dump_of_the_stripped_vmlinux_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("KLPSYM_TEST_VMLINUX_STRIPPED");
}

#[test]
fn dump_of_the_dbg_vmlinux_elf_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("KLPSYM_TEST_VMLINUX");
}

/// vmlinuz + the package's .ko files of the loaded modules, placed by the captured
/// /proc/kallsyms: the whole file back, byte for byte (names, types, order, addresses).
#[test]
fn vmlinuz_plus_module_files_rebuild_the_kallsyms_with_modules() {
    let (Some(vmlinuz), Some(mods), Some(loaded), Some(dir)) = (
        lab("KLPSYM_TEST_VMLINUZ"),
        lab("KLPSYM_TEST_KALLSYMS_MODS"),
        lab("KLPSYM_TEST_MODULES_LOADED"),
        lab("KLPSYM_TEST_MODULES_DIR"),
    ) else {
        return;
    };
    let proc_modules = loaded.with_file_name("proc-modules.txt");
    let loaded_arg = format!("@{}", proc_modules.display());
    let o = klpsym(&[
        "dump".as_ref(),
        "-k".as_ref(),
        vmlinuz.as_os_str(),
        "--modules".as_ref(),
        dir.as_os_str(),
        "--loaded".as_ref(),
        loaded_arg.as_ref(),
        "--place-from".as_ref(),
        mods.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = std::fs::read_to_string(&mods).unwrap();
    let got = String::from_utf8(o.stdout).unwrap();
    if got != want {
        let first = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        panic!(
            "differs at {first:?} (lines: got {}, want {})",
            got.lines().count(),
            want.lines().count()
        );
    }
    // Without placement, every module symbol (name, type, order) still matches the kernel's.
    let o = klpsym(&[
        "dump".as_ref(),
        "-k".as_ref(),
        vmlinuz.as_os_str(),
        "--modules".as_ref(),
        dir.as_os_str(),
        "--loaded".as_ref(),
        loaded_arg.as_ref(),
    ]);
    assert!(o.status.success());
    let strip = |s: &str| {
        s.lines()
            .filter(|l| l.contains('\t'))
            .map(|l| l[17..].to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&String::from_utf8(o.stdout).unwrap()), strip(&want));
}
