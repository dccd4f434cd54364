//! What a patch does not replace, judged by the kernels: the lab's `copies-inlined` case
//! (lab/livepatch/cases/copies-inlined) builds, with each amd64 kernel's own compiler, a
//! target module whose small static function `klp_cov_helper` is inlined into one caller and
//! kept out of line for a call through a pointer, and a livepatch replacing it. After
//! "patching complete" the guest read each caller's value (`KLPCOV <caller> <value>
//! <direct|pointer>`), the old value computed apart (`KLPCOV old`) and the patch's new one
//! (`KLPCOV new`).
//!
//! `klpsym check` (and `klpsym copies`) must name exactly the callers the kernel left on the
//! old code: a caller whose value is the old one holds a copy klpsym lists as not replaced,
//! one whose value is the new one holds none; the call through the pointer runs the
//! out-of-line copy, replaced. The verdict is `partial_coverage`, exit 1, on every kernel
//! whose compiler inlined the helper; with no copy left, `accepted` (or `unverified`), exit 0.

mod common;
use common::livepatch_kernels;

use std::path::Path;
use std::process::Command;

const CASE: &str = "copies-inlined";
const TARGET: &str = "klp_copies_target";

/// What the guest read after the patch was enabled.
#[derive(Debug, Default)]
struct Seen {
    /// (caller, value, how: `direct` or `pointer`).
    calls: Vec<(String, i64, String)>,
    old: Option<i64>,
    new: Option<i64>,
}

fn seen(oracle: &str) -> Seen {
    let mut s = Seen::default();
    for l in oracle.lines() {
        let Some(rest) = l.strip_prefix("out=KLPCOV ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        match f.as_slice() {
            ["old", v] => s.old = v.parse().ok(),
            ["new", v] => s.new = v.parse().ok(),
            [caller, v, how] => {
                s.calls
                    .push((caller.to_string(), v.parse().unwrap(), how.to_string()))
            }
            _ => panic!("an unreadable line: {l}"),
        }
    }
    s
}

fn klpsym(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// One kernel's case against klpsym: the differences found, and whether the kernel showed an
/// inlined copy left on the old code.
fn judge(name: &str, cdir: &Path, vmlinuz: &Path) -> (Vec<String>, bool) {
    let mut failures = Vec::new();
    let oracle = std::fs::read_to_string(cdir.join("oracle.txt")).unwrap();
    assert!(
        oracle.lines().any(|l| l == "verdict=accepted"),
        "{name}: the kernel refused the case:\n{oracle}"
    );
    // The patch's step, read through the one reader of a guest's log (its markers).
    let patched =
        klpsym_testkit::klog::steps(oracle.lines().filter_map(|l| l.strip_prefix("dmesg=")))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .into_iter()
            .any(|(step, lines)| {
                step.contains("load patch")
                    && lines
                        .iter()
                        .any(|l| l == "livepatch: 'klp_copies': patching complete")
            });
    assert!(
        patched,
        "{name}: no \"patching complete\" before the exercise:\n{oracle}"
    );
    let s = seen(&oracle);
    let (old, new) = (s.old.expect("KLPCOV old"), s.new.expect("KLPCOV new"));
    assert_ne!(old, new, "{name}: the old and new values must differ");
    assert!(
        s.calls.iter().any(|c| c.2 == "pointer") && s.calls.iter().any(|c| c.2 == "direct"),
        "{name}: both callers read: {s:?}"
    );
    for (caller, v, _) in &s.calls {
        assert!(*v == old || *v == new, "{name}: {caller} read {v}");
    }
    let modules = cdir.join("modules");
    let ko = cdir.join("klp_copies.ko");
    let kallsyms = cdir.join("kallsyms-modules.txt");
    // As the kernel met it (the target loaded and placed from the kallsyms captured then), and
    // from the target's .ko alone (unplaced): the same copies.
    let placed: Vec<&std::ffi::OsStr> = vec![
        "check".as_ref(),
        ko.as_os_str(),
        "-k".as_ref(),
        vmlinuz.as_os_str(),
        "--modules".as_ref(),
        modules.as_os_str(),
        "--loaded".as_ref(),
        TARGET.as_ref(),
        "--place-from".as_ref(),
        kallsyms.as_os_str(),
        "--json".as_ref(),
    ];
    let unplaced: Vec<&std::ffi::OsStr> = placed[..6]
        .iter()
        .copied()
        .chain(["--json".as_ref()])
        .collect();
    let left_old: Vec<&str> = s
        .calls
        .iter()
        .filter(|c| c.2 == "direct" && c.1 == old)
        .map(|c| c.0.as_str())
        .collect();
    for (how, args) in [("placed", &placed), ("unplaced", &unplaced)] {
        let (code, v, text) = klpsym(args);
        let r = &v["results"][0];
        let cov = r["coverage"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|f| f["object"] == TARGET && f["name"] == "klp_cov_helper")
            })
            .cloned();
        let Some(cov) = cov else {
            failures.push(format!(
                "{name} ({how}): no coverage of klp_cov_helper: {text}"
            ));
            continue;
        };
        if !cov["unchecked"].is_null() {
            failures.push(format!(
                "{name} ({how}): coverage not checked: {}",
                cov["unchecked"]
            ));
            continue;
        }
        let copies = cov["copies"].as_array().unwrap();
        // Exactly the callers the kernel left on the old code hold a copy not replaced.
        let mut not_replaced: Vec<String> = copies
            .iter()
            .filter(|c| c["status"] == "not_replaced")
            .map(|c| c["symbol"].as_str().unwrap_or("?").to_string())
            .collect();
        not_replaced.sort();
        let mut want: Vec<String> = left_old.iter().map(|s| s.to_string()).collect();
        want.sort();
        if not_replaced != want {
            failures.push(format!(
                "{name} ({how}): the kernel left {want:?} on the old code, klpsym names {not_replaced:?}"
            ));
        }
        // Every direct caller that ran the new code holds no copy of the helper.
        for (caller, v, how_called) in &s.calls {
            let inlined_here = copies
                .iter()
                .any(|c| c["kind"] == "inlined" && c["symbol"] == caller.as_str());
            if how_called == "direct" && *v == new && inlined_here {
                failures.push(format!(
                    "{name} ({how}): {caller} ran the new code, klpsym lists a copy inlined into it"
                ));
            }
            if how_called == "pointer" {
                // Through the pointer: the out-of-line copy, which the patch binds.
                let replaced = copies.iter().any(|c| {
                    c["kind"] == "out_of_line"
                        && c["symbol"] == "klp_cov_helper"
                        && c["status"] == "replaced"
                });
                if (*v == new) != replaced {
                    failures.push(format!(
                        "{name} ({how}): the out-of-line copy read {v} (new {new}), klpsym says replaced: {replaced}"
                    ));
                }
            }
        }
        let verdict = r["report"]["verdict"]["kind"].as_str().unwrap_or("?");
        let (want_verdict, want_code) = if want.is_empty() {
            ("accepted", 0)
        } else {
            ("partial_coverage", 1)
        };
        if verdict != want_verdict || code != want_code {
            failures.push(format!(
                "{name} ({how}): klpsym says {verdict} (exit {code}), the kernel calls for {want_verdict} (exit {want_code})"
            ));
        }
    }
    // The text report says it, naming the caller to patch.
    let (_, _, text) = klpsym(&placed[..placed.len() - 1]);
    for caller in &left_old {
        if !text.contains("PARTIAL COVERAGE") || !text.contains(&format!("inlined into {caller},1"))
        {
            failures.push(format!("{name}: the report does not name {caller}: {text}"));
        }
    }
    // `klpsym copies` lists the same copies before any patch is written.
    let copies_args: Vec<&std::ffi::OsStr> = vec![
        "copies".as_ref(),
        "klp_cov_helper".as_ref(),
        "--object".as_ref(),
        TARGET.as_ref(),
        "-k".as_ref(),
        vmlinuz.as_os_str(),
        "--modules".as_ref(),
        modules.as_os_str(),
        "--json".as_ref(),
    ];
    let (code, v, text) = klpsym(&copies_args);
    let defs = v["results"][0]["definitions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if code != 0 || defs.len() != 1 {
        failures.push(format!("{name}: klpsym copies: exit {code}: {text}"));
    } else {
        let mut inlined: Vec<String> = defs[0]["copies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "inlined")
            .map(|c| c["symbol"].as_str().unwrap_or("?").to_string())
            .collect();
        inlined.sort();
        let mut want: Vec<String> = left_old.iter().map(|s| s.to_string()).collect();
        want.sort();
        if inlined != want {
            failures.push(format!(
                "{name}: klpsym copies lists inlined copies in {inlined:?}, the kernel left {want:?} on the old code"
            ));
        }
    }
    (failures, !left_old.is_empty())
}

#[test]
fn check_names_exactly_the_copies_the_kernel_left_on_the_old_code() {
    let mut failures = Vec::new();
    let mut judged = 0;
    let mut inlined = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join(CASE);
        let Ok(oracle) = std::fs::read_to_string(cdir.join("oracle.txt")) else {
            failures.push(format!("{}: the oracle did not run {CASE}", k.name));
            continue;
        };
        if let Some(why) = oracle.lines().find_map(|l| l.strip_prefix("skipped=")) {
            if why.starts_with("not applicable: ") {
                continue;
            }
            failures.push(format!("{}: {CASE}: {why}", k.name));
            continue;
        }
        let (f, left) = judge(&k.name, &cdir, &k.path("VMLINUZ"));
        failures.extend(f);
        judged += 1;
        inlined += usize::from(left);
        eprintln!(
            "{}: {CASE}: klpsym's copies match what the kernel ran{}",
            k.name,
            if left {
                " (an inlined copy left on the old code)"
            } else {
                ""
            }
        );
    }
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "copies against the kernel",
            "no lab kernel ran the copies-inlined case (run scripts/test.sh)",
        );
        return;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The case is about an inlined copy: every kernel's compiler made one.
    assert_eq!(
        inlined, judged,
        "an inlined copy left on the old code on {inlined} of {judged} kernels"
    );
}
