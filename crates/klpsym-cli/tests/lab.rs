//! The real kernel is the judge: klpsym's answers from the Debian kernel package equal what the
//! booted kernel printed in /proc/kallsyms (captured by lab/capture-kallsyms.sh).
//!
//! Inputs come from scripts/test.sh; without them these tests say they skipped, unless
//! KLPSYM_REQUIRE_LAB is set (CI), where a missing input fails.

mod common;
use common::{lab_kernels, LabKernel};

use std::process::Command;

fn klpsym(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .output()
        .unwrap()
}

/// `klpsym dump --kernel SOURCE` must be byte-identical to the booted kernel's capture, on
/// every kernel of the lab matrix; `key` names the source in the kernel's lab.env.
fn assert_dump_equals_capture(key: &str) {
    let kernels = lab_kernels();
    for k in &kernels {
        if k.get(key).is_none() {
            // Only arm64 lacks these (its image is not an ELF; its -dbg package is not fetched).
            assert_ne!(k.value("ARCH"), "amd64", "{}: lab.env has no {key}", k.name);
            eprintln!(
                "{}: no {key} in the lab ({} kernel): not compared",
                k.name,
                k.value("ARCH")
            );
            continue;
        }
        let (source, kallsyms) = (k.path(key), k.path("KALLSYMS_NOMOD"));
        // Through the cache (the file read whole and hashed) and without it (a stripped
        // vmlinux is then read without its code): the same bytes.
        for cache in ["--cache-dir", "--no-cache"] {
            let dir = std::env::temp_dir().join(format!("klpsym-lab-dump-{}", std::process::id()));
            let mut args = vec!["dump".as_ref(), cache.as_ref()];
            if cache == "--cache-dir" {
                args.push(dir.as_os_str());
            }
            args.extend(["--kernel".as_ref(), source.as_os_str()]);
            let o = klpsym(&args);
            let _ = std::fs::remove_dir_all(&dir);
            assert!(
                o.status.success(),
                "{}: {}",
                k.name,
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(
                o.stdout == std::fs::read(&kallsyms).unwrap(),
                "{}: klpsym dump {cache} of {} differs from {}",
                k.name,
                source.display(),
                kallsyms.display()
            );
        }
        eprintln!("{}: dump of {key} is byte-identical", k.name);
    }
}

#[test]
fn dump_of_the_debian_vmlinuz_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("VMLINUZ");
}

#[test]
fn dump_of_the_stripped_vmlinux_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("VMLINUX");
}

#[test]
fn dump_of_the_dbg_vmlinux_elf_equals_the_booted_kernels_kallsyms() {
    assert_dump_equals_capture("VMLINUX_DBG");
}

/// vmlinuz + the package's module files (as shipped) of the loaded modules, placed by the
/// captured /proc/kallsyms: the whole file back, byte for byte (names, types, order,
/// addresses), on every kernel of the lab matrix.
#[test]
fn vmlinuz_plus_module_files_rebuild_the_kallsyms_with_modules() {
    for k in &lab_kernels() {
        rebuild_kallsyms_with_modules(k);
        eprintln!("{}: kallsyms with modules rebuilt byte for byte", k.name);
    }
}

fn rebuild_kallsyms_with_modules(k: &LabKernel) {
    let (vmlinuz, mods, loaded, dir) = (
        k.path("VMLINUZ"),
        k.path("KALLSYMS_MODS"),
        k.path("MODULES_LOADED"),
        k.path("MODULES_DIR"),
    );
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
    assert!(
        o.status.success(),
        "{}: {}",
        k.name,
        String::from_utf8_lossy(&o.stderr)
    );
    let want = std::fs::read_to_string(&mods).unwrap();
    let got = String::from_utf8(o.stdout).unwrap();
    if got != want {
        let first = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        panic!(
            "{}: differs at {first:?} (lines: got {}, want {})",
            k.name,
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
    assert_eq!(
        strip(&String::from_utf8(o.stdout).unwrap()),
        strip(&want),
        "{}",
        k.name
    );
}
