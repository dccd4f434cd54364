//! Kernels as inputs: every source form, several at once, broken or hidden ones among good ones.

use crate::*;

#[test]
fn dump_round_trips_byte_for_byte() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["dump", "-k", &k]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), SAMPLE);
    let out = f.dir.path().join("out.txt");
    let o = run(&["dump", "-k", &k, "--output", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), SAMPLE);
    let o = run(&["dump", "-k", &k, "--object", "nf_tables"]);
    assert_eq!(stdout(&o).lines().count(), 4);
}

#[test]
fn malformed_inputs_name_the_file_and_line() {
    let f = Fixture::new();
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "badhex.txt",
            b"ffffffff81000000 T a\nzzzz T b\n",
            "badhex.txt: line 2: bad hex address",
        ),
        (
            "cols.txt",
            b"ffffffff81000000 T\n",
            "cols.txt: line 1: missing columns",
        ),
        ("empty.txt", b"", "empty.txt: empty input"),
        (
            "bin.dat",
            b"\x00\x01\x02garbage",
            "bin.dat: no kallsyms tables found",
        ),
        (
            "elf.o",
            b"\x7fELF\x02\x01\x01\x00",
            "elf.o: not a parsable ELF object",
        ),
    ];
    for (name, content, want) in cases {
        let p = f.file(name, content);
        let o = run(&["lookup", "x", "-k", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(stderr(&o).contains(want), "{name}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{name}");
    }
    let long = format!("ffffffff81000000 T {}\n", "n".repeat(700));
    let p = f.file("long.txt", long.as_bytes());
    let o = run(&["info", "-k", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("long.txt: line 1: symbol name of 700 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn hidden_addresses_warn_and_names_still_work() {
    let f = Fixture::new();
    let p = f.file(
        "hidden.txt",
        b"0000000000000000 T a\n0000000000000000 t dup\n0000000000000000 t dup\n",
    );
    let k = p.to_str().unwrap();
    let o = run(&["lookup", "dup", "-k", k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("kptr_restrict"), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("livepatch: unresolvable ambiguity"));
    let o = run(&["lookup", "dup", "-p", "2", "-k", k]);
    assert_eq!(o.status.code(), Some(0));
    let o = run(&["addr", "ffffffff81000000", "-k", k]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("addresses are hidden"));
}

/// One kernel whose addresses are hidden is a failure row of its own: the other kernel still
/// answers, the run ends 2 (an input failed), and the row says what kind of failure it is.
#[test]
fn a_kernel_with_hidden_addresses_does_not_sink_the_others() {
    let f = Fixture::new();
    let good = sample(&f);
    let hidden = f.file(
        "hidden.txt",
        b"0000000000000000 T a\n0000000000000000 t b\n",
    );
    let o = run(&[
        "addr",
        "ffffffff81000010",
        "-k",
        &good,
        "-k",
        hidden.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{v}");
    assert_eq!(results[0]["kernel"], good.as_str());
    assert_eq!(results[0]["addresses"][0]["found"], true, "{v}");
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0]["kernel"], hidden.to_str().unwrap());
    assert_eq!(failed[0]["kind"], "bad_input");
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("addresses are hidden"));
}

/// How a run over several kernels ends is one rule for every verb: an answer that says no on
/// one kernel makes the run say no (exit 1); a kernel that cannot be read makes it 2, its row
/// typed, while the others still answer.
#[test]
fn a_run_says_no_when_one_kernel_does_and_fails_when_one_is_unreadable() {
    let f = Fixture::new();
    let a = sample(&f);
    let b = f.file(
        "b.txt",
        b"ffffffff81000000 T _text\nffffffff81000100 t other\n",
    );
    let b = b.to_str().unwrap();
    let o = run(&["search", "init_*", "-k", &a, "-k", b]);
    assert_eq!(o.status.code(), Some(1), "no match on b: {}", stderr(&o));
    let o = run(&["search", "_text", "-k", &a, "-k", b]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let missing = f.dir.path().join("missing.txt");
    let o = run(&[
        "search",
        "_text",
        "-k",
        &a,
        "-k",
        missing.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["failed"][0]["kind"], "not_found", "{v}");
    // Alone, the missing kernel's error is the run's: one JSON error document.
    let o = run(&["search", "_text", "-k", missing.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "not_found", "{v}");
}

#[test]
fn several_kernels_at_once() {
    let f = Fixture::new();
    let a = sample(&f);
    let b = f.file(
        "b.txt",
        b"ffffffff81000000 T _text\nffffffff81000100 t init_once\n",
    );
    let o = run(&[
        "lookup",
        "init_once",
        "-k",
        &a,
        "-k",
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "ambiguous in one kernel");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["verdict"], "ambiguous");
    assert_eq!(v["results"][1]["verdict"], "found");
}

/// The live kernel: every name's positions and every symbol start's address lookup agree
/// with a straight reading of /proc/kallsyms. Runs when the file is readable with real
/// addresses (root with kptr_restrict <= 1); says why it skipped otherwise.
#[test]
fn live_proc_kallsyms_agrees_with_a_straight_reading() {
    let path = Path::new("/proc/kallsyms");
    let Ok(text) = std::fs::read_to_string(path) else {
        klpsym_testkit::lab::skip("the live /proc/kallsyms", "not readable");
        return;
    };
    if text.lines().all(|l| l.starts_with("0000000000000000")) {
        klpsym_testkit::lab::skip(
            "the live /proc/kallsyms",
            "addresses are hidden (run as root with kptr_restrict <= 1)",
        );
        return;
    }
    let o = run(&["dump"]);
    assert_eq!(o.status.code(), Some(0));
    // /proc/kallsyms can change between two reads (modules, BPF); compare only when stable.
    let again = std::fs::read_to_string(path).unwrap();
    if again == text {
        assert!(
            o.stdout == text.as_bytes(),
            "dump differs from /proc/kallsyms"
        );
    }
}

#[test]
fn a_directory_of_kernels_is_every_kernel_in_it() {
    let f = Fixture::new();
    let dir = f.dir.path().join("kernels");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), SAMPLE).unwrap();
    std::fs::write(
        dir.join("b.txt"),
        "ffffffff81000000 T _text\nffffffff81000100 t init_once\n",
    )
    .unwrap();
    let o = run(&["lookup", "init_once", "--json", "-k", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results[0]["kernel"].as_str().unwrap().ends_with("a.txt"));
    assert_eq!(results[0]["verdict"], "ambiguous");
    assert_eq!(results[1]["verdict"], "found");
    let empty = f.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(&["info", "-k", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("holds no kernel source files"));
}

/// Regression: on /proc/kallsyms the version was null and check used "6.1 rules".
#[test]
fn the_running_kernel_knows_its_version() {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        klpsym_testkit::lab::skip(
            "the running kernel's version",
            "no /proc/sys/kernel/osrelease",
        );
        return;
    };
    let o = run(&["info", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["version"].as_str(), Some(release.trim()));
    assert!(v["banner"]
        .as_str()
        .is_some_and(|b| b.starts_with("Linux version ")));
}

/// One kernel that cannot be read does not sink the others: they answer, it is reported on
/// stderr, and the run ends with exit 2. `check` gives it a row of its own in the matrix.
#[test]
fn a_broken_kernel_among_good_ones_gets_its_error_and_the_others_answer() {
    let f = Fixture::new();
    let good = f.file("good.txt", SAMPLE.as_bytes()).display().to_string();
    let good2 = f.file("good2.txt", SAMPLE.as_bytes()).display().to_string();
    let bad = f.file("notes.txt", b"not a kernel\n").display().to_string();

    let o = run(&["lookup", "do_thing", "-k", &good, "-k", &bad]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).contains("do_thing"), "{}", stdout(&o));
    assert!(stderr(&o).contains("notes.txt"), "{}", stderr(&o));

    use klpsym_testkit::module::{build_module, ModSpec};
    let lp = f.file("lp.ko", &build_module(&ModSpec::default()));
    let o = run(&[
        "check",
        lp.to_str().unwrap(),
        "-k",
        &good,
        "-k",
        &bad,
        "-k",
        &good2,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let out = stdout(&o);
    let matrix = &out[out.find("compatibility:").expect("a matrix")..];
    assert_eq!(matrix.lines().count(), 5, "{matrix}");
    let row = matrix
        .lines()
        .find(|l| l.contains("notes.txt"))
        .expect("a row for the broken kernel");
    assert!(row.contains("error"), "{row}");
    assert_eq!(matrix.matches("good").count(), 2, "{matrix}");

    let o = run(&[
        "check",
        lp.to_str().unwrap(),
        "-k",
        &good,
        "-k",
        &bad,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    // Every key docs/json.md gives a result (a key dropped from the JSON view went unseen:
    // the copies' `coverage`).
    for key in [
        "kernel",
        "unchecked",
        "open",
        "report",
        "resolution_cost",
        "bindings",
        "coverage",
        "modules",
    ] {
        assert!(
            v["results"][0].get(key).is_some(),
            "no {key} in {}",
            v["results"][0]
        );
    }
    assert!(v["failed"][0]["kernel"]
        .as_str()
        .unwrap()
        .ends_with("notes.txt"));
}
