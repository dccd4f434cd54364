//! `klpsym check` against the real kernel: for every case the lab's livepatch oracle
//! (lab/livepatch-oracle.sh) built, loaded in the Debian kernel under QEMU and recorded, klpsym's
//! prediction from the package files alone must match what the kernel did: accepted or refused
//! (and when), the exact `livepatch:` error lines in order, and the addresses the kernel used.
//!
//! Every kernel of the lab matrix judges (KLPSYM_TEST_LAB_KERNELS from scripts/test.sh: per
//! kernel its oracle output, vmlinuz and module tree). Skips (saying so) without them unless
//! KLPSYM_REQUIRE_LAB is set.

mod common;
use common::{livepatch_kernels, livepatch_lines};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the kernel did in one case.
#[derive(Debug, Default)]
struct Oracle {
    /// "accepted", "refused_at_load" or "refused_when_module_loads"
    verdict: String,
    /// The errno of the first failing load (`EINVAL`, `ENOEXEC`...).
    errno: Option<String>,
    /// The error lines of the module loader and livepatch, in order (informational lines,
    /// once-per-boot taint notices and the cases' own KLP* lines left out).
    errors: Vec<String>,
    /// Every `livepatch:` line of the load steps, informational ones included, in order.
    livepatch_log: Vec<String>,
    /// (object, name) -> address the kernel used (nonzero only).
    addrs: BTreeMap<(String, String), u64>,
    /// Modules the case loads.
    modules: Vec<String>,
    /// symbol name -> address the patched code saw through its klp relocation.
    relocs: BTreeMap<String, u64>,
    /// Calls of the walks' callback (kprobe on klp_find_callback) over all load steps, when
    /// the guest could count them.
    find_callbacks: Option<u64>,
    /// Calls of klp_match_callback (6.2+: one per vmlinux match called back), likewise.
    match_callbacks: Option<u64>,
    /// Calls of kallsyms_expand_symbol (every vmlinux name a walk or the binary search
    /// reads), likewise.
    expansions: Option<u64>,
    /// What makes the record unusable: a load without its `rc=` line, a `note=` (a
    /// transition that timed out). Each is a failure, never a verdict.
    broken: Vec<String>,
}

const INFO_LINES: &[&str] = &[
    "enabling patch",
    "starting patching transition",
    "patching complete",
    "applying patch",
    "reverting patch",
    "starting unpatching transition",
    "unpatching complete",
];

fn read_oracle(dir: &Path) -> Oracle {
    let text = std::fs::read_to_string(dir.join("oracle.txt")).unwrap();
    let mut o = Oracle::default();
    let mut current_load = String::new();
    // A load step waits for its `rc=` line.
    let mut awaiting_rc: Option<String> = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("note=") {
            o.broken.push(format!("the guest noted: {n}"));
        }
        if line.starts_with("rc=") {
            awaiting_rc = None;
        }
        if let Some(l) = line.strip_prefix("load=") {
            if let Some(prev) = awaiting_rc.replace(l.to_string()) {
                o.broken
                    .push(format!("load of {prev}: the guest wrote no rc= line"));
            }
            current_load = l.to_string();
            if let Some(m) = l.strip_prefix("module ") {
                o.modules.push(m.trim().to_string());
            }
        } else if let Some(e) = line.strip_prefix("errno=") {
            if e != "0" && o.errno.is_none() {
                o.errno = Some(e.to_string());
            }
        } else if let Some(rc) = line.strip_prefix("rc=") {
            if rc != "0" && o.verdict.is_empty() {
                o.verdict = if current_load.starts_with("patch") {
                    "refused_at_load"
                } else {
                    "refused_when_module_loads"
                }
                .into();
            }
        } else if let Some(v) = line.strip_prefix("visits=klp_find_callback ") {
            *o.find_callbacks.get_or_insert(0) += v.trim().parse::<u64>().unwrap();
        } else if let Some(v) = line.strip_prefix("visits=klp_match_callback ") {
            *o.match_callbacks.get_or_insert(0) += v.trim().parse::<u64>().unwrap();
        } else if let Some(v) = line.strip_prefix("visits=kallsyms_expand_symbol ") {
            *o.expansions.get_or_insert(0) += v.trim().parse::<u64>().unwrap();
        } else if let Some(a) = line.strip_prefix("reloc ") {
            let f: Vec<&str> = a.split_whitespace().collect();
            o.relocs
                .insert(f[0].to_string(), u64::from_str_radix(f[1], 16).unwrap());
        } else if let Some(a) = line.strip_prefix("addr ") {
            let f: Vec<&str> = a.split_whitespace().collect();
            let v = u64::from_str_radix(f[3], 16).unwrap();
            if v != 0 {
                o.addrs.insert((f[0].to_string(), f[1].to_string()), v);
            }
        }
    }
    if let Some(prev) = awaiting_rc {
        o.broken
            .push(format!("load of {prev}: the guest wrote no rc= line"));
    }
    // The load steps' kernel lines, read the one way every oracle test reads them.
    match klpsym_testkit::klog::recorded(&text, "dmesg") {
        Err(e) => o.broken.push(e),
        Ok(lines) => {
            for l in lines {
                if l.starts_with("livepatch: ") {
                    o.livepatch_log.push(l.clone());
                }
                let info = INFO_LINES.iter().any(|i| l.contains(i))
                    || l.starts_with("KLP")
                    || klpsym_testkit::klog::is_taint_notice(&l)
                    || l.contains(": no symbol version for ");
                if !info {
                    o.errors.push(l);
                }
            }
        }
    }
    if !text.lines().any(|l| l.starts_with("load=")) {
        o.broken.push("the guest recorded no load at all".into());
    }
    if o.verdict.is_empty() {
        o.verdict = "accepted".into();
    }
    o
}

/// `klpsym status` as the guest's sysfs showed the loaded patch, judged outside the guest:
/// the livepatch tree rebuilt from the `enabled=`/`transition=`/`object=`/`func=` lines the
/// guest recorded, the kernel's table made of the capture's vmlinux lines and the module
/// lines of /proc/kallsyms while the patch was loaded.
fn status_outside(cdir: &Path, capture: &Path, patch: &str) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(cdir.join("oracle.txt")).map_err(|e| e.to_string())?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pdir = work.path().join("livepatch").join(patch);
    std::fs::create_dir_all(&pdir).map_err(|e| e.to_string())?;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("enabled=") {
            std::fs::write(pdir.join("enabled"), format!("{v}\n")).map_err(|e| e.to_string())?;
        } else if let Some(v) = line.strip_prefix("transition=") {
            std::fs::write(pdir.join("transition"), format!("{v}\n")).map_err(|e| e.to_string())?;
        } else if let Some(v) = line.strip_prefix("object=") {
            let ob = v.split_whitespace().next().unwrap_or_default();
            std::fs::create_dir_all(pdir.join(ob)).map_err(|e| e.to_string())?;
        } else if let Some(v) = line.strip_prefix("func=") {
            let (ob, func) = v.split_once(' ').unwrap_or((v, ""));
            std::fs::create_dir_all(pdir.join(ob).join(func)).map_err(|e| e.to_string())?;
        }
    }
    let mut kallsyms = std::fs::read(capture).map_err(|e| e.to_string())?;
    kallsyms.extend(std::fs::read(cdir.join("kallsyms-modules.txt")).map_err(|e| e.to_string())?);
    let table = work.path().join("kallsyms");
    std::fs::write(&table, kallsyms).map_err(|e| e.to_string())?;
    let out = Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .arg("status")
        .arg("--sysfs")
        .arg(work.path().join("livepatch"))
        .arg("--kernel")
        .arg(&table)
        .arg("--json")
        .output()
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn check(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .arg("check")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

/// The patch file the guest loaded: `NAME.ko`, or `NAME.ko.xz` for a case that loads it
/// compressed (compress=xz), which klpsym is then given as it is.
fn patch_file(cdir: &Path, name: &str) -> PathBuf {
    let xz = cdir.join(format!("{name}.ko.xz"));
    if xz.is_file() {
        xz
    } else {
        cdir.join(format!("{name}.ko"))
    }
}

#[test]
fn check_predicts_what_every_lab_kernel_did() {
    let kernels = livepatch_kernels();
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    let mut summary_lines = Vec::new();
    for k in &kernels {
        let (compared, relocs_checked, visits, f) = judge(
            &k.path("LIVEPATCH_DIR"),
            &k.path("VMLINUZ"),
            &k.path("MODULES_DIR"),
            &k.path("CONFIG"),
            &k.path("KALLSYMS_NOMOD"),
            &k.path("LAB_DIR").join("lab.env"),
            k.version(),
        );
        failures.extend(f.into_iter().map(|f| format!("{}: {f}", k.name)));
        // Every case of lab/livepatch/cases is in the index: compared, or not applicable to
        // this kernel (judge() fails any other skip).
        let cases = std::fs::read_dir(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/livepatch/cases"),
        )
        .map(|d| d.count())
        .unwrap_or(0);
        let applicable = cases - not_applicable(&k.path("LIVEPATCH_DIR"));
        if compared != applicable {
            failures.push(format!(
                "{}: {compared} cases compared of {applicable} applicable ({cases} in lab/livepatch/cases)",
                k.name
            ));
        }
        if relocs_checked < 4 {
            failures.push(format!(
                "{}: only {relocs_checked} relocation addresses compared",
                k.name
            ));
        }
        summary.push(format!(
            "{}: {compared} cases, {relocs_checked} relocation targets",
            k.name
        ));
        summary_lines.push(format!(
            "release={} suite={} arch={} compared={compared} relocations={relocs_checked} visits={visits}",
            k.value("RELEASE"),
            k.value("SUITE"),
            k.value("ARCH")
        ));
    }
    assert!(
        failures.is_empty(),
        "{} differences between klpsym and the kernels:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for s in summary {
        eprintln!("{s}: klpsym's predictions match the kernel");
    }
    // For scripts/lab-tables.sh (README's verified-against table): what was judged, written
    // only when every kernel agreed.
    if let Some(path) = std::env::var_os("KLPSYM_TEST_SUMMARY") {
        // Appended: other lab tests write their lines to the same file (scripts/test.sh
        // empties it before the run).
        use std::io::Write;
        let mut text = summary_lines.join("\n");
        text.push('\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .unwrap();
    }
}

/// Compares klpsym's predictions with one kernel's oracle: (cases compared, relocation
/// targets compared, cases whose kallsyms visits were counted, differences).
fn judge(
    dir: &Path,
    vmlinuz: &Path,
    modules: &Path,
    config: &Path,
    capture: &Path,
    lab_env: &Path,
    version: (u32, u32),
) -> (usize, usize, usize, Vec<String>) {
    let index = std::fs::read_to_string(dir.join("index.txt")).unwrap();
    let mut compared = 0;
    let mut relocs_checked = 0;
    let visits_checked = &mut 0usize;
    let statuses_checked = &mut 0usize;
    let mut failures = Vec::new();
    for line in index.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (case, status) = (f[0], f[1]);
        if status == "skipped" {
            // Only a case that cannot apply to this kernel (case.conf requires=) may be
            // skipped; any other skip (a failed build, convert or edit) is a failure.
            let why = std::fs::read_to_string(dir.join(case).join("oracle.txt"))
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("skipped=").map(str::to_string))
                })
                .unwrap_or_default();
            if why.starts_with("not applicable: ") {
                eprintln!("{case}: skipped by the oracle: {why}");
            } else {
                failures.push(format!("{case}: the oracle could not run it: {why}"));
            }
            continue;
        }
        let cdir = dir.join(case);
        let patch_name = f.iter().find_map(|x| x.strip_prefix("patch=")).unwrap();
        let ko = patch_file(&cdir, patch_name);
        let oracle = read_oracle(&cdir);
        if !oracle.broken.is_empty() {
            failures.extend(oracle.broken.iter().map(|b| format!("{case}: {b}")));
            continue;
        }
        // 1. As the kernel met it: nothing but vmlinux loaded when the patch comes (modules the
        //    case loaded first are given as loaded and placed where the kernel put them).
        let steps = std::fs::read_to_string(cdir.join("case.conf")).unwrap();
        let before: Vec<String> = steps
            .lines()
            .find_map(|l| l.strip_prefix("steps="))
            .unwrap_or("patch")
            .split_whitespace()
            .take_while(|s| *s != "patch")
            .filter_map(|s| {
                s.strip_prefix("module:")
                    .or_else(|| s.strip_prefix("local:"))
                    .map(str::to_string)
            })
            .collect();
        // A case that builds its own target module (steps=local:NAME) publishes it in its
        // modules/ folder: that is the module tree the kernel loaded it from.
        let local = cdir.join("modules");
        let modules = if local.is_dir() {
            local.as_path()
        } else {
            modules
        };
        // Everything a user can give that decides the load: the kernel's config (the loader's
        // rows: signatures, forced loads) and the kernel the patch was built for (the same
        // image, or for a case built for another build that build's image), so a verdict
        // other than the kernel's is never excused by something left open.
        let built_env = match built_for(&cdir) {
            Some(b) => {
                Path::new(b.get("lab_dir").expect("built-for.txt names lab_dir")).join("lab.env")
            }
            None => lab_env.to_path_buf(),
        };
        let built_for_kernel = packages_of(&built_env);
        let mut args: Vec<std::ffi::OsString> = vec![
            ko.clone().into(),
            "-k".into(),
            vmlinuz.into(),
            "--modules".into(),
            modules.into(),
            "--kernel-config".into(),
            config.into(),
            "--built-for".into(),
            built_for_kernel.path().into(),
        ];
        // A case built for another build of the series was loaded with finit_module(2)'s
        // MODULE_INIT_IGNORE_MODVERSIONS|MODULE_INIT_IGNORE_VERMAGIC: klpsym is asked the same.
        if built_for(&cdir).is_some_and(|b| b.get("load_flags").is_some_and(|f| f != "0")) {
            args.push("--force".into());
        }
        let base_args = args.len();
        if !before.is_empty() {
            args.extend([
                "--loaded".into(),
                before.join(",").into(),
                "--place-from".into(),
                cdir.join("kallsyms-modules.txt").into(),
            ]);
        }
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, v) = check(&refs);
        let r = &v["results"][0]["report"];
        // With the config and the built-for kernel given, every row that decides the load is
        // consulted: a row left open fails, save one the case declares it cannot close
        // (case.conf `open=ROW`, with its reason) and, for a case built for another build, the
        // bindings' rows (which definitions they are is judged by lab_binding.rs, against both
        // builds' -dbg vmlinux; two packages name no source files).
        let declared: Vec<String> = steps
            .lines()
            .filter_map(|l| l.strip_prefix("open="))
            .map(str::to_string)
            .collect();
        let other_build = built_for(&cdir).is_some();
        let unexcused: Vec<String> = v["results"][0]["open"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter(|o| {
                        let row = o["row"].as_str().unwrap_or("?");
                        let excused = declared.iter().any(|d| d == row)
                            || (other_build
                                && matches!(row, "built_for" | "binding" | "module_build"));
                        !excused
                    })
                    .map(|o| o.to_string())
                    .collect()
            })
            .unwrap_or_default();
        if !unexcused.is_empty() {
            failures.push(format!(
                "{case}: left open with the kernel's config and built-for kernel given: {}",
                unexcused.join(", ")
            ));
        }
        let kind = r["verdict"]["kind"].as_str().unwrap_or("?");
        // `partial_coverage` is accepted by the kernel too, with a copy of a replaced function
        // left on the old code (exit 1): only where the DWARF of the object is at hand (a
        // case's own module); lab_coverage.rs judges which copies against what the kernel ran.
        if kind == "partial_coverage" && !local.is_dir() {
            failures.push(format!(
                "{case}: klpsym says partial_coverage without the DWARF of a module of the case"
            ));
        }
        let verdict = match kind {
            "partial_coverage" => "accepted".to_string(),
            "unverified" if unexcused.is_empty() => "accepted".to_string(),
            "binds_another_definition" if other_build => "accepted".to_string(),
            v => v.to_string(),
        };
        let logs: Vec<String> = r["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["reached"].as_bool() == Some(true))
            .flat_map(|p| {
                p["log"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_string())
            })
            .collect();
        // The kallsyms entries the kernel's walks visited: before 6.2 every visited entry is
        // one call of klp_find_callback, counted in the guest by a kprobe. (Since 6.2 the
        // vmlinux lookups binary-search without a callback per entry.)
        if let (Some(hits), true, "accepted") = (
            oracle.find_callbacks,
            version < (6, 2),
            oracle.verdict.as_str(),
        ) {
            let predicted = v["results"][0]["resolution_cost"]["symbols_visited"].as_u64();
            if predicted != Some(hits) {
                failures.push(format!(
                    "{case}: the kernel's walks visited {hits} kallsyms entries (kprobe on klp_find_callback), klpsym predicts {predicted:?}"
                ));
            }
            *visits_checked += 1;
        }
        // Since 6.2 a vmlinux lookup binary-searches the name-sorted table: the names it
        // reads (kprobe on kallsyms_expand_symbol) are its visits, its callbacks those on
        // the matches; module lookups still walk with klp_find_callback.
        if let (Some(names), Some(matched), Some(module_entries), true, "accepted") = (
            oracle.expansions,
            oracle.match_callbacks,
            oracle.find_callbacks,
            version >= (6, 2),
            oracle.verdict.as_str(),
        ) {
            let cost = &v["results"][0]["resolution_cost"];
            let visited = |vmlinux: bool| -> u64 {
                cost["by_object"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|o| (o["object"] == "vmlinux") == vmlinux)
                    .map(|o| o["symbols_visited"].as_u64().unwrap())
                    .sum()
            };
            let predicted = (
                visited(true),
                cost["match_callbacks"].as_u64().unwrap(),
                visited(false),
            );
            if predicted != (names, matched, module_entries) {
                failures.push(format!(
                    "{case}: the kernel's lookups read {names} vmlinux names, called back {matched} matches and walked {module_entries} module entries (kprobes); klpsym predicts {predicted:?}"
                ));
            }
            *visits_checked += 1;
        }
        // The definition each replaced vmlinux function binds: the one the kernel patched.
        if oracle.verdict == "accepted" {
            for ((obj, name), want) in oracle.addrs.iter().filter(|((o, _), _)| o == "vmlinux") {
                let got = v["results"][0]["bindings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| {
                        b["source"] == "function"
                            && b["object"] == obj.as_str()
                            && b["name"] == name.as_str()
                    })
                    .and_then(|b| b["bound"]["address"].as_str())
                    .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
                if got != Some(*want) {
                    failures.push(format!(
                        "{case}: klpsym check binds {obj}:{name} at {got:x?}, the kernel patched {want:#x}"
                    ));
                }
            }
        }
        // `klpsym status` against what sysfs showed while the patch was loaded: the patch and
        // its functions at the addresses the kernel resolved.
        if oracle.verdict == "accepted" && !oracle.addrs.is_empty() {
            match status_outside(&cdir, capture, patch_name) {
                Err(e) => failures.push(format!("{case}: klpsym status: {e}")),
                Ok(st) => {
                    let patch = st["patches"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|p| p["name"] == patch_name);
                    match patch {
                        None => failures
                            .push(format!("{case}: klpsym status does not list {patch_name}")),
                        Some(p) => {
                            for ((obj, name), want) in &oracle.addrs {
                                let got = p["objects"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .filter(|o| o["name"] == obj.as_str())
                                    .flat_map(|o| o["funcs"].as_array().unwrap().iter())
                                    .find(|f| f["name"] == name.as_str())
                                    .and_then(|f| f["address"].as_str())
                                    .and_then(|a| {
                                        u64::from_str_radix(a.trim_start_matches("0x"), 16).ok()
                                    });
                                if got != Some(*want) {
                                    failures.push(format!(
                                        "{case}: klpsym status: {obj}:{name} at {got:x?}, the kernel used {want:#x}"
                                    ));
                                }
                            }
                            if p["enabled"] != serde_json::Value::Bool(true) {
                                failures.push(format!(
                                    "{case}: klpsym status: enabled {}",
                                    p["enabled"]
                                ));
                            }
                            *statuses_checked += 1;
                        }
                    }
                }
            }
        }
        let want_code = if oracle.verdict == "accepted" && kind != "partial_coverage" {
            0
        } else {
            1
        };
        if verdict != oracle.verdict || code != want_code {
            failures.push(format!(
                "{case}: kernel {} / klpsym {verdict} (exit {code})",
                oracle.verdict
            ));
        }
        if oracle.verdict == "refused_at_load" {
            let got = r["verdict"]["errno"]
                .as_i64()
                .and_then(|e| {
                    r["problems"]
                        .as_array()?
                        .iter()
                        .find(|p| p["errno"].as_i64() == Some(e))
                })
                .and_then(|p| p["errno_name"].as_str())
                .map(str::to_string);
            if got != oracle.errno {
                failures.push(format!(
                    "{case}: the load failed with {:?}, klpsym predicts {got:?}",
                    oracle.errno
                ));
            }
        }
        if logs != oracle.errors {
            failures.push(format!(
                "{case}: kernel printed {:?}\n    klpsym predicts {:?}",
                oracle.errors, logs
            ));
        }
        // The whole livepatch log, informational lines included (enabling, transition,
        // applying to a loading module).
        let predicted = livepatch_lines(r);
        if predicted != oracle.livepatch_log {
            failures.push(format!(
                "{case}: kernel log {:?}\n    klpsym predicts {:?}",
                oracle.livepatch_log, predicted
            ));
        }
        // Every module-loader check ran, the signature's included (the config is given):
        // none silently "not checked".
        for c in r["loader_checks"].as_array().unwrap() {
            let (name, status) = (c["check"].as_str().unwrap(), c["status"].as_str().unwrap());
            if status == "not_checked" {
                failures.push(format!(
                    "{case}: loader check {name} not checked: {}",
                    c["detail"]
                ));
            }
        }
        // 2. Addresses: every function the kernel resolved, with every module the case loaded
        //    placed where the kernel put it.
        if !oracle.addrs.is_empty() || !oracle.relocs.is_empty() {
            let mut args2 = args[..base_args].to_vec();
            if !oracle.modules.is_empty() {
                args2.extend([
                    "--loaded".into(),
                    oracle.modules.join(",").into(),
                    "--place-from".into(),
                    cdir.join("kallsyms-modules.txt").into(),
                ]);
            }
            let refs: Vec<&std::ffi::OsStr> = args2.iter().map(|a| a.as_os_str()).collect();
            let (_, v) = check(&refs);
            let r = &v["results"][0]["report"];
            for ((obj, name), want) in &oracle.addrs {
                let got = r["objects"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|o| o["name"] == obj.as_str())
                    .flat_map(|o| o["funcs"].as_array().unwrap().iter())
                    .find(|f| f["old_name"] == name.as_str())
                    .and_then(|f| f["address"].as_str())
                    .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
                if got != Some(*want) {
                    failures.push(format!(
                        "{case}: {obj}:{name}: kernel used {want:#x}, klpsym says {got:x?}"
                    ));
                }
            }
            // klp relocations: the address the patched code read at run time.
            for (name, want) in &oracle.relocs {
                let got: Vec<u64> = r["relocations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|x| {
                        x["symbol"].as_str().is_some_and(|s| {
                            s.split('.')
                                .nth(4)
                                .is_some_and(|n| n.split(',').next() == Some(name.as_str()))
                                || s.contains(&format!(".{name},"))
                        })
                    })
                    .filter_map(|x| {
                        x["resolved"]
                            .as_str()
                            .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
                    })
                    .collect();
                if got.is_empty() || got.iter().any(|g| g != want) {
                    failures.push(format!("{case}: relocation {name}: the patched code saw {want:#x}, klpsym resolves {got:x?}"));
                }
                relocs_checked += 1;
            }
        }
        compared += 1;
    }
    if *statuses_checked < 5 {
        failures.push(format!(
            "only {statuses_checked} cases had klpsym status judged"
        ));
    }
    if *visits_checked < 5 {
        failures.push(format!(
            "only {visits_checked} cases had their kallsyms visits counted in the guest"
        ));
    }
    (compared, relocs_checked, *visits_checked, failures)
}

/// A folder of one lab kernel's packages (its lab.env's image package and, where the
/// release ships its modules apart, the `linux-modules` package of the same release beside
/// it): the kernel as a user hands it over, modules included, to name as the built-for one.
struct Packages(tempfile::TempDir);

impl Packages {
    fn path(&self) -> &Path {
        self.0.path()
    }
}

fn packages_of(lab_env: &Path) -> Packages {
    let text =
        std::fs::read_to_string(lab_env).unwrap_or_else(|e| panic!("{}: {e}", lab_env.display()));
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{}: no {k}=", lab_env.display()))
            .to_string()
    };
    let (image, release) = (PathBuf::from(get("IMAGE_DEB")), get("RELEASE"));
    let dir = tempfile::tempdir().unwrap();
    let link = |p: &Path| {
        std::os::unix::fs::symlink(p, dir.path().join(p.file_name().unwrap())).unwrap();
    };
    link(&image);
    let debs = image.parent().unwrap();
    for e in std::fs::read_dir(debs).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("linux-modules-{release}_")) {
            link(&e.path());
        }
    }
    Packages(dir)
}

/// The `built-for.txt` of a case the oracle loaded from another build's oracle (`built_for=`
/// in case.conf): `suite`, `release`, `lab_dir`, `load_flags`.
fn built_for(cdir: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(cdir.join("built-for.txt")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// How many cases the oracle of `dir` found not applicable to its kernel (`requires=`).
fn not_applicable(dir: &Path) -> usize {
    let Ok(index) = std::fs::read_to_string(dir.join("index.txt")) else {
        return 0;
    };
    index
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|case| {
            std::fs::read_to_string(dir.join(case).join("oracle.txt"))
                .is_ok_and(|t| t.lines().any(|l| l.starts_with("skipped=not applicable: ")))
        })
        .count()
}

/// binutils' addr2line's file for `addr` in `elf` (the line table's file of the function's
/// first instruction, with the build's source root stripped the way faddr2line strips it),
/// when it names one.
fn addr2line_file(elf: &Path, addr: u64) -> Option<String> {
    let out = Command::new("addr2line")
        .arg("-e")
        .arg(elf)
        .arg(format!("{addr:#x}"))
        .output()
        .unwrap_or_else(|e| panic!("addr2line (binutils) is needed here: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let (file, _) = text.lines().next()?.rsplit_once(':')?;
    (file != "??").then(|| file.to_string())
}

/// Identity needs source files: against each lab kernel's debug vmlinux (its -dbg package's),
/// every replaced vmlinux function of the ambiguous cases binds the definition the kernel
/// patched, names the source file binutils' addr2line gives that address (the truth, read
/// from the line table, not from klpsym), and is as built against the same kernel. Position
/// 1 and 2 of `m_show` are two definitions in two files: their identities differ. Each case
/// is one the kernel accepts (case.conf expect=accepted): one it refused is a failure, never
/// a pass, and a kernel without its -dbg vmlinux is a recorded skip.
#[test]
fn bindings_name_the_source_file_of_what_the_kernel_patched() {
    let mut judged = 0;
    let mut failures = Vec::new();
    for k in livepatch_kernels() {
        let Some(dbg) = k.get("VMLINUX_DBG").filter(|v| !v.is_empty()) else {
            klpsym_testkit::lab::skip(
                &format!("{}: bindings against a debug vmlinux", k.name),
                "the kernel has no -dbg vmlinux in the lab",
            );
            continue;
        };
        let dir = k.path("LIVEPATCH_DIR");
        let mut files = Vec::new();
        for case in ["ambiguous-pos1", "ambiguous-pos2"] {
            let cdir = dir.join(case);
            let oracle = read_oracle(&cdir);
            if oracle.verdict != "accepted" || !oracle.broken.is_empty() {
                failures.push(format!(
                    "{}: {case}: the kernel's record is {} {:?}: nothing to judge a binding by",
                    k.name, oracle.verdict, oracle.broken
                ));
                continue;
            }
            let index = std::fs::read_to_string(dir.join("index.txt")).unwrap();
            let patch = index
                .lines()
                .find(|l| l.split_whitespace().next() == Some(case))
                .and_then(|l| l.split_whitespace().find_map(|x| x.strip_prefix("patch=")))
                .expect("the case's patch in index.txt")
                .to_string();
            let ko = patch_file(&cdir, &patch);
            let args: Vec<&std::ffi::OsStr> = vec![
                ko.as_os_str(),
                "-k".as_ref(),
                dbg.as_ref(),
                "--built-for".as_ref(),
                dbg.as_ref(),
            ];
            let (_, v) = check(&args);
            let Some(b) = v["results"][0]["bindings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["source"] == "function" && b["name"] == "m_show")
                .cloned()
            else {
                failures.push(format!("{}: {case}: no binding of m_show: {v}", k.name));
                continue;
            };
            let Some(&want) = oracle
                .addrs
                .get(&("vmlinux".to_string(), "m_show".to_string()))
            else {
                failures.push(format!(
                    "{}: {case}: the guest recorded no address of m_show",
                    k.name
                ));
                continue;
            };
            let got = b["bound"]["address"].as_str().unwrap_or_default();
            if got != format!("{want:#x}") {
                failures.push(format!(
                    "{}: {case}: the kernel patched {want:#x}, klpsym binds {got}",
                    k.name
                ));
            }
            let file = b["identity"]["file"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match addr2line_file(Path::new(dbg), want) {
                Some(truth) if !file.is_empty() && (truth == file || truth.ends_with(&format!("/{file}"))) => {}
                truth => failures.push(format!(
                    "{}: {case}: addr2line puts {want:#x} in {truth:?}, klpsym's identity names {file:?}: {b}",
                    k.name
                )),
            }
            if b["as_built"]["status"] != "same" {
                failures.push(format!("{}: {case}: as built against itself: {b}", k.name));
            }
            files.push(file);
        }
        if files.len() != 2 || files[0] == files[1] {
            failures.push(format!(
                "{}: two positions of m_show, two definitions in two files; klpsym names {files:?}",
                k.name
            ));
        }
        judged += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "bindings against a debug vmlinux",
            "no lab kernel with a livepatch oracle and a -dbg vmlinux",
        );
    }
}
