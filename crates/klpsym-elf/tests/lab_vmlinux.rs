//! Real-kernel check for the vmlinux path: the vmlinux part of a captured
//! /proc/kallsyms (booted without KASLR, so addresses are link addresses) must
//! equal what `vmlinux_kallsyms` computes from the same build's unstripped
//! vmlinux (Debian: linux-image-<abi>-amd64-dbg, /usr/lib/debug/boot/vmlinux-*).
//!
//! Inputs (skipped when unset): `KLPSYM_TEST_VMLINUX` (the unstripped vmlinux)
//! and `KLPSYM_TEST_KALLSYMS_NOMOD` (/proc/kallsyms captured before loading
//! modules; lines with a module field are ignored anyway).

use klpsym_elf::vmlinux_kallsyms;

#[test]
fn captured_vmlinux_kallsyms_match() {
    let (Ok(vmlinux), Ok(kallsyms)) = (
        std::env::var("KLPSYM_TEST_VMLINUX"),
        std::env::var("KLPSYM_TEST_KALLSYMS_NOMOD"),
    ) else {
        klpsym_testkit::lab::skip(
            "a vmlinux against a real kernel's capture",
            "KLPSYM_TEST_VMLINUX and KLPSYM_TEST_KALLSYMS_NOMOD are not set (run scripts/test.sh)",
        );
        return;
    };
    let elf = std::fs::read(&vmlinux).expect("read vmlinux");
    let text = std::fs::read_to_string(&kallsyms).expect("read kallsyms capture");
    let kernel: Vec<(u64, u8, &str)> = text
        .lines()
        .filter(|l| !l.contains('\t'))
        .map(|l| {
            let mut it = l.splitn(3, ' ');
            let addr = u64::from_str_radix(it.next().unwrap(), 16).expect("hex address");
            let kind = it.next().unwrap().as_bytes()[0];
            (addr, kind, it.next().unwrap_or(""))
        })
        .collect();
    let ours = vmlinux_kallsyms(&elf, None).expect("vmlinux parses");
    eprintln!(
        "version {:?}, kallsyms_all {} ({}), notes {:?}",
        ours.version, ours.kallsyms_all, ours.kallsyms_all_source, ours.notes
    );
    let ours: Vec<(u64, u8, &str)> = ours
        .entries
        .iter()
        .map(|e| (e.addr, e.kind, e.name))
        .collect();
    let mut diffs = Vec::new();
    for i in 0..ours.len().max(kernel.len()) {
        let (o, k) = (ours.get(i), kernel.get(i));
        if o != k {
            diffs.push(format!("at {i}: kernel {k:x?}, ours {o:x?}"));
            if diffs.len() >= 20 {
                break;
            }
        }
    }
    eprintln!("kernel {} entries, ours {}", kernel.len(), ours.len());
    assert!(diffs.is_empty(), "first differences:\n{}", diffs.join("\n"));
}
