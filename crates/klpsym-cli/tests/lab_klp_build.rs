//! Modules made by the kernel's own klp-build, judged by the kernel they were built for.
//!
//! lab/klp-build/build.sh builds a 7.x kernel from Debian's linux-source with
//! `scripts/livepatch/klp-build`, which makes one module per patch of lab/klp-build/patches
//! (klp-build chooses every position itself), then boots the original kernel and loads them
//! (guest.sh). From the module and the kernel's files alone, `klpsym check` must predict what
//! the kernel did: the verdict and errno, every `livepatch:` line in order, the functions
//! livepatch's sysfs lists; and each replaced function must bind the definition whose new
//! code the kernel then ran (the patches add marks only the new code prints: `klp-a:` in
//! /sys/kernel/reboot/type is reboot.c's `type_show`, `klp-a2` in a tty's `type`
//! serial_core.c's). As a cross check the kernel itself answers, Debian's own build of the
//! same release (the lab's sid kernel, another configuration) loads the same files, and
//! `klpsym check` against that kernel's image, module tree and config must predict every line
//! it printed.
//!
//! Input from scripts/test.sh: KLPSYM_TEST_KLP_BUILD_DIR. Skips (saying so) without it unless
//! KLPSYM_REQUIRE_LAB is set.

mod common;
use common::{json, lab, livepatch_lines, run, text};

use std::collections::BTreeMap;
use std::path::Path;

/// What the kernel did in one step of guest.sh.
#[derive(Debug, Default)]
struct Step {
    /// `rc=` of each load, in order.
    rcs: Vec<String>,
    /// `errno=` of each load.
    errnos: Vec<String>,
    /// The kernel's `livepatch:` lines.
    livepatch: Vec<String>,
    /// Every kernel line.
    kernel: Vec<String>,
    /// The kernel lines of each bracketed part of the step (`STEP load FILE`, `STEP settle`,
    /// `STEP run`), by name.
    segments: Vec<(String, Vec<String>)>,
    /// What user space saw: name -> value.
    observed: BTreeMap<String, String>,
    /// `object name,pos` as livepatch's sysfs lists the functions.
    funcs: Vec<String>,
    /// What makes the record unusable.
    notes: Vec<String>,
}

fn read_step(dir: &Path, step: &str) -> Step {
    read_record(&dir.join("oracle"), step)
}

/// One step of the record in `record` (oracle/ or oracle-debian/).
fn read_record(record: &Path, step: &str) -> Step {
    let path = record.join(format!("{step}.txt"));
    let t = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the guest recorded no {step} step)",
            path.display()
        )
    });
    let mut s = Step::default();
    // The step's kernel lines, read the one way every oracle test reads them.
    match klpsym_testkit::klog::steps(t.lines().filter_map(|l| l.strip_prefix("dmesg="))) {
        Ok(segments) => {
            s.kernel = segments.iter().flat_map(|(_, l)| l.clone()).collect();
            s.livepatch = s
                .kernel
                .iter()
                .filter(|v| v.starts_with("livepatch: "))
                .cloned()
                .collect();
            s.segments = segments;
        }
        Err(e) => s
            .notes
            .push(format!("{}: the guest's log: {e}", path.display())),
    }
    for l in t.lines() {
        if let Some(v) = l.strip_prefix("rc=") {
            s.rcs.push(v.to_string());
        } else if let Some(v) = l.strip_prefix("errno=") {
            s.errnos.push(v.to_string());
        } else if let Some(v) = l.strip_prefix("observe ") {
            let (k, v) = v.split_once(' ').unwrap_or((v, ""));
            s.observed.insert(k.to_string(), v.to_string());
        } else if let Some(v) = l.strip_prefix("func=") {
            s.funcs.push(v.to_string());
        } else if let Some(v) = l.strip_prefix("note=") {
            s.notes.push(v.to_string());
        }
    }
    s
}

/// `klpsym check --json` of `module` in the build folder against its kernel.
fn check(dir: &Path, module: &str, extra: &[&str]) -> serde_json::Value {
    let vmlinux = dir.join("vmlinux").display().to_string();
    let modules = dir.join("modules").display().to_string();
    check_on(dir, module, &vmlinux, &modules, extra)
}

/// `klpsym check --json` of `module` in the build folder against `kernel` and its module
/// tree `modules`.
fn check_on(
    dir: &Path,
    module: &str,
    kernel: &str,
    modules: &str,
    extra: &[&str],
) -> serde_json::Value {
    let ko = dir.join(module).display().to_string();
    let mut args = vec![
        "check",
        &ko,
        "--kernel",
        kernel,
        "--modules",
        modules,
        "--json",
        "--no-cache",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{module} on {kernel}: {}",
        text(&o.stderr)
    );
    json(&o)["results"][0].clone()
}

/// The verdict, errno and `livepatch:` lines the report predicts, against the step's.
fn judge(step: &str, s: &Step, r: &serde_json::Value, failures: &mut Vec<String>) {
    let report = &r["report"];
    let verdict = report["verdict"]["kind"].as_str().unwrap_or("?");
    let patch_rc = s.rcs.last().map(String::as_str).unwrap_or("?");
    let kernel = if patch_rc == "0" {
        "accepted"
    } else {
        "refused_at_load"
    };
    if verdict != kernel {
        failures.push(format!(
            "{step}: the kernel {kernel} (rc={patch_rc}), klpsym says {verdict}"
        ));
    }
    if kernel != "accepted" {
        let errno = report["verdict"]["errno"].as_i64();
        let name = report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["errno"].as_i64() == errno && p["reached"] == true)
            .and_then(|p| p["errno_name"].as_str())
            .unwrap_or("?");
        let want = s.errnos.last().map(String::as_str).unwrap_or("?");
        if name != want {
            failures.push(format!(
                "{step}: the load failed with {want}, klpsym predicts {name}"
            ));
        }
    }
    let predicted = livepatch_lines(report);
    if predicted != s.livepatch {
        failures.push(format!(
            "{step}: the kernel printed {:?}\n    klpsym predicts {predicted:?}",
            s.livepatch
        ));
    }
    if kernel == "accepted" {
        // livepatch's sysfs names a function `name,pos` (position 0 listed as 1).
        let mut listed: Vec<String> = report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|o| {
                o["funcs"].as_array().unwrap().iter().map(move |f| {
                    format!(
                        "{} {},{}",
                        o["name"].as_str().unwrap(),
                        f["old_name"].as_str().unwrap(),
                        f["old_sympos"].as_u64().unwrap().max(1)
                    )
                })
            })
            .collect();
        let mut sysfs = s.funcs.clone();
        listed.sort();
        sysfs.sort();
        if listed != sysfs {
            failures.push(format!("{step}: sysfs lists {sysfs:?}, klpsym {listed:?}"));
        }
    }
    for n in &s.notes {
        failures.push(format!("{step}: the guest noted: {n}"));
    }
}

/// The files klpsym says the functions named `name` bind.
fn bound_files(r: &serde_json::Value, name: &str) -> Vec<String> {
    let mut v: Vec<String> = r["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["source"] == "function" && b["name"] == name)
        .map(|b| b["bound"]["file"].as_str().unwrap_or("?").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn klp_build_modules_are_judged_by_their_kernel() {
    let Some(dir) = lab("KLPSYM_TEST_KLP_BUILD_DIR") else {
        return;
    };
    let mut failures = Vec::new();

    // 1. vmlinux: two type_show definitions (positions klp-build chose), compiler clones,
    //    static data reached through klp relocations.
    let s = read_step(&dir, "vmlinux");
    let r = check(&dir, "livepatch-vmlinux.ko", &[]);
    judge("vmlinux", &s, &r, &mut failures);
    let seen = |k: &str| s.observed.get(k).cloned().unwrap_or_default();
    // The kernel ran the new code of both type_show definitions...
    assert!(
        seen("reboot_type").starts_with("klp-a:") && seen("tty_type").ends_with(" klp-a2"),
        "the patched type_show functions did not run: {:?}",
        s.observed
    );
    let before = seen("reboot_type_before");
    assert!(
        !before.is_empty() && !before.contains("No such file") && !before.starts_with("klp-a:"),
        "{:?}",
        s.observed
    );
    // The clones' new code ran too (kallsyms_expand_symbol.constprop.0 and its new .cold
    // part; vmstat_refresh, whose .cold part klp-build could not correlate).
    for line in [
        "klp-d: kallsyms_expand_symbol patched",
        "klp-d: vmstat_refresh write=1",
    ] {
        if !s.kernel.iter().any(|l| l == line) {
            failures.push(format!("vmlinux: the kernel never printed {line:?}"));
        }
    }
    for name in [
        "kallsyms_expand_symbol.constprop.0",
        "vmstat_refresh",
        "lowmem_reserve_ratio_sysctl_handler",
    ] {
        let files = bound_files(&r, name);
        let want = match name {
            "vmstat_refresh" => "vmstat.c",
            "lowmem_reserve_ratio_sysctl_handler" => "page_alloc.c",
            _ => "kallsyms.c",
        };
        if files != [want] {
            failures.push(format!(
                "vmlinux: klpsym binds {name} to {files:?}, not {want}"
            ));
        }
    }
    // ...so the two klp_funcs bind reboot.c's and serial_core.c's.
    let files = bound_files(&r, "type_show");
    if files != ["reboot.c", "serial_core.c"] {
        failures.push(format!(
            "vmlinux: klpsym binds type_show to {files:?}; the kernel ran reboot.c's and serial_core.c's new code"
        ));
    }
    // The patched sysctl handler wrote through its klp relocation to the static array.
    if !seen("lowmem_reserve_ratio")
        .split_whitespace()
        .any(|v| v == "7")
    {
        failures.push(format!(
            "vmlinux: lowmem_reserve_ratio shows {:?}: the patched handler did not run",
            seen("lowmem_reserve_ratio")
        ));
    }

    // 2. A function of a module loaded before the patch, placed where the kernel put it.
    let s = read_step(&dir, "kobject");
    let capture = dir
        .join("oracle/kallsyms-kobject.txt")
        .display()
        .to_string();
    let r = check(
        &dir,
        "livepatch-kobject.ko",
        &["--loaded", "kobject_example", "--place-from", &capture],
    );
    judge("kobject", &s, &r, &mut failures);
    assert_eq!(
        s.observed.get("bar").map(String::as_str),
        Some("klp-b:0"),
        "the patched b_show did not run: {:?}",
        s.observed
    );

    // 3. A function without an ftrace call site: klp-build builds it, the kernel refuses it.
    let s = read_step(&dir, "notrace");
    let r = check(&dir, "livepatch-notrace.ko", &[]);
    judge("notrace", &s, &r, &mut failures);
    assert_eq!(
        s.rcs.last().map(String::as_str),
        Some("-1"),
        "the kernel refuses a notrace function"
    );

    // 4. The cross check: Debian's own build of the same release (another configuration)
    //    loads the same files. The kernel answers; klpsym must predict its every line from
    //    the Debian kernel's files (its image, module tree and config).
    let record = dir.join("oracle-debian");
    let env_path = std::fs::read_to_string(record.join("lab.env.path"))
        .unwrap_or_else(|e| panic!("{}: {e}", record.join("lab.env.path").display()));
    let env: BTreeMap<String, String> = std::fs::read_to_string(env_path.trim())
        .unwrap_or_else(|e| panic!("{}: {e}", env_path.trim()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let debian = |k: &str| {
        env.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{}: no {k}=", env_path.trim()))
    };
    let (vmlinuz, modules, config) = (debian("VMLINUZ"), debian("MODULES_DIR"), debian("CONFIG"));
    for (step, module) in [
        ("vmlinux", "livepatch-vmlinux.ko"),
        ("kobject", "livepatch-kobject.ko"),
        ("notrace", "livepatch-notrace.ko"),
    ] {
        let s = read_record(&record, step);
        let r = check_on(
            &dir,
            module,
            &vmlinuz,
            &modules,
            &["--kernel-config", &config],
        );
        // Every line the kernel printed for the patch's load and its transition, line for
        // line: the bracketed load of the patch and its settle (the kobject step's sample
        // module loads in a bracket of its own), the once-per-boot taint notices aside (the
        // first out-of-tree load of the boot prints them, whichever module it is).
        let patch_lines: Vec<String> = s
            .segments
            .iter()
            .filter(|(n, _)| {
                *n == format!("{step} load {module}") || *n == format!("{step} settle")
            })
            .flat_map(|(_, l)| l.iter())
            .filter(|l| !klpsym_testkit::klog::is_taint_notice(l))
            .cloned()
            .collect();
        let step = format!("{step} on Debian's {}", debian("RELEASE"));
        judge(&step, &s, &r, &mut failures);
        let predicted: Vec<String> = r["report"]["kernel_log"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["line"].as_str())
            .map(str::to_string)
            .collect();
        if predicted.is_empty() || patch_lines != predicted {
            failures.push(format!(
                "{step}: the kernel printed {patch_lines:?} for the patch's load\n    klpsym predicts {predicted:?}"
            ));
        }
    }

    // 5. This vmlinux names source files by ELF FILE symbols alone (base names): a path
    // given to `sympos --file` cannot be confirmed (another file of that base name, or none,
    // could be the one), so it is listed as unconfirmed and exits 1; the base name answers.
    let vmlinux = dir.join("vmlinux").display().to_string();
    let sympos = |file: &str| {
        let o = run(&[
            "sympos",
            "type_show",
            "-k",
            &vmlinux,
            "--file",
            file,
            "--json",
        ]);
        let v = json(&o);
        (o.status.code(), v["results"][0].clone())
    };
    let (code, by_base) = sympos("reboot.c");
    assert_eq!(code, Some(0), "{by_base}");
    assert_eq!(by_base["base_name_only"], false, "{by_base}");
    assert!(by_base["count"].as_u64() >= Some(1), "{by_base}");
    let (code, by_path) = sympos("no/such/dir/reboot.c");
    assert_eq!(code, Some(1), "{by_path}");
    assert_eq!(by_path["base_name_only"], true, "{by_path}");
    assert_eq!(by_path["count"], by_base["count"], "{by_path}");

    // 6. A patch klp-build itself refuses makes no module, and says why.
    let refused = std::fs::read_to_string(dir.join("refused.log")).unwrap();
    assert!(refused.contains("unsupported patch to lib/"), "{refused}");

    assert!(
        failures.is_empty(),
        "{} differences between klpsym and the klp-build kernel:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
