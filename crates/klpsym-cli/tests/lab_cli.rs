//! The CLI on the real lab kernel's files (Debian package contents and the oracle's modules),
//! for what a new user met: verdicts that must hold on real inputs, not only on fixtures.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_VMLINUZ, KLPSYM_TEST_MODULES_DIR,
//! KLPSYM_TEST_LIVEPATCH_DIR, KLPSYM_TEST_VMLINUX, KLPSYM_TEST_LAB_DIR. Skips (saying so)
//! without them unless KLPSYM_REQUIRE_LAB is set.

mod common;
use common::{json, lab, run, text};

use std::path::{Path, PathBuf};

struct Lab {
    vmlinuz: String,
    modules: String,
    lp: PathBuf,
}

fn the_lab() -> Option<Lab> {
    Some(Lab {
        vmlinuz: lab("KLPSYM_TEST_VMLINUZ")?.display().to_string(),
        modules: lab("KLPSYM_TEST_MODULES_DIR")?.display().to_string(),
        lp: lab("KLPSYM_TEST_LIVEPATCH_DIR")?,
    })
}

fn ko(l: &Lab, case: &str, patch: &str) -> String {
    l.lp.join(case)
        .join(format!("{patch}.ko"))
        .display()
        .to_string()
}

fn dummy_ko(l: &Lab) -> String {
    Path::new(&l.modules)
        .join("kernel/drivers/net/dummy.ko")
        .display()
        .to_string()
}

/// Regression: `numdummies`, at offset 0 of dummy's .bss, read as "not found" when dummy was
/// given with --loaded but not placed; the real kernel accepted the patch.
#[test]
fn an_unplaced_module_symbol_at_offset_zero_is_found() {
    let Some(l) = the_lab() else { return };
    let o = run(&[
        "lookup",
        "numdummies",
        "--object",
        "dummy",
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
        "--loaded",
        "dummy",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).starts_with("+0x0 d numdummies"),
        "{}",
        text(&o.stdout)
    );
    let patch = ko(&l, "conv-module-before", "klp_conv_module_before");
    let o = run(&[
        "check",
        &patch,
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
        "--loaded",
        "dummy",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        json(&o)["results"][0]["report"]["verdict"]["kind"],
        "accepted"
    );
}

/// Regression: dummy.ko was "REFUSED AT LOAD ... not marked as a livepatch module".
#[test]
fn an_ordinary_module_is_said_to_be_one() {
    let Some(l) = the_lab() else { return };
    let o = run(&[
        "check",
        &dummy_ko(&l),
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("NOT A LIVEPATCH"), "{out}");
    assert!(!out.contains("not marked as a livepatch module"), "{out}");
    let o = run(&["check", &dummy_ko(&l), "--kernel", &l.vmlinuz, "--strict"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "--strict: nothing of livepatch was checked"
    );
}

/// Regression: a deferred object whose module was neither loaded nor given ended in a bare
/// ACCEPTED.
#[test]
fn unchecked_deferred_objects_are_impossible_to_miss() {
    let Some(l) = the_lab() else { return };
    let patch = ko(&l, "module-after", "klp_module_after");
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the kernel does accept the patch at load"
    );
    assert!(
        text(&o.stdout).contains("NOT CHECKED for when dummy loads"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        text(&o.stderr).contains("NOT CHECKED: object dummy"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz, "--json"]);
    let r = &json(&o)["results"][0];
    assert_eq!(r["report"]["verdict"]["unchecked_modules"][0], "dummy");
    assert!(r["unchecked"][0].as_str().unwrap().contains("dummy"));
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz, "--strict"]);
    assert_eq!(o.status.code(), Some(1));
    // With the module tree everything is checked: --strict passes.
    let o = run(&[
        "check",
        &patch,
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
        "--strict",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Every loader check runs on the lab kernel's package files alone (the vermagic and the
/// CRCs from the image, the config beside it), and an accepted check prints the log.
#[test]
fn the_package_files_answer_every_loader_check() {
    let Some(l) = the_lab() else { return };
    let patch = ko(&l, "unique", "klp_unique");
    let o = run(&[
        "check",
        &patch,
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
        "--json",
    ]);
    let r = &json(&o)["results"][0]["report"];
    for c in r["loader_checks"].as_array().unwrap() {
        assert_eq!(c["status"], "passed", "{c}");
    }
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz]);
    assert!(
        text(&o.stdout).contains("livepatch: enabling patch 'klp_unique'"),
        "{}",
        text(&o.stdout)
    );
}

/// Regression: --btf took only a raw BTF file.
#[test]
fn btf_comes_from_an_image_or_a_vmlinux() {
    let Some(l) = the_lab() else { return };
    let Some(vmlinux) = lab("KLPSYM_TEST_VMLINUX") else {
        return;
    };
    let patch = ko(&l, "unique", "klp_unique");
    for btf in [l.vmlinuz.clone(), vmlinux.display().to_string()] {
        let o = run(&[
            "check", &patch, "--kernel", &l.vmlinuz, "--btf", &btf, "--json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{btf}: {}", text(&o.stderr));
        assert_eq!(
            json(&o)["results"][0]["report"]["layouts_source"],
            "btf",
            "{btf}"
        );
    }
}

/// Regression: a --pin that matched nothing passed silently; the output lost the input's mode.
#[test]
fn convert_refuses_a_pin_that_matches_nothing_and_keeps_the_mode() {
    use std::os::unix::fs::PermissionsExt;
    let Some(l) = the_lab() else { return };
    let built = ko(&l, "conv-static-func", "klp_conv_static_func.built");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ko");
    std::fs::copy(&built, &input).unwrap();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = dir.path().join("out.ko");
    let (i, o_) = (input.to_str().unwrap(), out.to_str().unwrap());
    let o = run(&[
        "convert",
        i,
        "-o",
        o_,
        "--kernel",
        &l.vmlinuz,
        "--pin",
        "no_such_fn=1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("pin 'no_such_fn=1' matches no symbol"),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.exists(), "nothing is written on refusal");
    let o = run(&["convert", i, "-o", o_, "--kernel", &l.vmlinuz]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

/// The image's `__kcrctab` CRCs, read through kallsyms, agree with the kernel's
/// Module.symvers for every vmlinux export (the module loader compares modules against
/// these), and so does the vermagic read from the image with every module of the package.
#[test]
fn image_crcs_and_vermagic_agree_with_the_package() {
    let Some(l) = the_lab() else { return };
    let Some(dir) = lab("KLPSYM_TEST_LAB_DIR") else {
        return;
    };
    let src = dir.join("root/usr/src");
    let symvers = std::fs::read_dir(&src)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("Module.symvers"))
        .find(|p| p.is_file())
        .expect("Module.symvers in the headers package");
    let patch = ko(&l, "loader-bad-crc", "klp_loader_bad_crc");
    // The same verdict from the image's CRCs and from Module.symvers.
    for extra in [vec![], vec!["--symvers", symvers.to_str().unwrap()]] {
        let mut args = vec!["check", &patch, "--kernel", &l.vmlinuz, "--json"];
        args.extend(extra.iter().copied());
        let o = run(&args);
        let r = &json(&o)["results"][0]["report"];
        assert_eq!(
            r["problems"][0]["kind"], "symbol_version_mismatch",
            "{extra:?}: {r}"
        );
    }
    let o = run(&["info", "--kernel", &l.vmlinuz, "--json"]);
    let vermagic = json(&o)["vermagic"].as_str().unwrap().to_string();
    let o = run(&["info", "--kernel", &dummy_ko(&l), "--json"]);
    assert_eq!(json(&o)["vermagic"].as_str(), Some(vermagic.as_str()));
}

/// A real Module.symvers given with `--symvers` is kept in the cache as its index (smaller
/// than the file): the warm check answers byte for byte as `--no-cache` does, and a line
/// added to the file afterwards is read (its error reported), never hidden by the entry.
/// (A change that keeps the file's stamp is the loader's unit tests' case.)
#[test]
fn a_module_symvers_is_cached_and_never_stale() {
    let Some(l) = the_lab() else { return };
    let Some(dir) = lab("KLPSYM_TEST_LAB_DIR") else {
        return;
    };
    let real = std::fs::read_dir(dir.join("root/usr/src"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("Module.symvers"))
        .find(|p| p.is_file())
        .expect("Module.symvers in the headers package");
    let tmp = tempfile::tempdir().unwrap();
    let symvers = tmp.path().join("Module.symvers");
    std::fs::copy(&real, &symvers).unwrap();
    let (sv, cache) = (
        symvers.display().to_string(),
        tmp.path().join("cache").display().to_string(),
    );
    let patch = ko(&l, "loader-bad-crc", "klp_loader_bad_crc");
    let check = |cache_args: &[&str]| {
        let mut args = vec!["check", &patch, "--kernel", &l.vmlinuz, "--symvers", &sv];
        args.extend(["--json"]);
        args.extend(cache_args);
        run(&args)
    };
    let cold = check(&["--no-cache"]);
    let r = &json(&cold)["results"][0]["report"];
    assert_eq!(r["problems"][0]["kind"], "symbol_version_mismatch", "{r}");
    for _ in 0..2 {
        let o = check(&["--cache-dir", &cache]);
        assert_eq!(text(&o.stdout), text(&cold.stdout));
        assert_eq!(o.status.code(), cold.status.code());
    }
    let listed = json(&run(&["cache", "--cache-dir", &cache, "--json"]));
    let entry = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "Module.symvers")
        .unwrap_or_else(|| panic!("a Module.symvers entry: {listed}"));
    assert_eq!(entry["source"], sv.as_str(), "{entry}");
    let size = std::fs::metadata(&symvers).unwrap().len();
    assert!(entry["bytes"].as_u64().unwrap() < size, "{entry}");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&symvers)
        .unwrap();
    std::io::Write::write_all(&mut f, b"0x1\tonly_two\n").unwrap();
    drop(f);
    let o = check(&["--cache-dir", &cache]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("fewer than 4 fields"),
        "{}",
        text(&o.stderr)
    );
}

/// crates/klpsym-livepatch/CLI.md shows real output: every ```console block starting with
/// `$ klpsym ...` is run against the lab kernel (placeholders VMLINUZ, MODULES, LAB, KALLSYMS,
/// OUT stand for the lab's paths and a scratch folder) and its stdout then stderr must equal
/// the block. `KLPSYM_BLESS=1` rewrites the blocks instead.
#[test]
fn cli_md_examples_are_real_output() {
    let Some(l) = the_lab() else { return };
    let Some(kallsyms) = lab("KLPSYM_TEST_KALLSYMS_NOMOD") else {
        return;
    };
    let md_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../klpsym-livepatch/CLI.md");
    let md = std::fs::read_to_string(&md_path).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let boot = Path::new(&l.vmlinuz)
        .parent()
        .unwrap()
        .display()
        .to_string();
    // Longest first, so a path inside another is replaced as the longer one.
    let places: Vec<(String, String)> = vec![
        ("VMLINUZ".into(), l.vmlinuz.clone()),
        ("MODULES".into(), l.modules.clone()),
        ("LAB".into(), l.lp.display().to_string()),
        ("KALLSYMS".into(), kallsyms.display().to_string()),
        ("OUT".into(), out_dir.path().display().to_string()),
        ("BOOT".into(), boot),
    ];
    let expand = |a: &str| -> String {
        let mut s = a.to_string();
        for (k, v) in &places {
            if s == *k || s.starts_with(&format!("{k}/")) {
                s = format!("{v}{}", &s[k.len()..]);
            }
        }
        s
    };
    let fold = |text: &str| -> String {
        let mut t = text.to_string();
        let mut by_len = places.clone();
        by_len.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        for (k, v) in &by_len {
            t = t.replace(v.as_str(), k);
        }
        // Timings vary from run to run.
        t.lines()
            .filter(|l| !l.starts_with("time:"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let mut out = String::new();
    let mut failures = Vec::new();
    let mut rest = md.as_str();
    let mut ran = 0;
    // The examples are real output of one build (named in CLI.md); on another build in the
    // lab's first slot they are held to what does not change with the build: they run, and
    // give the documented verdict.
    let documented = md
        .lines()
        .find_map(|l| l.strip_prefix("<!-- examples-from: "))
        .and_then(|l| l.strip_suffix(" -->"))
        .expect("CLI.md names the build its examples come from")
        .to_string();
    let release = common::lab_kernels()
        .first()
        .map(|k| k.value("RELEASE").to_string())
        .unwrap_or_default();
    let same_build = release == documented;
    if !same_build {
        eprintln!(
            "CLI.md's examples are {documented}'s output; the lab's first kernel is {release}: each is held to running and to its verdict only"
        );
    }
    while let Some(at) = rest.find("```console\n") {
        out.push_str(&rest[..at + 11]);
        rest = &rest[at + 11..];
        let end = rest.find("```").expect("closed block");
        let block = &rest[..end];
        rest = &rest[end..];
        let cmd = block.lines().next().unwrap_or_default();
        let Some(args) = cmd.strip_prefix("$ klpsym ") else {
            out.push_str(block);
            continue;
        };
        let args: Vec<String> = args.split_whitespace().map(expand).collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&refs);
        let got = format!(
            "{cmd}\n{}{}",
            fold(&text(&o.stdout)),
            fold(&text(&o.stderr))
        );
        if same_build {
            if got != block {
                failures.push(format!("--- CLI.md:\n{block}--- klpsym now:\n{got}"));
            }
        } else {
            // Another build in the lab's first slot: its numbers, CRCs and paths differ from
            // the documented ones; the example must still run, and give the documented verdict.
            let verdict = |t: &str| -> Option<String> {
                t.lines().nth(2).map(|l| {
                    l.split(['(', ':'])
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                })
            };
            if o.status.code() == Some(2) || verdict(block) != verdict(&got) {
                failures.push(format!(
                    "--- CLI.md (documented on {documented}):\n{block}--- klpsym now, on {release}:\n{got}"
                ));
            }
        }
        out.push_str(&got);
        ran += 1;
    }
    out.push_str(rest);
    if std::env::var_os("KLPSYM_BLESS").is_some() && same_build {
        std::fs::write(&md_path, out).unwrap();
        return;
    }
    assert!(ran >= 8, "only {ran} examples ran");
    assert!(
        failures.is_empty(),
        "{} CLI.md example(s) differ from klpsym's output (KLPSYM_BLESS=1 rewrites them):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Regression: `info` printed Rust debug notation (`BzImage { compression: Xz }`, decimal
/// relative bases) and a different version format per kind of source.
#[test]
fn info_speaks_human_with_one_version_format() {
    let Some(l) = the_lab() else { return };
    let o = run(&["info", "--kernel", &l.vmlinuz]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0));
    for debug in ["{", "}", "Some(", "None", "BzImage", "X86_64"] {
        assert!(!out.contains(debug), "{debug:?} in:\n{out}");
    }
    assert!(
        out.contains("format:          x86 bzImage, XZ payload"),
        "{out}"
    );
    let version = |args: &[&str]| -> String {
        json(&run(args))["version"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let image = version(&["info", "--kernel", &l.vmlinuz, "--json"]);
    let module = version(&["info", "--kernel", &dummy_ko(&l), "--json"]);
    assert!(image.ends_with("-amd64") && !image.contains(' '), "{image}");
    assert_eq!(image, module);
}

/// Regression: `addr` on a module read from its file said "below the first symbol".
#[test]
fn addr_on_an_unplaced_module_says_there_is_no_load_address() {
    let Some(l) = the_lab() else { return };
    let o = run(&["addr", "0x10", "--kernel", &dummy_ko(&l)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no load address"),
        "{}",
        text(&o.stderr)
    );
}

/// Regression: the matrix's columns did not line up.
#[test]
fn the_matrix_lines_up() {
    let Some(l) = the_lab() else { return };
    let Some(kallsyms) = lab("KLPSYM_TEST_KALLSYMS_NOMOD") else {
        return;
    };
    let patch = ko(&l, "unique", "klp_unique");
    let k2 = kallsyms.display().to_string();
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz, "--kernel", &k2]);
    let out = text(&o.stdout);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "compatibility:")
        .skip(1)
        .collect();
    assert_eq!(table.len(), 3, "{out}");
    let col = |line: &str, word: &str| line.find(word).unwrap_or(usize::MAX);
    let at = col(table[0], "VERDICT");
    assert!(at != usize::MAX);
    for row in &table[1..] {
        let v = row
            .find("accepted")
            .or_else(|| row.find("refused"))
            .unwrap();
        assert_eq!(v, at, "{out}");
    }
}

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
    let oracle = std::fs::read_to_string(l.lp.join("conv-pin-by-file/oracle.txt")).unwrap();
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
    assert!(
        text(&o.stdout).starts_with(&format!("{addr} t init_once (position 1 of 7")),
        "{}",
        text(&o.stdout)
    );
    // A source without files says what to give instead.
    let o = run(&[
        "sympos",
        "init_once",
        "--kernel",
        &l.vmlinuz,
        "--file",
        "fs/inode.c",
    ]);
    assert_eq!(o.status.code(), Some(2));
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
