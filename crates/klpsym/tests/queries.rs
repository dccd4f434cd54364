//! What `lookup` and `sympos` say beside the kernel's answer: that a kernel loads no livepatch
//! at all, and the compiler-made variants of a missing name (the same hint from both).

use klpsym::{CacheDir, LookupQuery, LookupVerdict, Options};

/// A kallsyms text of a whole kernel (more than the 1000 vmlinux symbols below which a table
/// says nothing of the kernel's configuration), with or without `klp_enable_patch`.
fn kernel(livepatch: bool) -> (tempfile::TempDir, klpsym::Kernel) {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("ffffffff81000000 T _text\n");
    for i in 0..1500u64 {
        text += &format!("{:016x} t fn_{i}\n", 0xffff_ffff_8100_1000 + i * 0x40);
    }
    text += "ffffffff81200000 t init_once.isra.0\n";
    if livepatch {
        text += "ffffffff81300000 T klp_enable_patch\n";
    }
    let path = dir.path().join("kallsyms");
    std::fs::write(&path, text).unwrap();
    let k = klpsym::open(&path, &Options::new().cache(CacheDir::Off)).unwrap();
    (dir, k)
}

#[test]
fn a_kernel_without_livepatch_is_said_to_load_no_patch() {
    let (_d, k) = kernel(false);
    let a = k.lookup(&LookupQuery::new("fn_7")).unwrap();
    assert_eq!(a.verdict, LookupVerdict::Found);
    let why = a.livepatch_unsupported.expect("said");
    assert!(why.contains("klp_enable_patch"), "{why}");
    assert!(k
        .sympos("fn_7", None, None)
        .unwrap()
        .livepatch_unsupported
        .is_some());

    let (_d, k) = kernel(true);
    assert_eq!(
        k.lookup(&LookupQuery::new("fn_7"))
            .unwrap()
            .livepatch_unsupported,
        None
    );
    assert_eq!(
        k.sympos("fn_7", None, None).unwrap().livepatch_unsupported,
        None
    );
}

#[test]
fn sympos_and_lookup_give_the_same_variant_hint() {
    let (_d, k) = kernel(true);
    let a = k.lookup(&LookupQuery::new("init_once")).unwrap();
    assert_eq!(a.verdict, LookupVerdict::NotFound);
    let d = k.sympos("init_once", None, None).unwrap();
    assert!(d.candidates.is_empty());
    assert_eq!(a.variants, vec!["init_once.isra.0 [vmlinux]".to_string()]);
    assert_eq!(d.variants, a.variants);
}

/// `%pS` and `%pB` at vmlinux's end, as the lab's kernels print them: kallsyms lists symbols
/// past `_end`, but the kernel symbolizes only `[_stext, _end)` (a kallsyms copy tells no
/// version: today's rule) and prints the number elsewhere; `%pB` names the symbol of
/// `address - 1` with the offset plus one.
#[test]
fn symbolize_stops_at_the_kernels_end_and_return_addresses_name_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let text = "ffffffff81000000 T _stext\n\
                ffffffff81000000 T startup_64\n\
                ffffffff81000040 t second\n\
                ffffffff84430000 B _end\n\
                ffffffff84600000 D __init_scratch_end\n";
    let path = dir.path().join("kallsyms");
    std::fs::write(&path, text).unwrap();
    let k = klpsym::open(&path, &Options::new().cache(CacheDir::Off)).unwrap();
    let ps = |a: u64| k.describe_address("", a);
    assert_eq!(
        ps(0xffffffff81000040).text.as_deref(),
        Some("second+0x0/0x342ffc0")
    );
    assert_eq!(
        ps(0xffffffff8442ffff).text.as_deref(),
        Some("second+0x342ffbf/0x342ffc0")
    );
    for past in [0xffffffff84430000, 0xffffffff84430001] {
        let a = ps(past);
        assert_eq!(
            (a.found, a.reason),
            (false, Some(klpsym::NoSymbol::OutsideKernel)),
            "{a:?}"
        );
        assert_eq!(a.text, Some(format!("{past:#x}")), "%pS prints the number");
        assert_eq!(a.nearest.as_deref(), Some("_end"));
    }
    let pb = |a: u64| k.describe_return_address("", a).text;
    // A return address at the next function's first byte belongs to the call before it (the
    // first of two names at one address, in kallsyms order).
    assert_eq!(pb(0xffffffff81000040).as_deref(), Some("_stext+0x40/0x40"));
    assert_eq!(
        pb(0xffffffff84430000).as_deref(),
        Some("second+0x342ffc0/0x342ffc0")
    );
    // No symbol: %pB prints the address itself, not the one it looked up.
    assert_eq!(
        pb(0xffffffff84430001).as_deref(),
        Some("0xffffffff84430001")
    );
}
