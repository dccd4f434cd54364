//! The CLI on the real lab kernel's files (Debian package contents and the oracle's modules),
//! for what a new user met: verdicts that must hold on real inputs, not only on fixtures.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_VMLINUZ, KLPSYM_TEST_MODULES_DIR,
//! KLPSYM_TEST_LIVEPATCH_DIR, KLPSYM_TEST_VMLINUX, KLPSYM_TEST_LAB_DIR. Skips (saying so)
//! without them unless KLPSYM_REQUIRE_LAB is set.

mod common;
use common::{as_shipped, dummy_ko, json, ko, lab, primary, run, text, the_lab};

use std::path::Path;

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
        text(&o.stdout).contains("NOT CHECKED: object dummy, for when dummy loads"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        text(&o.stderr).contains("NOT CHECKED: object dummy, for when dummy loads"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz, "--json"]);
    let r = &json(&o)["results"][0];
    assert_eq!(r["report"]["verdict"]["unchecked_modules"][0], "dummy");
    assert!(r["unchecked"][0].as_str().unwrap().contains("dummy"));
    let o = run(&["check", &patch, "--kernel", &l.vmlinuz, "--strict"]);
    assert_eq!(o.status.code(), Some(1));
    // With the module tree everything that decides the load is checked; the copies of
    // dummy_get_stats64 are not (the package's dummy.ko has no debug info): --strict says so.
    let with_tree = [
        "check",
        &patch,
        "--kernel",
        &l.vmlinuz,
        "--modules",
        &l.modules,
        "--strict",
    ];
    let o = run(&with_tree);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(
            "NOT CHECKED: coverage of dummy:dummy_get_stats64,0: no debug file for module dummy"
        ),
        "{}",
        text(&o.stderr)
    );
    // Coverage not asked for: --strict passes.
    let mut no_coverage = with_tree.to_vec();
    no_coverage.push("--no-coverage");
    let o = run(&no_coverage);
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

/// docs/cli.md shows real output: every ```console block starting with
/// `$ klpsym ...` is run against the lab kernel (placeholders VMLINUZ, MODULES, LAB, KALLSYMS,
/// OUT stand for the lab's paths and a scratch folder) and its stdout then stderr must equal
/// the block. `KLPSYM_BLESS=1` rewrites the blocks instead.
#[test]
fn cli_md_examples_are_real_output() {
    let Some(l) = the_lab() else { return };
    let Some(kallsyms) = lab("KLPSYM_TEST_KALLSYMS_NOMOD") else {
        return;
    };
    let md_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
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
        ("LAB".into(), l.lp().display().to_string()),
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
        // A module the package ships compressed is shown as the `.ko` the example names.
        let mut t = [".ko.xz", ".ko.zst", ".ko.gz"]
            .iter()
            .fold(text.to_string(), |t, c| t.replace(c, ".ko"));
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
    // The examples are real output of one build (named in docs/cli.md); on another build in the
    // lab's first slot they are held to what does not change with the build: they run, and
    // give the documented verdict.
    let documented = md
        .lines()
        .find_map(|l| l.strip_prefix("<!-- examples-from: "))
        .and_then(|l| l.strip_suffix(" -->"))
        .expect("docs/cli.md names the build its examples come from")
        .to_string();
    let release = common::lab_kernels()
        .first()
        .map(|k| k.value("RELEASE").to_string())
        .unwrap_or_default();
    let same_build = release == documented;
    if !same_build {
        eprintln!(
            "docs/cli.md's examples are {documented}'s output; the lab's first kernel is {release}: each is held to running and to its verdict only"
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
        let args: Vec<String> = args
            .split_whitespace()
            .map(|a| {
                let path = expand(a);
                if path.ends_with(".ko") && a != path {
                    as_shipped(Path::new(&path)).display().to_string()
                } else {
                    path
                }
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&refs);
        let got = format!(
            "{cmd}\n{}{}",
            fold(&text(&o.stdout)),
            fold(&text(&o.stderr))
        );
        if same_build {
            if got != block {
                failures.push(format!("--- docs/cli.md:\n{block}--- klpsym now:\n{got}"));
            }
        } else {
            // Another build in the lab's first slot: its numbers, CRCs and paths differ from
            // the documented ones; what the example shows must not. A loader check the
            // documented kernel's version does not make (`this_module`, 6.4+, on a 6.1
            // example) is the other version's own and left out; every documented one stays.
            let want = gist(block, &documented);
            let checks: Vec<String> = loader_checks(&want).into_iter().flatten().collect();
            let now = gist(&got, &release);
            let now: Vec<String> = now
                .iter()
                .zip(loader_checks(&now))
                .filter(|(_, c)| c.as_ref().is_none_or(|n| checks.contains(n)))
                .map(|(l, _)| l.clone())
                .collect();
            if want != now {
                failures.push(format!(
                    "--- docs/cli.md (documented on {documented}), as held on another build:\n{}--- klpsym now, on {release}:\n{}",
                    want.join("\n"),
                    now.join("\n")
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
        "{} docs/cli.md example(s) differ from klpsym's output (KLPSYM_BLESS=1 rewrites them):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What a CLI.md example shows that does not change from one build of a kernel to the next:
/// every line with the kernel release written `RELEASE`, each number `#` and each hex number
/// `0x#` (addresses, CRCs, counts and timings belong to the build); the sections a
/// conversion creates and the klp relocation listing are left out (where the compiler
/// places the patched call, `.text` or `.text.unlikely`, belongs to the build too). What
/// stays: the verdict, the kernel's log lines, the loader's checks and their results, the
/// positions, the objects and the errors.
fn gist(output: &str, release: &str) -> Vec<String> {
    let mut kept = Vec::new();
    let mut in_relocations = false;
    for line in output.lines().skip(1) {
        if !line.starts_with(' ') {
            in_relocations = line == "relocations:";
        }
        if in_relocations || line.starts_with("created ") {
            continue;
        }
        let line = line.replace(release, "RELEASE");
        let mut masked = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '0' && chars.peek() == Some(&'x') {
                chars.next();
                while chars.next_if(char::is_ascii_hexdigit).is_some() {}
                masked.push_str("0x#");
            } else if c.is_ascii_digit() {
                while chars.next_if(char::is_ascii_digit).is_some() {}
                masked.push('#');
            } else {
                masked.push(c);
            }
        }
        kept.push(masked);
    }
    kept
}

/// For each line of a report, the check it names when it is a row of the `module loader:`
/// table (`  vermagic   ok   ...`: the first word of an indented line under that heading).
fn loader_checks(lines: &[String]) -> Vec<Option<String>> {
    let mut in_loader = false;
    lines
        .iter()
        .map(|l| {
            if !l.starts_with(' ') {
                in_loader = l == "module loader:";
                return None;
            }
            in_loader
                .then(|| l.split_whitespace().next().map(str::to_string))
                .flatten()
        })
        .collect()
}

/// The rows of the `module loader:` table are told from every other indented line, so an
/// example documented on 6.1 is held on 6.12 without the `this_module` row 6.1 does not have,
/// and with every row it does.
#[test]
fn loader_rows_are_found_under_their_heading_only() {
    let lines: Vec<String> = [
        "module loader:",
        "  signature            ok           unsigned",
        "  this_module          ok           # bytes",
        "  vermagic             ok           matches",
        "objects:",
        "  vmlinux      loaded",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let checks = loader_checks(&lines);
    let names: Vec<Option<&str>> = checks.iter().map(|c| c.as_deref()).collect();
    assert_eq!(
        names,
        [
            None,
            Some("signature"),
            Some("this_module"),
            Some("vermagic"),
            None,
            None
        ]
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
    // The payload's compression, from the build's own config (CONFIG_KERNEL_XZ=y, ...).
    let config = std::fs::read_to_string(primary("CONFIG")).unwrap();
    let payload = [
        ("CONFIG_KERNEL_XZ=y", "XZ"),
        ("CONFIG_KERNEL_ZSTD=y", "zstd"),
        ("CONFIG_KERNEL_GZIP=y", "gzip"),
        ("CONFIG_KERNEL_LZ4=y", "LZ4 (legacy frame)"),
        ("CONFIG_KERNEL_LZMA=y", "LZMA"),
        ("CONFIG_KERNEL_BZIP2=y", "bzip2"),
        ("CONFIG_KERNEL_LZO=y", "LZO"),
    ]
    .iter()
    .find(|(line, _)| config.lines().any(|l| l == *line))
    .map(|(_, name)| *name)
    .expect("the config chooses a kernel compression");
    assert!(
        out.contains(&format!("format:          x86 bzImage, {payload} payload")),
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
        let v = ["accepted", "unverified", "refused", "binds"]
            .iter()
            .find_map(|w| row.find(w))
            .unwrap_or_else(|| panic!("no verdict in {row:?}"));
        assert_eq!(v, at, "{out}");
    }
}
