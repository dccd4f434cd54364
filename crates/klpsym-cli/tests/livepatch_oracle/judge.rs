//! One lab kernel's oracle against klpsym: every case's verdict, error lines, addresses,
//! relocation targets, kallsyms visits and `klpsym status`, and the helpers that run klpsym
//! the way the guest was given the patch.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::livepatch_lines;
use crate::record::{built_for, read_oracle};

/// Compares klpsym's predictions with one kernel's oracle: (cases compared, relocation
/// targets compared, cases whose kallsyms visits were counted, differences).
pub fn judge(
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

pub fn check(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
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
pub fn patch_file(cdir: &Path, name: &str) -> PathBuf {
    let xz = cdir.join(format!("{name}.ko.xz"));
    if xz.is_file() {
        xz
    } else {
        cdir.join(format!("{name}.ko"))
    }
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
