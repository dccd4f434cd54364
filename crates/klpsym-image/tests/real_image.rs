//! Real-kernel check: the entries decoded from a distro vmlinuz must print byte-identically to
//! the `/proc/kallsyms` (vmlinux part, no modules loaded) captured from that kernel booted under
//! QEMU with KASLR off. Paths come from KLPSYM_TEST_VMLINUZ and KLPSYM_TEST_KALLSYMS; without
//! them the test says so and passes (CI wires them in).

#[test]
fn vmlinuz_matches_captured_proc_kallsyms() {
    let (Some(image), Some(kallsyms)) = (
        std::env::var_os("KLPSYM_TEST_VMLINUZ"),
        std::env::var_os("KLPSYM_TEST_KALLSYMS"),
    ) else {
        klpsym_testkit::lab::skip(
            "a real image against its kernel's capture",
            "KLPSYM_TEST_VMLINUZ and KLPSYM_TEST_KALLSYMS are not set (run scripts/test.sh)",
        );
        return;
    };
    let bytes = std::fs::read(&image).expect("read KLPSYM_TEST_VMLINUZ");
    let want = std::fs::read_to_string(&kallsyms).expect("read KLPSYM_TEST_KALLSYMS");
    let syms = klpsym_image::extract(&bytes, 1 << 30).expect("extract kallsyms");
    assert!(syms
        .version
        .as_deref()
        .is_some_and(|v| v.starts_with("Linux version ")));
    let got = syms.to_proc_kallsyms();
    if got != want {
        let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
        let first = g.iter().zip(&w).position(|(a, b)| a != b);
        panic!(
            "decoded {} lines, captured {}; first difference at line {:?}: got {:?}, want {:?}",
            g.len(),
            w.len(),
            first,
            first.map(|i| g[i]),
            first.map(|i| w[i])
        );
    }
}
