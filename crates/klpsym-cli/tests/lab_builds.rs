//! The CLI on the lab kernels' builds and their source files: which position a static function
//! is in (`sympos --file` against the -dbg vmlinux, held to the oracle's converted case), files
//! from a debug vmlinux of the same build, a fleet checked one kernel at a time, and `drift`
//! between two builds.
//!
//! Inputs from scripts/test.sh, as for lab_cli.rs. Skips (saying so) without them unless
//! KLPSYM_REQUIRE_LAB is set.

mod common;
use common::{json, ko, lab, run, text, the_lab};

use std::path::Path;

/// The author's question in one command, judged by the real kernel: `sympos init_once --file
/// fs/inode.c` against the -dbg vmlinux names one definition, and the oracle case that pinned
/// `init_once@fs/inode.c` (klpsym convert) saw exactly that address in the running kernel.
#[test]
fn which_position_is_the_init_once_in_fs_inode_c() {
    let Some(l) = the_lab() else { return };
    let Some(dbg) = lab("KLPSYM_TEST_VMLINUX") else {
        return;
    };
    let dbg = dbg.display().to_string();
    let o = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &dbg,
        "--file",
        "fs/inode.c",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = json(&o);
    let c = &v["results"][0]["candidates"];
    assert_eq!(c.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(c[0]["file"], "fs/inode.c");
    // The declaration line from DWARF (judged against llvm-dwarfdump for every duplicated
    // function by klpsym-io's lab_facts); the human table shows file:line.
    let line = c[0]["line"]
        .as_u64()
        .expect("a line from the -dbg vmlinux's DWARF");
    assert_eq!(c[0]["decl_file"], "fs/inode.c");
    let human = run(&["sympos", "init_once", "--kernel", &dbg, "--file", "inode.c"]);
    let human = text(&human.stdout);
    assert!(human.contains(&format!("fs/inode.c:{line}")), "{human}");
    assert!(human.contains("fs/proc/inode.c:"), "{human}");
    let addr = c[0]["address"]
        .as_str()
        .unwrap()
        .trim_start_matches("0x")
        .to_string();
    let oracle = std::fs::read_to_string(l.lp().join("conv-pin-by-file/oracle.txt")).unwrap();
    let seen = oracle
        .lines()
        .find_map(|x| x.strip_prefix("reloc init_once "))
        .expect("the patched code reported init_once");
    assert_eq!(
        seen, addr,
        "the kernel's klp relocation went to the fs/inode.c init_once"
    );
    // lookup by file gives the kernel's verdict at that position.
    let o = run(&[
        "lookup",
        "init_once",
        "--kernel",
        &dbg,
        "--file",
        "fs/inode.c",
    ]);
    assert_eq!(o.status.code(), Some(0));
    // Its position and the number of definitions, from the /proc/kallsyms captured on the
    // build (kallsyms order; no module loaded).
    let kallsyms = lab("KLPSYM_TEST_KALLSYMS_NOMOD").expect("the capture");
    let kallsyms = std::fs::read_to_string(kallsyms).unwrap();
    let defs: Vec<&str> = kallsyms
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, _, name) = (f.next()?, f.next()?, f.next()?);
            (name == "init_once" && f.next().is_none()).then_some(a)
        })
        .collect();
    let pos = 1 + defs
        .iter()
        .position(|a| *a == addr)
        .expect("the capture lists the fs/inode.c init_once");
    assert!(defs.len() > 1, "init_once is a duplicated name");
    assert!(
        text(&o.stdout).starts_with(&format!(
            "{addr} t init_once (position {pos} of {}",
            defs.len()
        )),
        "{}",
        text(&o.stdout)
    );
    // A source without files says what to give instead: not an answer for the file (exit
    // 1), not an input that failed (#45).
    let o = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &l.vmlinuz,
        "--file",
        "fs/inode.c",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("-dbg"), "{}", text(&o.stderr));
    // The image with its -dbg vmlinux: positions from the image, lines from the vmlinux.
    let o = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &l.vmlinuz,
        "--debug-vmlinux",
        &dbg,
        "--file",
        "fs/inode.c",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(
        v["results"][0]["candidates"][0]["line"].as_u64(),
        Some(line)
    );
}

/// `--debug-vmlinux`: positions from the image, source files from the -dbg vmlinux of the
/// same build (build ids compared).
#[test]
fn files_come_from_the_debug_vmlinux_of_the_same_build() {
    let Some(l) = the_lab() else { return };
    let Some(dbg) = lab("KLPSYM_TEST_VMLINUX") else {
        return;
    };
    let dbg = dbg.display().to_string();
    let o = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &l.vmlinuz,
        "--debug-vmlinux",
        &dbg,
        "--file",
        "fs/proc/inode.c",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("build id"), "{}", text(&o.stderr));
    let c = &json(&o)["results"][0]["candidates"];
    assert_eq!(c.as_array().unwrap().len(), 1);
    assert_eq!(c[0]["position"], 2);
    let direct = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &dbg,
        "--file",
        "fs/proc/inode.c",
        "--json",
    ]);
    assert_eq!(
        json(&direct)["results"][0]["candidates"][0]["address"],
        c[0]["address"]
    );
    let ids: Vec<String> = [&l.vmlinuz, &dbg]
        .iter()
        .map(|k| {
            json(&run(&["info", "--kernel", k, "--json"]))["build_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[0].len(), 40);
    // Independent truth: binutils' readelf on the -dbg vmlinux and on the vmlinux the lab
    // extracted from the image with the standard decompressor.
    let readelf_id = |p: &str| -> String {
        let o = std::process::Command::new("readelf")
            .args(["-n", p])
            .output()
            .expect("readelf (binutils) runs");
        text(&o.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
            .unwrap_or_else(|| panic!("{p}: readelf -n shows no Build ID"))
    };
    assert_eq!(readelf_id(&dbg), ids[1], "the -dbg vmlinux");
    if let Some(stripped) = lab("KLPSYM_TEST_VMLINUX_STRIPPED") {
        assert_eq!(
            readelf_id(&stripped.display().to_string()),
            ids[0],
            "the image"
        );
    }
}

/// A fleet: `--jsonl` checks every lab kernel one at a time with the verdicts of the matrix
/// (`--json`), a file that is no kernel gets its own error line (exit 2), and `--shard I/N`
/// splits the kernels into parts that cover them once.
#[test]
fn a_fleet_is_checked_one_kernel_at_a_time_and_shards_split_it() {
    let Some(l) = the_lab() else { return };
    let patch = ko(&l, "unique", "klp_unique");
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("broken.txt");
    std::fs::write(&broken, "not a kernel\n").unwrap();
    let mut args: Vec<String> = vec!["check".into(), patch.clone()];
    let kernels: Vec<String> = klpsym_testkit::lab::lab_kernels()
        .iter()
        .map(|k| k.path("VMLINUZ").display().to_string())
        .collect();
    assert!(kernels.len() >= 2, "a fleet needs kernels: {kernels:?}");
    for k in &kernels {
        args.extend(["-k".into(), k.clone()]);
    }
    args.extend(["-k".into(), broken.display().to_string()]);
    let with = |extra: &[&str]| {
        let a: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied())
            .collect();
        run(&a)
    };
    let lines = |o: &std::process::Output| -> Vec<serde_json::Value> {
        text(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let matrix = json(&with(&["--json"]));
    let fleet = with(&["--jsonl"]);
    assert_eq!(fleet.status.code(), Some(2), "{}", text(&fleet.stderr));
    let fleet = lines(&fleet);
    assert_eq!(fleet.len(), kernels.len() + 1, "{fleet:?}");
    assert!(fleet.iter().all(|v| v["patch"] == patch.as_str()));
    let verdicts = |v: &[serde_json::Value]| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = v
            .iter()
            .filter(|r| r["report"].is_object())
            .map(|r| {
                (
                    r["kernel"].as_str().unwrap().to_string(),
                    r["report"]["verdict"]["kind"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    assert_eq!(
        verdicts(&fleet),
        verdicts(matrix["results"].as_array().unwrap())
    );
    assert_eq!(verdicts(&fleet).len(), kernels.len());
    // Anchored to the kernels themselves: on every kernel whose oracle loaded this module,
    // the function it replaced binds the address the kernel patched.
    let mut anchored = 0;
    for k in klpsym_testkit::lab::livepatch_kernels() {
        let oracle = std::fs::read_to_string(k.path("LIVEPATCH_DIR").join("unique/oracle.txt"))
            .unwrap_or_else(|e| panic!("{}: unique: {e}", k.name));
        let vmlinuz = k.path("VMLINUZ").display().to_string();
        let line = fleet
            .iter()
            .find(|v| v["kernel"] == vmlinuz.as_str())
            .unwrap_or_else(|| panic!("{}: no fleet line", k.name));
        for l in oracle.lines().filter_map(|l| l.strip_prefix("addr ")) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let want = u64::from_str_radix(f[3], 16).unwrap();
            if want == 0 {
                continue;
            }
            let got = line["bindings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["source"] == "function" && b["object"] == f[0] && b["name"] == f[1])
                .and_then(|b| b["bound"]["address"].as_str())
                .map(str::to_string);
            assert_eq!(
                got,
                Some(format!("{want:#x}")),
                "{}: {} {}: {line}",
                k.name,
                f[0],
                f[1]
            );
            anchored += 1;
        }
    }
    assert!(
        anchored >= 2,
        "only {anchored} fleet bindings held to a kernel's record"
    );
    let errors: Vec<&serde_json::Value> = fleet.iter().filter(|v| v["error"].is_string()).collect();
    assert_eq!(errors.len(), 1, "{fleet:?}");
    assert!(errors[0]["kernel"].as_str().unwrap().contains("broken.txt"));
    // Two shards: every line once.
    let mut parts: Vec<String> = Vec::new();
    for s in ["1/2", "2/2"] {
        let o = with(&["--shard", s]);
        assert_ne!(o.status.code(), Some(101), "{}", text(&o.stderr));
        parts.extend(
            lines(&o)
                .iter()
                .map(|v| v["kernel"].as_str().unwrap().to_string()),
        );
    }
    let mut all: Vec<String> = fleet
        .iter()
        .map(|v| v["kernel"].as_str().unwrap().to_string())
        .collect();
    parts.sort();
    all.sort();
    assert_eq!(parts, all);
    // Two at a time: the same lines, in the order kernels finish.
    let mut two: Vec<String> = lines(&with(&["--jsonl", "--jobs", "2"]))
        .iter()
        .map(|v| v["kernel"].as_str().unwrap().to_string())
        .collect();
    two.sort();
    assert_eq!(two, all);
    let o = with(&["--shard", "3/2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("I/N"), "{}", text(&o.stderr));
}

/// `drift` between two lab kernels' -dbg vmlinux files: every row's definitions are the ones
/// `sympos` lists at those positions on each build (same source file), an unmatched one is
/// gone or new, and a build against itself is all the same (exit 0).
#[test]
fn drift_matches_definitions_across_builds_by_source_file() {
    let dbg: Vec<String> = klpsym_testkit::lab::lab_kernels()
        .iter()
        .map(|k| k.value("VMLINUX_DBG").to_string())
        .filter(|p| !p.is_empty() && Path::new(p).is_file())
        .collect();
    let [from, to, ..] = dbg.as_slice() else {
        klpsym_testkit::lab::skip(
            "drift between two builds",
            "fewer than two -dbg vmlinux files",
        );
        return;
    };
    let name = "init_once";
    let o = run(&["drift", name, "-k", from, "-k", to, "--json"]);
    let v = json(&o);
    let d = &v["results"][0];
    let files = |k: &str| -> Vec<String> {
        json(&run(&[
            "sympos", name, "-k", k, "--object", "vmlinux", "--json",
        ]))["results"][0]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["file"].as_str().unwrap().to_string())
            .collect()
    };
    let (ff, tf) = (files(from), files(to));
    // Anchored to binutils: each build's definitions lie in the files its -dbg vmlinux's
    // line table gives their addresses (so rows matched by file match real files).
    for k in &[from, to] {
        let v = json(&run(&[
            "sympos", name, "-k", k, "--object", "vmlinux", "--json",
        ]));
        let cands = v["results"][0]["candidates"].as_array().unwrap();
        assert!(cands.len() > 1, "{k}: {name} is a duplicated name");
        for c in cands {
            let addr = c["address"].as_str().unwrap();
            let o = std::process::Command::new("addr2line")
                .args(["-e", k, addr])
                .output()
                .expect("addr2line (binutils)");
            let truth = text(&o.stdout);
            let truth = truth
                .lines()
                .next()
                .and_then(|l| l.rsplit_once(':'))
                .map_or("", |x| x.0);
            let file = c["file"].as_str().unwrap_or_default();
            assert!(
                !file.is_empty() && (truth == file || truth.ends_with(&format!("/{file}"))),
                "{k}: addr2line puts {addr} in {truth:?}, klpsym in {file:?}"
            );
        }
    }
    let rows = d["rows"].as_array().unwrap();
    assert_eq!(
        rows.iter().filter(|r| r["from_position"].is_u64()).count(),
        ff.len()
    );
    assert_eq!(
        rows.iter().filter(|r| r["to_position"].is_u64()).count(),
        tf.len()
    );
    let mut moved = false;
    for r in rows {
        let file = r["identity"]["file"].as_str().unwrap();
        let at = |side: &[String], key: &str| r[key].as_u64().map(|p| side[p as usize - 1].clone());
        if let Some(f) = at(&ff, "from_position") {
            assert_eq!(f, file, "{r}");
        }
        if let Some(f) = at(&tf, "to_position") {
            assert_eq!(f, file, "{r}");
        }
        let status = r["status"].as_str().unwrap();
        let want = match (r["from_position"].as_u64(), r["to_position"].as_u64()) {
            (Some(a), Some(b)) if a == b => "same",
            (Some(_), Some(_)) => "moved",
            (Some(_), None) => "gone",
            (None, Some(_)) => "new",
            (None, None) => panic!("{r}"),
        };
        assert_eq!(status, want, "{r}");
        moved |= status != "same";
    }
    assert_eq!(o.status.code(), Some(if moved { 1 } else { 0 }));
    let o = run(&["drift", name, "-k", from, "-k", from]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("MOVED"));
}
