//! `addr`: `%pS` strings, pasted oopses and the kernel version their module lines follow.

use crate::*;

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
