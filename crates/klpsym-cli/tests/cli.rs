//! Integration tests: run the `klpsym` binary the way a user does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_klpsym"))
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn file(&self, name: &str, content: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut c = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SAMPLE: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 t init_once
ffffffff81000140 T do_thing
ffffffff81000200 t init_once
ffffffff81000280 t init_once
ffffffff81000300 T _etext
ffffffffc0000000 t init_once\t[nf_tables]
ffffffffc0000040 T nft_do_chain\t[nf_tables]
ffffffffc0000080 t helper\t[nf_tables]
ffffffffc0000100 t helper\t[nf_tables]
ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]
";

fn sample(f: &Fixture) -> String {
    f.file("kallsyms.txt", SAMPLE.as_bytes())
        .display()
        .to_string()
}

#[test]
fn lookup_ambiguous_prints_the_kernel_message_and_exits_1() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--kernel", &k]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(
            "livepatch: unresolvable ambiguity for symbol 'init_once' in object '(null)'\n"
        ),
        "{out}"
    );
    // candidates with positions 1..3, in kallsyms order
    assert!(out.contains("   1  0xffffffff81000100"), "{out}");
    assert!(out.contains("   3  0xffffffff81000280"), "{out}");
    assert!(
        !out.contains("0xffffffffc0000000"),
        "module symbols are not vmlinux candidates: {out}"
    );
}

#[test]
fn lookup_positions_and_modules() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--sympos", "2", "--kernel", &k]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o)
            .starts_with("ffffffff81000200 t init_once (position 2 of 3 in vmlinux, size 0x80)"),
        "{}",
        stdout(&o)
    );
    let o = run(&["lookup", "init_once", "-p", "4", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with(
        "livepatch: symbol position 4 for symbol 'init_once' in object 'vmlinux' not found"
    ));
    let o = run(&["lookup", "helper", "--object", "nf-tables.ko", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with(
        "livepatch: unresolvable ambiguity for symbol 'helper' in object 'nf_tables'"
    ));
    let o = run(&["lookup", "init_once", "--object", "nf_tables", "-k", &k]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run(&["lookup", "nothing_here", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("livepatch: symbol 'nothing_here' not found in symbol table"));
    let o = run(&["lookup", "helper", "--object", "ext4", "-k", &k]);
    assert!(
        stdout(&o).contains("not in this symbol table"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn lookup_json_has_the_documented_fields() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--json", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["name"], "init_once");
    assert_eq!(v["object"], "vmlinux");
    let r = &v["results"][0];
    assert_eq!(r["verdict"], "ambiguous");
    assert_eq!(
        r["message"],
        "livepatch: unresolvable ambiguity for symbol 'init_once' in object '(null)'"
    );
    assert_eq!(r["candidates"].as_array().unwrap().len(), 3);
    assert_eq!(r["candidates"][1]["position"], 2);
    assert_eq!(r["candidates"][1]["address"], "0xffffffff81000200");
    assert_eq!(r["candidates"][1]["size"], "0x80");
}

#[test]
fn sympos_lists_every_object() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["sympos", "init_once", "-k", &k]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.starts_with("init_once: 4 definition(s)"), "{out}");
    assert!(
        out.contains("   1  0xffffffffc0000000  t     0x40        nf_tables"),
        "{out}"
    );
    let o = run(&[
        "sympos",
        "init_once",
        "--object",
        "nf_tables",
        "--json",
        "-k",
        &k,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["count"], 1);
    let o = run(&["sympos", "absent", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn addr_symbolizes_like_percent_ps_and_reports_outside() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&[
        "addr",
        "-k",
        &k,
        "ffffffff81000150",
        "0xffffffffc0000044",
        "ffffffffc0201000",
        "0x10",
    ]);
    assert_eq!(o.status.code(), Some(1), "0x10 is outside");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ffffffff81000150 => do_thing+0x10/0xc0");
    assert_eq!(
        lines[1],
        "0xffffffffc0000044 => nft_do_chain+0x4/0x40 [nf_tables]"
    );
    assert_eq!(
        lines[2],
        "ffffffffc0201000 => ftrace_trampoline+0x0 [__builtin__ftrace]"
    );
    // No symbol: the number, as %pS prints it; --explain says why.
    assert_eq!(lines[3], "0x10 => 0x10");
    // stdin, one per line
    let o = run_stdin(&["addr", "-k", &k], "ffffffff81000300\nffffffff81000301\n");
    let out = stdout(&o);
    assert!(out.contains("ffffffff81000300 => _etext+0x0\n"), "{out}");
    assert!(
        out.contains("ffffffff81000301 => 0xffffffff81000301\n"),
        "{out}"
    );
    let o = run_stdin(&["addr", "-k", &k, "--explain"], "ffffffff81000301\n");
    assert!(
        stdout(&o).contains("ffffffff81000301 => 0xffffffff81000301 (outside every symbol"),
        "{}",
        stdout(&o)
    );
    // A line without an entry passes through; with --strict it is an error naming the line.
    let o = run_stdin(&["addr", "-k", &k], "ffffffff81000300\nnot-hex\n");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with("\nnot-hex\n"), "{}", stdout(&o));
    let o = run_stdin(
        &["addr", "-k", &k, "--strict"],
        "ffffffff81000300\nnot-hex\n",
    );
    // The trace was read: an entry that cannot be decoded is an answer of its own (#45).
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("standard input line 2"),
        "{}",
        stderr(&o)
    );
}

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

/// Every JSON document starts with its schema version, the error document included.
#[test]
fn every_json_document_names_its_schema_first() {
    let f = Fixture::new();
    let k = sample(&f);
    for args in [
        vec!["lookup", "do_thing", "-k", &k, "--json"],
        vec!["sympos", "init_once", "-k", &k, "--json"],
        vec!["search", "init_*", "-k", &k, "--json"],
        vec!["addr", "ffffffff81000144", "-k", &k, "--json"],
        vec!["info", "-k", &k, "--json"],
        vec!["lookup", "x", "-k", "/no/such/kernel", "--json"],
    ] {
        let o = run(&args);
        let text = stdout(&o);
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"));
        assert_eq!(v["schema"], 2, "{args:?}: {text}");
        let first_key = text.trim_start_matches(['{', ' ', '\n']).split('"').nth(1);
        assert_eq!(first_key, Some("schema"), "{args:?}: {text}");
    }
    // Several kernels' info: a list, each element versioned.
    let o = run(&["info", "-k", &k, "-k", &k, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|d| d["schema"] == 2), "{v}");
}

#[test]
fn usage_errors_exit_2_and_help_teaches() {
    let o = run(&["lookup"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.contains("Exit status"), "{out}");
    assert!(out.contains("klpsym sympos init_once"), "{out}");
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

/// Runs `args` with standard output a pipe whose reading end is already closed.
fn run_into_closed_pipe(args: &[&str]) -> Output {
    let mut c = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    c.wait_with_output().unwrap()
}

/// Regression: `sympos init_once | head -4` panicked; `dump | head` printed an error, exit 2.
/// Every output here is bigger than a pipe's buffer, so the write meets the closed pipe even
/// if a process forked by a parallel test held the reading end for a moment.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let f = Fixture::new();
    let mut big = String::new();
    for i in 0..4000u64 {
        big.push_str(&format!(
            "{:016x} t init_once\n",
            0xffff_ffff_8100_0000u64 + i * 16
        ));
    }
    // A kernel that can load a livepatch (else lookup and sympos say it may not, on stderr).
    big.push_str("ffffffff82000000 T klp_enable_patch\n");
    let k = f.file("big.txt", big.as_bytes()).display().to_string();
    let addrs: Vec<String> = (0..3000u64)
        .map(|i| format!("{:x}", 0xffff_ffff_8100_0000u64 + i * 16 + 4))
        .collect();
    let mut addr_args = vec!["addr", "--kernel", &k];
    addr_args.extend(addrs.iter().map(String::as_str));
    for args in [
        vec!["sympos", "init_once", "--kernel", &k],
        vec!["dump", "--kernel", &k],
        vec!["lookup", "init_once", "--kernel", &k],
        addr_args,
    ] {
        let o = run_into_closed_pipe(&args);
        assert_eq!(
            o.status.signal(),
            Some(13),
            "{:?}: {:?} {}",
            &args[..2],
            o.status,
            stderr(&o)
        );
        assert_eq!(stderr(&o), "", "{:?}", &args[..2]);
    }
}

/// Regression: one unreadable line made `addr` give up on all of standard input; a pasted
/// oops exited 2 with an error for every line that was not an address, and stack lines came
/// out in two styles without their timestamps. Now every line passes through in order, each
/// stack entry followed by ` => ` and what it is here.
#[test]
fn addr_passes_a_pasted_oops_through_and_decodes_its_entries() {
    let f = Fixture::new();
    let k = sample(&f);
    let input = "[  242.1] INFO: task kworker/0:1:33 blocked for more than 120 seconds.\n\
                 [  242.2] Call Trace:\n\
                 [  242.2]  <TASK>\n\
                 ffffffff81000104\n\
                 [  12.3] ? init_once+0x4/0x40 [nf_tables]\n\
                 [<ffffffff81000144>] do_thing+0x4/0xc0\n\
                 [<ffffffff81000144>] do_thing+0x8/0xc0\n\
                 RIP: 0010:do_thing+0x10/0xc0\n\
                 RIP: 0033:0x7f3a1c2b4d2e\n\
                 RSP: 002b:00007ffd2c1e6c48 EFLAGS: 00000246\n\
                 [  242.3]  </TASK>\n";
    let o = run_stdin(&["addr", "--kernel", &k], input);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let want = "[  242.1] INFO: task kworker/0:1:33 blocked for more than 120 seconds.\n\
                [  242.2] Call Trace:\n\
                [  242.2]  <TASK>\n\
                ffffffff81000104 => init_once+0x4/0x40\n\
                [  12.3] ? init_once+0x4/0x40 [nf_tables] => ffffffffc0000004 [nf_tables]\n\
                [<ffffffff81000144>] do_thing+0x4/0xc0 => do_thing+0x4/0xc0\n\
                [<ffffffff81000144>] do_thing+0x8/0xc0 => do_thing+0x4/0xc0 \
                (the line says do_thing+0x8/0xc0; the address is answered)\n\
                RIP: 0010:do_thing+0x10/0xc0 => ffffffff81000150 [vmlinux]\n\
                RIP: 0033:0x7f3a1c2b4d2e\n\
                RSP: 002b:00007ffd2c1e6c48 EFLAGS: 00000246\n\
                [  242.3]  </TASK>\n";
    assert_eq!(out, want);
    // JSON: one record per entry, with its line.
    let o = run_stdin(&["addr", "--kernel", &k, "--json"], input);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = v["results"][0]["addresses"].as_array().unwrap();
    assert_eq!(a.len(), 5, "{v}");
    assert_eq!(a[1]["line"], 5);
    assert_eq!(a[2]["line_says"], serde_json::Value::Null);
    assert_eq!(a[3]["line_says"], "do_thing+0x8/0xc0");
    assert_eq!(a[1]["address"], "0xffffffffc0000004");
    // --strict: a line without an entry is an error, quoted once.
    let o = run_stdin(&["addr", "--kernel", &k, "--strict"], input);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("standard input line 1"), "{err}");
    assert_eq!(
        err.lines().next().unwrap().matches("blocked for").count(),
        1,
        "{err}"
    );
    // All readable: exit 0; JSON carries the input and the address.
    let o = run_stdin(&["addr", "--kernel", &k, "--json"], "do_thing+0x8\n");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &v["results"][0]["addresses"][0];
    assert_eq!(a["input"], "do_thing+0x8");
    assert_eq!(a["address"], "0xffffffff81000148");
    // Several definitions without a size: every address, said so.
    let o = run(&["addr", "init_once+0x0", "--kernel", &k]);
    assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
}

/// Regression: `-o` was --object in lookup/sympos/dump and --output in convert.
#[test]
fn dash_o_is_the_output_everywhere() {
    let f = Fixture::new();
    let k = sample(&f);
    let out = f.dir.path().join("copy.txt");
    let o = run(&["dump", "--kernel", &k, "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), SAMPLE);
    let o = run(&["lookup", "helper", "--kernel", &k, "-o", "nf_tables"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&[
        "lookup",
        "helper",
        "--kernel",
        &k,
        "--object",
        "nf_tables",
        "--sympos",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Regression: options that cannot take effect were silently ignored.
#[test]
fn errors_name_the_argument_that_was_wrong() {
    let f = Fixture::new();
    let k = sample(&f);
    let empty = tempfile::tempdir().unwrap();
    let o = run(&[
        "sympos",
        "x",
        "--kernel",
        &k,
        "--modules",
        empty.path().to_str().unwrap(),
        "--loaded",
        "a",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--modules") && stderr(&o).contains("no kernel modules"),
        "{}",
        stderr(&o)
    );
    // Without --loaded the tree is scanned while the kernel loads: the same error, and it
    // comes first when the kernel fails too (as when the tree was scanned first).
    let missing = f.dir.path().join("no-such-kernel");
    for kernel in [k.as_str(), missing.to_str().unwrap()] {
        let o = run(&[
            "sympos",
            "x",
            "--kernel",
            kernel,
            "--modules",
            empty.path().to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("--modules") && stderr(&o).contains("no kernel modules"),
            "{kernel}: {}",
            stderr(&o)
        );
    }
    let o = run(&["sympos", "x", "--kernel", &k, "--place-from", &k]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--place-from") && stderr(&o).contains("loaded modules"),
        "{}",
        stderr(&o)
    );
    // A folder as the patch is named as such (it once advised --modules, which is for a
    // kernel's module tree).
    let o = run(&["check", f.dir.path().to_str().unwrap(), "--kernel", &k]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("PATCH: ") && e.contains("is a directory; the patch is one module file"),
        "{e}"
    );
    assert!(!e.contains("--modules"), "{e}");
    let o = run(&["info", "--kernel", &k, "--max-input-size", "10"]);
    assert!(stderr(&o).contains("--max-input-size"), "{}", stderr(&o));
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

const VARIANTS: &str = "\
ffffffff81000000 T _text
ffffffff81000100 t init_once
ffffffff81000200 t show_map.isra.0
ffffffff81000300 t show_map.cold
ffffffff81000400 t m_show
ffffffff81000500 t m_show
ffffffff81000600 T _etext
ffffffffc0000000 t show_map.isra.0\t[ext4]
";

#[test]
fn search_finds_names_by_glob_and_substring() {
    let f = Fixture::new();
    let k = f.file("v.txt", VARIANTS.as_bytes()).display().to_string();
    let o = run(&["search", "show*", "--kernel", &k]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.starts_with("2 name(s) matching glob 'show*'"), "{out}");
    assert!(
        out.contains("show_map.isra.0      2  vmlinux ext4"),
        "{out}"
    );
    let o = run(&["search", "show", "--kernel", &k, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "substring");
    assert_eq!(
        v["results"][0]["names"], 3,
        "m_show, show_map.isra.0, show_map.cold"
    );
    assert_eq!(v["results"][0]["matches"][2]["name"], "m_show");
    assert_eq!(v["results"][0]["matches"][2]["count"], 2);
    let o = run(&["search", "m_sh?w", "--kernel", &k, "--object", "ext4"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

/// A missing name: its compiler-made variants, and where they are.
#[test]
fn a_missing_name_points_at_its_compiler_made_variants() {
    let f = Fixture::new();
    let k = f.file("v.txt", VARIANTS.as_bytes()).display().to_string();
    let o = run(&["lookup", "show_map", "--kernel", &k]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out.contains("compiler-made variant: show_map.isra.0 [vmlinux]"),
        "{out}"
    );
    assert!(
        out.contains("compiler-made variant: show_map.cold [vmlinux]"),
        "{out}"
    );
    let o = run(&["lookup", "show_map", "--kernel", &k, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["variants"].as_array().unwrap().len(), 3);
}

/// A kernel that loads no livepatch (here: a whole vmlinux table without klp_enable_patch) is
/// said to, once per kernel on stderr and in the JSON, by lookup and sympos alike; the answer
/// itself is still the lookup code's.
#[test]
fn lookup_and_sympos_say_when_a_kernel_loads_no_livepatch() {
    let f = Fixture::new();
    let mut text = String::new();
    for i in 0..1500u64 {
        text.push_str(&format!(
            "{:016x} t fn_{i}\n",
            0xffff_ffff_8100_0000u64 + i * 16
        ));
    }
    let k = f.file("nolp.txt", text.as_bytes()).display().to_string();
    for verb in ["lookup", "sympos"] {
        let o = run(&[verb, "fn_3", "--kernel", &k]);
        assert!(o.status.success(), "{verb}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            err.matches("loads no livepatch").count(),
            1,
            "{verb}: {err}"
        );
        assert!(stdout(&o).contains("fn_3"), "{verb}");
        let o = run(&[verb, "fn_3", "--kernel", &k, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            v["results"][0]["livepatch_unsupported"]
                .as_str()
                .is_some_and(|s| s.contains("klp_enable_patch")),
            "{verb}: {v}"
        );
    }
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

/// `search` answers the author's other questions: only the names a patch must give a
/// position for (`--duplicates`), in name order (`--sort`), without the `__pfx_`/`__cfi_`
/// twins every function has on kernels built with padding or kCFI (`--fold`).
#[test]
fn search_lists_duplicates_sorted_and_folds_twins() {
    let f = Fixture::new();
    let text = "\
ffffffff81000000 T _text
ffffffff81000100 t __pfx_zeta
ffffffff81000110 t zeta
ffffffff81000200 t __cfi_alpha
ffffffff81000210 t alpha
ffffffff81000300 t __pfx_zeta
ffffffff81000310 t zeta
ffffffff81000400 t alpha_unique
";
    let k = f.file("k.txt", text.as_bytes()).display().to_string();
    let o = run(&["search", "*", "-k", &k, "--duplicates", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["results"][0]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["__pfx_zeta", "zeta"]);
    let o = run(&["search", "*", "-k", &k, "--duplicates", "--fold", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["results"][0]["matches"];
    assert_eq!(m.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(m[0]["name"], "zeta");
    assert_eq!(m[0]["twins"][0], "__pfx_zeta");
    let o = run(&["search", "*a*", "-k", &k, "--sort", "--fold"]);
    let out = stdout(&o);
    let listed: Vec<&str> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, ["alpha", "alpha_unique", "zeta"], "{out}");
    assert!(out.contains("(+ __cfi_alpha)"), "{out}");
}

/// Every `--json` run prints JSON on stdout, an error too (`status --json` printed nothing).
#[test]
fn a_json_error_is_json() {
    let f = Fixture::new();
    for args in [
        vec!["status", "--json", "--sysfs", "/nonexistent/livepatch"],
        vec!["lookup", "x", "--json", "-k", "/nonexistent/kallsyms"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&o)));
        assert!(v["error"]["message"].as_str().is_some(), "{v}");
        assert!(!stderr(&o).is_empty());
    }
    let k = f.file("k.txt", SAMPLE.as_bytes()).display().to_string();
    let o = run(&[
        "lookup",
        "x",
        "--json",
        "-k",
        "/nonexistent/kallsyms",
        "-k",
        &k,
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["results"].as_array().unwrap().len(),
        1,
        "the readable kernel answered"
    );
    assert_eq!(v["error"], serde_json::Value::Null);
}

/// A saved kallsyms names no release: a module symbol's size is the rule's the user states
/// (`--kernel-version`, every verb), the oops's own header tells, or, where nothing does and
/// the rules differ, a warning says which was assumed and how to state it.
#[test]
fn addr_takes_the_kernel_version_stated_or_from_the_oops_or_says_it_assumed() {
    let f = Fixture::new();
    let k = f.file(
        "kallsyms.txt",
        b"ffffffff81000000 T _text\n\
          ffffffff81000000 T _stext\n\
          ffffffff81001000 T _etext\n\
          ffffffff81002000 B _end\n\
          ffffffffc0a00000 t crc7_be\t[crc7]\n\
          ffffffffc0a01024 r _note_9\t[crc7]\n\
          ffffffffc0a010c0 d __this_module\t[crc7]\n\
          ffffffffc0a01500 d crc7_table\t[crc7]\n",
    );
    let k = k.display().to_string();
    let o = run(&[
        "addr",
        "-k",
        &k,
        "--kernel-version",
        "6.1.192",
        "ffffffffc0a010c0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "ffffffffc0a010c0 => __this_module+0x0/0xffffffffffffff40 [crc7]\n"
    );
    assert_eq!(stderr(&o), "");
    // Nothing tells: the newer rule, said, with the flag that states it.
    let o = run(&["addr", "-k", &k, "ffffffffc0a010c0"]);
    assert_eq!(
        stdout(&o),
        "ffffffffc0a010c0 => __this_module+0x0/0x440 [crc7]\n"
    );
    let err = stderr(&o);
    assert!(err.contains("klpsym: warning: "), "{err}");
    assert!(err.contains("(--kernel-version X.Y.Z)"), "{err}");
    // The oops's header line tells it.
    let oops = "CPU: 0 PID: 1 Comm: x Not tainted 6.1.0-57-amd64 #1 Debian 6.1.192-3\n\
                ffffffffc0a010c0\n";
    let o = run_stdin(&["addr", "-k", &k], oops);
    assert!(
        stdout(&o).contains("__this_module+0x0/0xffffffffffffff40 [crc7]"),
        "{}",
        stdout(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("kernel version 6.1.192, from the trace's line 1"),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
    // JSON carries what was said.
    let o = run(&["addr", "-k", &k, "--json", "ffffffffc0a010c0"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = v["results"][0]["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{v}");
    assert_eq!(notes[0]["level"], "warning");
    // Every verb takes the flag; a release is not a version.
    let o = run(&["sympos", "crc7_be", "-k", &k, "--kernel-version", "6.1.192"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["addr", "-k", &k, "--kernel-version", "6.1.0-57-amd64", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("X.Y.Z"), "{}", stderr(&o));
}

/// `--section-base NAME=ADDR` is read as the arguments are (a value that is not NAME=ADDR is
/// refused there, naming the flag), checked against the patch's sections, and places them: a
/// relocation in the patch's data to its own strings is then written, its bytes (hex in JSON)
/// the little-endian value.
#[test]
fn section_bases_are_parsed_by_the_command_and_place_the_patch() {
    use klpsym_testkit::module::{build_module, ModSpec};
    let f = Fixture::new();
    let k = f
        .file(
            "k.txt",
            b"ffffffff81000000 T _text\nffffffff81000100 t cmdline_proc_show\n\
              ffffffff81000200 T klp_enable_patch\nffffffff81000300 T _etext\n",
        )
        .display()
        .to_string();
    let lp = f.file("lp.ko", &build_module(&ModSpec::default()));
    let lp = lp.to_str().unwrap();
    let o = run(&["check", lp, "-k", &k, "--section-base", ".rodata"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--section-base") && stderr(&o).contains("NAME=ADDR"),
        "{}",
        stderr(&o)
    );
    let o = run(&["check", lp, "-k", &k, "--section-base", ".nosuch=0x1000"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--section-base") && stderr(&o).contains("'.nosuch'"),
        "{}",
        stderr(&o)
    );
    let data_relocs = |extra: &[&str]| {
        let mut args = vec!["check", lp, "-k", &k, "--json", "--explain"];
        args.extend_from_slice(extra);
        let o = run(&args);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
        v["results"][0]["report"]["ordinary_relocations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["type_name"] == "R_X86_64_64" && r["target_section"] == ".data")
            .cloned()
            .collect::<Vec<_>>()
    };
    let unplaced = data_relocs(&[]);
    assert!(!unplaced.is_empty());
    assert!(
        unplaced.iter().all(|r| r["bytes"].is_null()),
        "{unplaced:?}"
    );
    let placed = data_relocs(&[
        "--section-base",
        ".rodata=0xffffffffc0002000",
        "--section-base",
        ".text=FFFFFFFFC0000000",
        "--section-base",
        ".data=0xffffffffc0003000",
    ]);
    assert_eq!(placed.len(), unplaced.len());
    let mut written = 0;
    for r in &placed {
        let Some(v) = r["value"].as_str() else {
            continue;
        };
        let v = u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
        let want: String = v.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(r["bytes"], want.as_str(), "{r}");
        assert!(v >= 0xffff_ffff_c000_0000, "{r}");
        written += 1;
    }
    assert!(written >= 1, "{placed:?}");
}
