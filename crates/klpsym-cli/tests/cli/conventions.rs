//! What every verb shares: JSON documents, exit codes, usage errors, `-o`, closed pipes, flags parsed where they are read.

use crate::*;

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
