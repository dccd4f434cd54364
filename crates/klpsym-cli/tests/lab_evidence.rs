//! It never says more than it knows (#45), on the lab's real kernels and packages: no
//! `accepted` without every row that decides the load consulted (the signature's included),
//! no `as built` without two builds compared, a fleet that finds the built-for kernel as the
//! matrix does, every stack entry form the kernels print decoded (or marked), and a source
//! that yields no kernel — an empty folder, a link to nothing, a package cut short — its own
//! row while every other kernel is answered, with the exit status saying what was asked and
//! answered.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_LAB_KERNELS (each kernel's lab.env: VMLINUZ,
//! VMLINUX, CONFIG, IMAGE_DEB, DBG_DEB, LIVEPATCH_DIR, ARCH), KLPSYM_TEST_VMLINUX_STRIPPED,
//! KLPSYM_TEST_VMLINUX, KLPSYM_TEST_IMAGE_DEB, KLPSYM_TEST_DBG_DEB, KLPSYM_TEST_LIVEPATCH_DIR.

mod common;
use common::{json, lab, lab_kernels, livepatch_kernels, run, text, LabKernel};

use std::path::{Path, PathBuf};

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("klpsym-evidence-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `klpsym ARGS` with `input` on its standard input.
fn run_with_input(args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

/// The rows a result left open, as `row` or `row:check`.
fn open_rows(result: &serde_json::Value) -> Vec<String> {
    result["open"]
        .as_array()
        .unwrap_or_else(|| panic!("no `open` in {result}"))
        .iter()
        .map(|r| {
            let row = r["row"].as_str().unwrap_or("?");
            match r["check"].as_str() {
                Some(c) => format!("{row}:{c}"),
                None => row.to_string(),
            }
        })
        .collect()
}

/// The first lab kernel of the architecture `arch` (`amd64`, `arm64`) with a value for
/// `key`, or a skip.
fn kernel_with(arch: &str, key: &str) -> Option<LabKernel> {
    let k = lab_kernels()
        .into_iter()
        .find(|k| k.get("ARCH") == Some(arch) && k.get(key).is_some());
    if k.is_none() {
        klpsym_testkit::lab::skip(
            &format!("an {arch} lab kernel with {key}"),
            "the lab matrix has none",
        );
    }
    k
}

/// Case 1 of #45. Regression: a check against a bare vmlinux (no config beside it) answered
/// `accepted` while its signature row said the target's policy was not known; a program could tell
/// only by comparing `check` with "signature". Now the row is open (typed in `open`, named on the
/// verdict line), the verdict `unverified`, `--strict` fails on it; giving the kernel's config
/// consults it.
#[test]
fn accepted_only_when_the_signature_row_was_consulted() {
    let (Some(vmlinux), Some(lp)) = (
        lab("KLPSYM_TEST_VMLINUX_STRIPPED"),
        lab("KLPSYM_TEST_LIVEPATCH_DIR"),
    ) else {
        return;
    };
    let Some(config) = lab_kernels().first().map(|k| k.path("CONFIG")) else {
        return;
    };
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let k = s(&vmlinux);
    let o = run(&["check", &ko, "--kernel", &k, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = json(&o);
    let r = &v["results"][0];
    assert_eq!(r["report"]["verdict"]["kind"], "unverified", "{r}");
    let open = open_rows(r);
    assert!(
        open.contains(&"loader_check:signature".to_string()),
        "{open:?}"
    );
    let human = text(&run(&["check", &ko, "--kernel", &k]).stdout);
    let headline = human.lines().nth(1).unwrap_or_default();
    assert!(
        headline.starts_with("UNVERIFIED") && headline.contains("signature"),
        "{human}"
    );
    let o = run(&["check", &ko, "--kernel", &k, "--strict"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    // The kernel's config consults the row: nothing is left open.
    let c = s(&config);
    let o = run(&[
        "check",
        &ko,
        "--kernel",
        &k,
        "--kernel-config",
        &c,
        "--json",
    ]);
    let v = json(&o);
    let r = &v["results"][0];
    assert_eq!(open_rows(r), Vec::<String>::new(), "{r}");
    assert_eq!(r["report"]["verdict"]["kind"], "accepted", "{r}");
    let sig = r["report"]["loader_checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "signature")
        .expect("a signature row");
    assert_eq!(sig["status"], "passed", "{sig}");
    let o = run(&[
        "check",
        &ko,
        "--kernel",
        &k,
        "--kernel-config",
        &c,
        "--strict",
        // The copies of what the patch replaces need the kernel's DWARF, which a bare image
        // lacks: a row of its own, not what this test holds.
        "--no-coverage",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Case 2 of #45. Regression: without `--built-for`, the kernel whose release the vermagic names
/// was compared with itself and every binding read `as built`. A release match alone is now
/// `assumed from vermagic`; the kernel named as the built-for one is `as built`.
#[test]
fn a_release_match_alone_is_assumed_never_as_built() {
    let (Some(vmlinuz), Some(lp)) = (lab("KLPSYM_TEST_VMLINUZ"), lab("KLPSYM_TEST_LIVEPATCH_DIR"))
    else {
        return;
    };
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let k = s(&vmlinuz);
    let statuses = |extra: &[&str]| -> Vec<String> {
        let v = json(&run(&[
            &["check", &ko, "--kernel", &k, "--json"][..],
            extra,
        ]
        .concat()));
        v["results"][0]["bindings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                b["as_built"]["status"]
                    .as_str()
                    .unwrap_or("null")
                    .to_string()
            })
            .collect()
    };
    let assumed = statuses(&[]);
    assert!(!assumed.is_empty());
    assert!(assumed.iter().all(|x| x == "assumed"), "{assumed:?}");
    let human = text(&run(&["check", &ko, "--kernel", &k]).stdout);
    assert!(human.contains("assumed from vermagic"), "{human}");
    assert!(!human.lines().any(|l| l.ends_with("as built")), "{human}");
    let named = statuses(&["--built-for", &k]);
    assert!(named.iter().all(|x| x == "same"), "{named:?}");
}

/// Case 3 of #45. Regression: `check --jsonl` over a folder of packages compared each kernel only
/// with the kernels of its own unit: the built-for kernel, in the folder, was "none of the kernels
/// checked" on every other line, while the matrix over the same folder proved the bindings. One
/// rule now: the same bindings, the same open rows, kernel by kernel.
#[test]
fn the_fleet_finds_the_built_for_kernel_as_the_matrix_does() {
    let Some(lp) = lab("KLPSYM_TEST_LIVEPATCH_DIR") else {
        return;
    };
    let amd64: Vec<LabKernel> = lab_kernels()
        .into_iter()
        .filter(|k| k.get("ARCH") == Some("amd64") && k.get("IMAGE_DEB").is_some())
        .collect();
    if amd64.len() < 2 {
        klpsym_testkit::lab::skip(
            "a fleet of two kernels' packages",
            "fewer than two amd64 lab kernels",
        );
        return;
    }
    let dir = tempdir("fleet");
    let folder = dir.join("debs");
    std::fs::create_dir_all(&folder).unwrap();
    // The patch's own kernel (the first) and another, each with its -dbg package.
    for k in &amd64[..2] {
        for key in ["IMAGE_DEB", "DBG_DEB"] {
            if let Some(p) = k.get(key) {
                let p = Path::new(p);
                std::os::unix::fs::symlink(p, folder.join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let f = s(&folder);
    let matrix = json(&run(&["check", &ko, "--kernel", &f, "--json"]));
    let o = run(&["check", &ko, "--kernel", &f, "--jsonl"]);
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results = matrix["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{matrix}");
    assert_eq!(lines.len(), 2, "{}", text(&o.stdout));
    for m in results {
        let l = lines
            .iter()
            .find(|l| l["kernel"] == m["kernel"])
            .unwrap_or_else(|| panic!("no fleet line for {}", m["kernel"]));
        for field in ["bindings", "modules", "unchecked", "open"] {
            assert_eq!(l[field], m[field], "{}: {field}", m["kernel"]);
        }
        for line in l["unchecked"].as_array().unwrap() {
            assert!(
                !line
                    .as_str()
                    .unwrap()
                    .contains("none of the kernels checked"),
                "{line}"
            );
        }
    }
    // The other kernel's bindings were compared with the built-for kernel's.
    let other = lines
        .iter()
        .find(|l| {
            !l["kernel"]
                .as_str()
                .unwrap()
                .contains(amd64[0].value("RELEASE"))
        })
        .expect("the other kernel's line");
    assert!(
        other["bindings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| !b["as_built"].is_null()),
        "{other}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kernel's own `%pS` of each address of the lab's `symbolize` case (`KLPSYM <%px> <%pS>
/// <%pB>` lines printed in the guest).
fn kernel_ps(cdir: &Path) -> Vec<(u64, String)> {
    let oracle = std::fs::read_to_string(cdir.join("oracle.txt")).unwrap();
    oracle
        .lines()
        .filter_map(|l| l.strip_prefix("out=KLPSYM "))
        .filter_map(|l| {
            let mut w: Vec<String> = Vec::new();
            for x in l.split_whitespace() {
                match w.last_mut() {
                    Some(prev) if x.starts_with('[') => {
                        prev.push(' ');
                        prev.push_str(x);
                    }
                    _ => w.push(x.to_string()),
                }
            }
            (w.len() == 3).then(|| (u64::from_str_radix(&w[0], 16).unwrap(), w[1].clone()))
        })
        .collect()
}

/// `klpsym addr` over `trace` on standard input, against the symbolize case's kernel with its
/// module placed as the kernel placed it: the exit status and the JSON records by line.
fn addr_trace(
    k: &LabKernel,
    cdir: &Path,
    trace: &str,
) -> (
    Option<i32>,
    std::collections::HashMap<u64, serde_json::Value>,
    String,
) {
    let (vmlinuz, c) = (s(&k.path("VMLINUZ")), s(cdir));
    let places = s(&cdir.join("kallsyms-modules.txt"));
    let args = [
        "addr",
        "-k",
        &vmlinuz,
        "--modules",
        &c,
        "--loaded",
        "klp_symbolize",
        "--place-from",
        &places,
        "--no-lines",
        "--json",
    ];
    let o = run_with_input(&args, trace);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)));
    let by_line = v["results"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| Some((a["line"].as_u64()?, a.clone())))
        .collect();
    (o.status.code(), by_line, text(&o.stderr))
}

/// Case 4 of #45. Regression: `addr` decoded `[<addr>] ?` but passed `? 0xaddr`, `RIP: 0010:0xaddr`
/// and time-stamped bare addresses through undecoded, exit 0. Every form the kernels' printing code
/// gives (arch/x86/kernel/dumpstack.c, arch/arm64/kernel/stacktrace.c and process.c, 5.10 to 7.x)
/// is decoded in place to what the kernel's own `%pS` printed for the address; an entry that cannot
/// be read is marked in place and the exit status says so.
#[test]
fn addr_decodes_every_stack_entry_form_the_kernels_print() {
    let mut judged = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize");
        let ps = kernel_ps(&cdir);
        assert!(ps.len() >= 15, "{}: {} oracle lines", k.name, ps.len());
        // Each address in each address form, each symbol in each symbol form; line numbers
        // from 1, the kernel's %pS each line must decode to.
        let mut trace = vec![
            "BUG: a test of every form".to_string(),
            "Call Trace:".to_string(),
        ];
        let mut want: Vec<(usize, String)> = Vec::new();
        for (a, p) in &ps {
            for form in [
                format!(" ? 0x{a:x}"),
                format!("[   12.345678]  ? 0x{a:x}"),
                format!("RIP: 0010:0x{a:x}"),
                format!("RIP: 0010:{a:x}"),
                format!("[    7.000001] {a:x}"),
                format!("<4>[    7.000001][    T1] 0x{a:x}"),
                format!(" [<{a:016x}>] ? {p}"),
            ] {
                trace.push(form);
                want.push((trace.len(), p.clone()));
            }
            // A name and offset in the kernel's own words resolves to the same place (vmlinux
            // names: a module symbol's %pS size is bounded by its memory, not its table).
            if !p.starts_with("0x") && !p.contains('[') {
                for form in [
                    format!("[   12.345678]  ? {p}"),
                    format!(" {p}"),
                    format!("RIP: 0010:{p}"),
                ] {
                    trace.push(form);
                    want.push((trace.len(), p.clone()));
                }
            }
        }
        trace.push(" [<ffffffffzz001234>] ? broken+0x1/0x2".to_string());
        let broken = trace.len();
        trace.push(" </TASK>".to_string());
        let (code, by_line, err) = addr_trace(&k, &cdir, &(trace.join("\n") + "\n"));
        for (line, p) in &want {
            let a = by_line.get(&(*line as u64)).unwrap_or_else(|| {
                panic!("{}: line {line} {:?} not decoded", k.name, trace[line - 1])
            });
            let got = match (a["found"].as_bool(), a["text"].as_str()) {
                (Some(true), Some(t)) => t.to_string(),
                _ => format!(
                    "{:#x}",
                    u64::from_str_radix(
                        a["address"].as_str().unwrap().trim_start_matches("0x"),
                        16
                    )
                    .unwrap()
                ),
            };
            assert_eq!(&got, p, "{}: line {line} {:?}", k.name, trace[line - 1]);
            judged += 1;
        }
        let b = by_line
            .get(&(broken as u64))
            .expect("the broken entry marked in place");
        assert!(b["error"].is_string(), "{b}");
        assert_eq!(code, Some(1), "{}: {err}", k.name);
        assert!(err.contains("could not be decoded"), "{err}");
    }
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "stack entry forms",
            "no lab kernel ran the livepatch oracle",
        );
    }
}

/// Case 4 of #45, arm64: the entries arm64 kernels print (arch/arm64/kernel/stacktrace.c's
/// `" %pSb"` under `Call trace:`, with 6.13+'s unwind source `(P)`, `(C)`...; process.c's
/// `pc : %pS` and `lr : %pS`) decoded on each arm64 lab kernel to what `addr` answers for the
/// address alone. Before, an entry with its unwind source passed through undecoded.
#[test]
fn addr_decodes_arm64_entries_on_arm64_kernels() {
    let arms: Vec<LabKernel> = lab_kernels()
        .into_iter()
        .filter(|k| k.get("ARCH") == Some("arm64") && k.get("KALLSYMS_NOMOD").is_some())
        .collect();
    if arms.is_empty() {
        klpsym_testkit::lab::skip("arm64 stack entries", "no arm64 lab kernel with a capture");
        return;
    }
    for k in arms {
        let capture = std::fs::read_to_string(k.path("KALLSYMS_NOMOD")).unwrap();
        let addr_of = |name: &str| {
            capture
                .lines()
                .find(|l| l.ends_with(&format!(" {name}")))
                .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
                .unwrap_or_else(|| panic!("{}: {name} in the capture", k.name))
        };
        let vmlinuz = s(&k.path("VMLINUZ"));
        for name in ["cmdline_proc_show", "do_one_initcall"] {
            let a = addr_of(name) + 8;
            let v = json(&run(&[
                "addr",
                "-k",
                &vmlinuz,
                "--no-lines",
                "--json",
                &format!("{a:#x}"),
            ]));
            let ps = v["results"][0]["addresses"][0]["text"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(ps.starts_with(&format!("{name}+0x8/")), "{}: {ps}", k.name);
            let trace = [
                "Call trace:".to_string(),
                format!(" {ps}"),
                format!(" {ps} (P)"),
                format!("[    1.000000]  {ps} (CF)"),
                format!("pc : {ps}"),
                format!("lr : {ps}"),
                format!("pc : {a:#x}"),
                format!("[    1.000000][    T1]  {a:#x}"),
            ];
            let o = run_with_input(
                &["addr", "-k", &vmlinuz, "--no-lines", "--json"],
                &(trace.join("\n") + "\n"),
            );
            assert_eq!(o.status.code(), Some(0), "{}: {}", k.name, text(&o.stderr));
            let v = json(&o);
            let got = v["results"][0]["addresses"].as_array().unwrap();
            assert_eq!(got.len(), trace.len() - 1, "{}: {v}", k.name);
            for g in got {
                assert_eq!(g["text"].as_str(), Some(ps.as_str()), "{}: {g}", k.name);
            }
            assert!(v["results"][0]["arch_mismatch"].is_null(), "{v}");
        }
    }
}

/// Case 4 of #45. Regression: a `name+0xoff/0xsize` whose size the kernel's definition does not
/// have got `?? no symbol ... of that size` and no answer. The address is answered, the difference
/// said, and the exit status is 1 (not a clean answer).
#[test]
fn a_wrong_size_still_answers_the_address() {
    let Some(k) = livepatch_kernels().into_iter().next() else {
        return;
    };
    let cdir = k.path("LIVEPATCH_DIR").join("symbolize");
    let (a, p) = kernel_ps(&cdir)
        .into_iter()
        .find(|(_, p)| p.starts_with("cmdline_proc_show+"))
        .expect("cmdline_proc_show in the oracle");
    let (sym, size) = p.rsplit_once('/').unwrap();
    let size = u64::from_str_radix(size.trim_start_matches("0x"), 16).unwrap();
    let wrong = format!("{sym}/{:#x}", size + 0x10);
    let vmlinuz = s(&k.path("VMLINUZ"));
    let o = run(&["addr", "-k", &vmlinuz, "--no-lines", &wrong]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", text(&o.stderr));
    assert!(out.contains(&format!("{a:016x}")), "{out}");
    assert!(
        out.contains(&format!("the line says size {:#x}", size + 0x10)),
        "{out}"
    );
    let v = json(&run(&[
        "addr",
        "-k",
        &vmlinuz,
        "--no-lines",
        "--json",
        &wrong,
    ]));
    let r = &v["results"][0]["addresses"][0];
    assert_eq!(r["address"], format!("{a:#018x}"), "{r}");
    assert_eq!(r["line_size"], format!("{:#x}", size + 0x10), "{r}");
}

/// Case 8 of #45. Regression: an amd64 oops asked of an arm64 kernel answered every frame "no
/// symbol" with no hint. The architectures are named, and the exit status is 1.
#[test]
fn a_trace_of_another_architecture_is_named() {
    let (Some(x86), Some(arm)) = (
        livepatch_kernels().into_iter().next(),
        kernel_with("arm64", "VMLINUZ"),
    ) else {
        return;
    };
    let ps = kernel_ps(&x86.path("LIVEPATCH_DIR").join("symbolize"));
    let p = ps
        .iter()
        .find(|(_, p)| !p.starts_with("0x") && !p.contains('['))
        .map(|(_, p)| p.clone())
        .expect("a vmlinux symbol");
    let trace = format!("RIP: 0010:{p}\nCall Trace:\n <TASK>\n ? {p}\n </TASK>\n");
    let arm_k = s(&arm.path("VMLINUZ"));
    let o = run_with_input(&["addr", "-k", &arm_k, "--no-lines"], &trace);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("x86_64") && err.contains("aarch64") && err.contains("RIP:"),
        "{err}"
    );
    let o = run_with_input(&["addr", "-k", &arm_k, "--no-lines", "--json"], &trace);
    let v = json(&o);
    assert!(v["results"][0]["arch_mismatch"].is_string(), "{v}");
    // The same trace against its own kernel names nothing.
    let x86_k = s(&x86.path("VMLINUZ"));
    let o = run_with_input(&["addr", "-k", &x86_k, "--no-lines", "--json"], &trace);
    assert!(json(&o)["results"][0]["arch_mismatch"].is_null());
}

/// Case 5 and 7 of #45. Regression: `-k good.deb -k emptydir/` printed nothing (the empty folder
/// failed the whole run), and a link in a folder that leads nowhere vanished without a word. Each
/// is now a failure row of its own, the good kernel is answered, and the run exits 2 (a source
/// could not be read).
#[test]
fn a_source_that_yields_no_kernel_is_its_own_row() {
    let Some(deb) = lab("KLPSYM_TEST_IMAGE_DEB") else {
        return;
    };
    let dir = tempdir("no-kernel");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (d, e) = (s(&deb), s(&empty));
    let o = run(&["sympos", "init_once", "-k", &d, "-k", &e, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v = json(&o);
    assert!(v["results"][0]["count"].as_u64().unwrap() > 1, "{v}");
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0]["kernel"], e.as_str());
    assert!(text(&o.stderr).contains(&e), "{}", text(&o.stderr));
    // A folder with the package and a link to nothing.
    let folder = dir.join("debs");
    std::fs::create_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&deb, folder.join(deb.file_name().unwrap())).unwrap();
    let lost = folder.join("linux-image-9.9.9-1-amd64_9.9.9-1_amd64.deb");
    std::os::unix::fs::symlink(dir.join("never-downloaded.deb"), &lost).unwrap();
    let o = run(&["sympos", "init_once", "-k", &s(&folder), "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "{v}");
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0]["kernel"], s(&lost).as_str());
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 6 of #45. Regression: a .deb cut at 30 of its 70 MB answered `sympos` and `check` with exit
/// 0 and no warning (what they needed lay in its first part). A package is read to its end before
/// its answers count: the cut one is its own row, the other kernels are answered.
#[test]
fn a_package_cut_short_is_its_own_row() {
    let (Some(deb), Some(vmlinuz), Some(lp)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_VMLINUZ"),
        lab("KLPSYM_TEST_LIVEPATCH_DIR"),
    ) else {
        return;
    };
    let dir = tempdir("cut");
    let bytes = std::fs::read(&deb).unwrap();
    let cut = dir.join(deb.file_name().unwrap());
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 7]).unwrap();
    let (c, k) = (s(&cut), s(&vmlinuz));
    let o = run(&["sympos", "init_once", "-k", &c]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("data.tar") && err.contains("cut short"),
        "{err}"
    );
    let o = run(&["sympos", "init_once", "-k", &c, "-k", &k, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["results"][0]["kernel"], k.as_str());
    assert_eq!(v["failed"][0]["kernel"], c.as_str());
    // A patch the oracle built, checked on the cut package: the package is the failure (not
    // the patch, which must be there).
    let ko = lp.join("unique/klp_unique.ko");
    assert!(
        ko.is_file(),
        "{}: the oracle's unique case is missing",
        ko.display()
    );
    let o = run(&["check", &s(&ko), "-k", &c, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(c.as_str()) && err.contains("cut short"),
        "the cut package is the error: {err}"
    );
    // The whole package still answers.
    let o = run(&["sympos", "init_once", "-k", &s(&deb)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 9 of #45. Regression: `sympos --file` over kernels some of which name no source files
/// (arm64 has no -dbg package) exited 2 as if input had failed, though every other kernel answered.
/// Each kernel answers as it can: by file where it names files, `files_unknown` where it does not
/// (exit 1: not a whole answer), and nothing is in `failed`.
#[test]
fn sympos_by_file_answers_by_what_each_kernel_can() {
    let (Some(dbg), Some(arm)) = (lab("KLPSYM_TEST_VMLINUX"), kernel_with("arm64", "VMLINUZ"))
    else {
        return;
    };
    let (d, a) = (s(&dbg), s(&arm.path("VMLINUZ")));
    let o = run(&[
        "sympos",
        "init_once",
        "--file",
        "fs/inode.c",
        "-k",
        &d,
        "-k",
        &a,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["failed"].as_array().unwrap().len(), 0, "{v}");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["count"], 1, "{v}");
    assert_eq!(results[0]["files_unknown"], false);
    assert_eq!(results[1]["files_unknown"], true, "{v}");
    assert!(results[1]["file_note"]
        .as_str()
        .unwrap()
        .contains("names no source files"));
    // Alone, the kernel with files answers with exit 0.
    let o = run(&["sympos", "init_once", "--file", "fs/inode.c", "-k", &d]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Case 11 of #45. Regression: the library's relocation row said "give --section-base": a command's
/// flag in the library's words. The JSON detail names what would place the sections; the readable
/// report, the command's, adds its flags.
#[test]
fn library_messages_name_no_command_flag() {
    let (Some(vmlinuz), Some(lp)) = (lab("KLPSYM_TEST_VMLINUZ"), lab("KLPSYM_TEST_LIVEPATCH_DIR"))
    else {
        return;
    };
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let k = s(&vmlinuz);
    let v = json(&run(&["check", &ko, "--kernel", &k, "--json"]));
    let r = &v["results"][0];
    for c in r["report"]["loader_checks"].as_array().unwrap() {
        assert!(!c["detail"].as_str().unwrap().contains("--"), "{c}");
    }
    for u in r["unchecked"].as_array().unwrap() {
        assert!(!u.as_str().unwrap().contains("--"), "{u}");
    }
    let human = text(&run(&["check", &ko, "--kernel", &k]).stdout);
    assert!(human.contains("--section-base"), "{human}");
}
