//! The kernel version an answer depends on: stated, read from a pasted oops's own header, or
//! said to be assumed — here the size `%pS` gives a symbol of a module a saved kallsyms lists
//! ("module/kallsyms: fix nextval for data symbol lookup").

use klpsym::{CacheDir, KernelVersion, Options, Trace, VersionSource};

/// A saved kallsyms (no banner): a vmlinux and a module `crc7` laid out as 6.1 lays it out
/// (one allocation: its text page, then read-only data beginning with the notes, 0x24 in,
/// then data).
const KALLSYMS: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T _stext
ffffffff81000100 T do_thing
ffffffff81001000 T _etext
ffffffff81002000 B _end
ffffffffc0a00000 t crc7_be\t[crc7]
ffffffffc0a00400 t crc7_helper\t[crc7]
ffffffffc0a01024 r _note_9\t[crc7]
ffffffffc0a010c0 d __this_module\t[crc7]
ffffffffc0a01500 d crc7_table\t[crc7]
";

fn open(version: Option<&str>) -> (tempfile::TempDir, klpsym::Kernel) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kallsyms");
    std::fs::write(&path, KALLSYMS).unwrap();
    let mut opts = Options::new().cache(CacheDir::Off);
    if let Some(v) = version {
        opts = opts.kernel_version(v.parse().unwrap());
    }
    let k = klpsym::open(&path, &opts).unwrap();
    (dir, k)
}

fn text(k: &klpsym::Kernel, addr: u64) -> String {
    k.describe_address("", addr).text.unwrap()
}

#[test]
fn a_stated_6_1_bounds_module_symbols_by_the_text_end() {
    let (_d, k) = open(Some("6.1.192"));
    assert_eq!(
        k.kernel_version(),
        (
            Some(KernelVersion::new(6, 1, Some(192))),
            VersionSource::Stated
        )
    );
    // The function before the notes: to the text's end, not to the next symbol.
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_0410),
        "crc7_helper+0x10/0xc00 [crc7]"
    );
    // Data: the text's end minus its value, wrapped (what 6.1 prints).
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_10c0),
        "__this_module+0x0/0xffffffffffffff40 [crc7]"
    );
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_1500),
        "crc7_table+0x0/0xfffffffffffffb00 [crc7]"
    );
    // vmlinux is not concerned.
    assert_eq!(text(&k, 0xffff_ffff_8100_0110), "do_thing+0x10/0xf00");
    // The version decides: nothing assumed.
    let a = [k.describe_address("", 0xffff_ffff_c0a0_10c0)];
    assert_eq!(k.version_assumed(&a), None);
    // The batch path answers alike.
    let addrs = [0xffff_ffff_c0a0_0410, 0xffff_ffff_c0a0_10c0];
    let b: Vec<String> = k
        .symbolize_batch(&addrs)
        .unwrap()
        .iter()
        .map(|o| match o {
            klpsym::SymbolizeOutcome::Found(s) => s.to_string(),
            o => format!("{o:?}"),
        })
        .collect();
    assert_eq!(
        b,
        [
            "crc7_helper+0x10/0xc00 [crc7]",
            "__this_module+0x0/0xffffffffffffff40 [crc7]"
        ]
    );
}

#[test]
fn a_kernel_that_took_the_change_bounds_them_by_their_region() {
    for v in ["7.2.13", "6.12.117", "7.3"] {
        let (_d, k) = open(Some(v));
        // A function's size ends with the text (its region) here too.
        assert_eq!(
            text(&k, 0xffff_ffff_c0a0_0410),
            "crc7_helper+0x10/0xc00 [crc7]",
            "{v}"
        );
        // Past the text, in no region the kallsyms shows: the number.
        assert_eq!(text(&k, 0xffff_ffff_c0a0_1010), "0xffffffffc0a01010", "{v}");
        assert_eq!(
            text(&k, 0xffff_ffff_c0a0_10c0),
            "__this_module+0x0/0x440 [crc7]",
            "{v}"
        );
        let a = [k.describe_address("", 0xffff_ffff_c0a0_10c0)];
        assert_eq!(k.version_assumed(&a), None, "{v}");
    }
    // 6.12.95 keeps the old rule.
    let (_d, k) = open(Some("6.12.95"));
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_10c0),
        "__this_module+0x0/0xffffffffffffff40 [crc7]"
    );
}

#[test]
fn an_unknown_version_says_which_rule_it_assumed_where_it_matters() {
    let (_d, k) = open(None);
    assert_eq!(k.kernel_version(), (None, VersionSource::Unknown));
    let data = [k.describe_address("", 0xffff_ffff_c0a0_10c0)];
    let n = k.version_assumed(&data).expect("said");
    assert_eq!(n.level, klpsym::Level::Warning);
    assert_eq!(n.input, Some(klpsym::Input::KernelVersion));
    assert!(
        n.text.contains("fix nextval for data symbol lookup"),
        "{}",
        n.text
    );
    assert!(n.text.contains("not known"), "{}", n.text);
    // A vmlinux answer, and a module one both rules give alike, assume nothing.
    let same = [
        k.describe_address("", 0xffff_ffff_8100_0110),
        k.describe_address("", 0xffff_ffff_c0a0_0010),
    ];
    assert_eq!(k.version_assumed(&same), None);
    // A series that took the change in a stable release, without its sublevel.
    let (_d, k) = open(Some("6.12"));
    let n = k.version_assumed(&data).expect("said");
    assert!(n.text.contains("stable sublevel of 6.12"), "{}", n.text);
    // A series that did not: the series decides.
    let (_d, k) = open(Some("6.1"));
    assert_eq!(k.version_assumed(&data), None);
}

#[test]
fn a_pasted_oops_tells_the_version_where_nothing_else_does() {
    let oops = "[    5.1] CPU: 0 PID: 1 Comm: x Not tainted 6.1.0-57-amd64 #1 Debian 6.1.192-3\n\
                [    5.2] Call Trace:\n\
                ffffffffc0a010c0\n";
    let trace = Trace::read(oops.as_bytes(), false).unwrap();
    assert_eq!(
        trace.kernel_version(),
        Some((KernelVersion::new(6, 1, Some(192)), 1))
    );
    let (_d, mut k) = open(None);
    // Found before the trace is heard: the newer rule.
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_10c0),
        "__this_module+0x0/0x440 [crc7]"
    );
    let note = k.hear_trace(&trace).expect("said");
    assert_eq!(note.level, klpsym::Level::Note);
    assert!(note.text.contains("6.1.192"), "{}", note.text);
    assert_eq!(
        k.kernel_version(),
        (
            Some(KernelVersion::new(6, 1, Some(192))),
            VersionSource::Trace { line: 1 }
        )
    );
    let (answers, _) = k.answer_trace(&trace, false);
    assert_eq!(
        answers[0].text.as_deref(),
        Some("__this_module+0x0/0xffffffffffffff40 [crc7]")
    );
    assert_eq!(k.version_assumed(&answers), None);
    // A stated version wins; a trace of another version is warned about.
    let (_d, mut k) = open(Some("7.2.13"));
    let w = k.hear_trace(&trace).expect("warned");
    assert_eq!(w.level, klpsym::Level::Warning);
    assert!(w.text.contains("not this trace's"), "{}", w.text);
    assert_eq!(
        text(&k, 0xffff_ffff_c0a0_10c0),
        "__this_module+0x0/0x440 [crc7]"
    );
}
