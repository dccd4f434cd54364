//! `klpsym addr` against the kernel's `%pS` and `%pB` lines of the symbolize case.

use std::path::Path;
use std::process::Command;

use crate::common::livepatch_kernels;
use crate::{kernel_lines, kernel_words};

/// `klpsym addr --json` answers for `addrs`, as the kernel would print each: the text, or the
/// number (`0x...`) when there is no symbol.
fn klpsym_texts(
    cdir: &Path,
    vmlinuz: &Path,
    addrs: &[String],
    return_addresses: bool,
) -> Vec<String> {
    klpsym_answers(cdir, vmlinuz, "klp_symbolize", addrs, return_addresses)
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

/// `klpsym addr --json` answers for `addrs` with `module` placed from the case's capture:
/// each as %pS (or %pB) prints it, and as %ps does (the name and module, no offset).
fn klpsym_answers(
    cdir: &Path,
    vmlinuz: &Path,
    module: &str,
    addrs: &[String],
    return_addresses: bool,
) -> Vec<(String, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klpsym"));
    cmd.arg("addr")
        .arg("-k")
        .arg(vmlinuz)
        .arg("--modules")
        .arg(cdir);
    cmd.args(["--loaded", module, "--place-from"]);
    cmd.arg(cdir.join("kallsyms-modules.txt")).arg("--json");
    if return_addresses {
        cmd.arg("--return-addresses");
    }
    let out = cmd.args(addrs).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["results"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let n =
                u64::from_str_radix(a["address"].as_str().unwrap().trim_start_matches("0x"), 16)
                    .unwrap();
            let number = format!("{n:#x}");
            let text = match (a["found"].as_bool(), a["text"].as_str()) {
                (Some(true), Some(t)) => t.to_string(),
                _ => number.clone(),
            };
            let no_offset = match (a["found"].as_bool(), a["symbol"].as_str()) {
                (Some(true), Some(sym)) => match a["module"].as_str() {
                    Some(m) => format!("{sym} [{m}]"),
                    None => sym.to_string(),
                },
                _ => number,
            };
            (text, no_offset)
        })
        .collect()
}

/// (address, %pS, %pB, %ps) of each `out=KLPSYM` line; a line of another shape is an error
/// naming it (a line passed over would shrink what is judged unseen).
fn kernel_lines4(oracle: &str) -> Result<Vec<[String; 4]>, String> {
    kernel_words(oracle)
        .into_iter()
        .map(|w| {
            <[String; 4]>::try_from(w)
                .map_err(|w| format!("an out=KLPSYM line of {} words, not 4: {w:?}", w.len()))
        })
        .collect()
}

/// The module's own addresses of every class (text, its end, rodata, data, bss,
/// `__this_module`, section starts, the end of its core) and vmlinux data of each type, below
/// `_text` and past `_end`: `klpsym addr` prints what the kernel's `%pS`, `%pB` and `%ps`
/// printed for each (case symbolize-module). The init function's own lines, printed while
/// its init ran, are printed again after init and judged then: the loader has freed that
/// memory, and the kernel names an address there only inside a function ftrace kept (one
/// with an ftrace call site: `ftrace_mod_address_lookup()`), the number elsewhere.
#[test]
fn addr_prints_what_the_kernels_percent_ps_print_for_a_modules_every_class() {
    let mut failures = Vec::new();
    let mut judged = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize-module");
        let oracle = std::fs::read_to_string(cdir.join("oracle.txt"))
            .unwrap_or_else(|e| panic!("{}: symbolize-module: {e}", k.name));
        let module = "klp_symbolize_module";
        let init_fn = "klp_symmod_init_probe";
        // The lines printed while its init ran (the init function's padding's last byte, its
        // start and the bytes after), ended by the exercise's KLPINIT-END; then the lines
        // printed after init, those addresses again among them.
        let Some((during, after)) = oracle.split_once("\nout=KLPINIT-END\n") else {
            failures.push(format!(
                "{}: symbolize-module: no KLPINIT-END line between the init-time lines and the rest",
                k.name
            ));
            continue;
        };
        let (init_lines, lines) = match (kernel_lines4(during), kernel_lines4(after)) {
            (Ok(i), Ok(l)) => (i, l),
            (Err(e), _) | (_, Err(e)) => {
                failures.push(format!("{}: symbolize-module: {e}", k.name));
                continue;
            }
        };
        if !init_lines.iter().any(|l| l[1].starts_with(init_fn)) {
            failures.push(format!(
                "{}: the init-time lines name no {init_fn}: {init_lines:?}",
                k.name
            ));
        }
        if init_lines.is_empty() {
            failures.push(format!("{}: the guest printed no init-time line", k.name));
        }
        // klpsym answers for the module as it is after init, when the loader has freed the
        // init memory (ftrace still naming its traced functions): the guest printed every
        // init-time address again then (the case's exercise), and those later lines are
        // among `lines`, judged below like the rest.
        for l in &init_lines {
            if !lines.iter().any(|m| m[0] == l[0]) {
                failures.push(format!(
                    "{}: {}: printed during init ({}), never again after it",
                    k.name, l[0], l[1]
                ));
            }
        }
        for class in [
            "klp_symmod_text",
            "klp_symmod_ro",
            "klp_symmod_data",
            "klp_symmod_bss",
            "__this_module",
        ] {
            if !lines.iter().any(|l| l[1].starts_with(&format!("{class}+"))) {
                failures.push(format!("{}: the guest printed no line for {class}", k.name));
            }
        }
        let addrs: Vec<String> = lines.iter().map(|l| l[0].clone()).collect();
        let ps = klpsym_answers(&cdir, &k.path("VMLINUZ"), module, &addrs, false);
        let pb = klpsym_answers(&cdir, &k.path("VMLINUZ"), module, &addrs, true);
        for (i, l) in lines.iter().enumerate() {
            for (what, want, got) in [
                ("%pS", &l[1], &ps[i].0),
                ("%pB", &l[2], &pb[i].0),
                ("%ps", &l[3], &ps[i].1),
            ] {
                if want != got {
                    failures.push(format!("{}: {}: {what} {want}, klpsym {got}", k.name, l[0]));
                }
            }
            judged += 3;
        }
    }
    if !failures.is_empty() {
        panic!("{} differ:\n{}", failures.len(), failures.join("\n"));
    }
    if judged == 0 {
        klpsym_testkit::lab::skip("module %pS", "no lab kernel ran the livepatch oracle");
    } else {
        eprintln!("{judged} %pS/%pB/%ps strings of module and vmlinux addresses printed the same by klpsym addr");
    }
}

#[test]
fn addr_prints_what_the_kernels_percent_ps_and_pb_print() {
    let mut failures = Vec::new();
    let mut judged = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize");
        let oracle = std::fs::read_to_string(cdir.join("oracle.txt"))
            .unwrap_or_else(|e| panic!("{}: symbolize: {e}", k.name));
        let lines = kernel_lines(&oracle);
        // Three addresses around each of cmdline_proc_show, the next symbol, _end and the
        // module's two functions.
        if lines.len() < 15 {
            failures.push(format!(
                "{}: the guest printed {} KLPSYM lines, not 15",
                k.name,
                lines.len()
            ));
            continue;
        }
        assert!(
            lines.iter().any(|(_, s, _)| s.ends_with("[klp_symbolize]")),
            "{}: no module address among {lines:?}",
            k.name
        );
        assert!(
            lines.iter().any(|(_, s, _)| s.starts_with("0x")),
            "{}: no address past the kernel among {lines:?}",
            k.name
        );
        let addrs: Vec<String> = lines.iter().map(|(a, _, _)| a.clone()).collect();
        let ps = klpsym_texts(&cdir, &k.path("VMLINUZ"), &addrs, false);
        let pb = klpsym_texts(&cdir, &k.path("VMLINUZ"), &addrs, true);
        for (i, (a, want_s, want_b)) in lines.iter().enumerate() {
            if &ps[i] != want_s {
                failures.push(format!(
                    "{}: {a}: %pS {want_s}, klpsym addr {}",
                    k.name, ps[i]
                ));
            }
            if &pb[i] != want_b {
                failures.push(format!(
                    "{}: {a}: %pB {want_b}, klpsym addr --return-addresses {}",
                    k.name, pb[i]
                ));
            }
            judged += 2;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if judged == 0 {
        klpsym_testkit::lab::skip("%pS and %pB", "no lab kernel ran the livepatch oracle");
    } else {
        eprintln!("{judged} %pS/%pB strings of the kernels printed the same by klpsym addr");
    }
}

/// `major.minor.sublevel` of a lab kernel: its release's series with the upstream sublevel
/// of its package version (`6.1.0-57-amd64` with `6.1.192-3`: `6.1.192`).
fn stated_version(k: &klpsym_testkit::lab::LabKernel) -> String {
    let release = k.value("RELEASE");
    let series: Vec<&str> = release.splitn(3, '.').take(2).collect();
    let prefix = format!("{}.{}.", series[0], series[1]);
    let pkg = k.value("PACKAGE_VERSION");
    let sub: String = pkg
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{}: package version {pkg} is not {prefix}N", k.name))
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    format!("{prefix}{sub}")
}

/// What a user has after a boot: its saved /proc/kallsyms (vmlinux's lines and the module's),
/// and the kernel's version, stated (`--kernel-version`) or in the pasted oops's own `CPU: …
/// Not tainted RELEASE #1 Debian VERSION` line. klpsym must print the kernel's own `%pS` of
/// the module's addresses (case symbolize-module) on every kernel generation — sizes by the
/// rule of "module/kallsyms: fix nextval for data symbol lookup" where the kernel has it, by
/// the end of the module's text where it does not — wherever the saved kallsyms shows the
/// address is the module's (up to its last symbol); and say nothing was assumed.
#[test]
fn addr_prints_the_kernels_module_percent_ps_from_a_saved_kallsyms_and_its_version() {
    let mut failures = Vec::new();
    let mut judged = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize-module");
        let module = "klp_symbolize_module";
        let Ok(oracle) = std::fs::read_to_string(cdir.join("oracle.txt")) else {
            failures.push(format!("{}: symbolize-module: no oracle", k.name));
            continue;
        };
        let mods = std::fs::read_to_string(cdir.join("kallsyms-modules.txt")).unwrap();
        let nomod = std::fs::read_to_string(k.path("KALLSYMS_NOMOD")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("kallsyms");
        std::fs::write(&saved, format!("{nomod}{mods}")).unwrap();
        // The module's last listed symbol: past it a kallsyms does not say the module's
        // memory goes on.
        let tag = format!("[{module}]");
        let last = mods
            .lines()
            .filter(|l| l.ends_with(&tag))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
            .max()
            .unwrap_or_else(|| panic!("{}: no {module} line in kallsyms-modules.txt", k.name));
        // The lines printed after init (after KLPINIT-END), but for the init function's own:
        // a saved kallsyms does not tell where the init text was (the kernel then names its
        // ftrace-kept functions, judged with the module's .ko by the test above).
        let after = oracle
            .split_once("\nout=KLPINIT-END\n")
            .map_or(oracle.as_str(), |(_, a)| a);
        let init_fn = |p: &str| {
            p.starts_with("klp_symmod_init_probe") || p.starts_with("__pfx_klp_symmod_init_probe")
        };
        let lines: Vec<[String; 4]> = match kernel_lines4(after) {
            Ok(all) => all
                .into_iter()
                .filter(|l| l[1].ends_with(&tag) && !init_fn(&l[1]))
                .filter(|l| {
                    u64::from_str_radix(l[0].trim_start_matches("0x"), 16).is_ok_and(|a| a <= last)
                })
                .collect(),
            Err(e) => {
                failures.push(format!("{}: symbolize-module: {e}", k.name));
                continue;
            }
        };
        if lines.len() < 5 {
            failures.push(format!(
                "{}: {} module lines up to its last symbol, expected at least 5 (text, rodata, data, bss, __this_module)",
                k.name,
                lines.len()
            ));
            continue;
        }
        let version = stated_version(&k);
        // Kernels with the newer rule end a symbol's size with its memory region: a text
        // symbol's with the text, which the kallsyms shows (the page above its last
        // function), a data symbol's with its data region, which it does not (its next
        // symbol bounds it instead): only text symbols are judged there.
        let newer = {
            let n: Vec<u32> = version.split('.').map(|x| x.parse().unwrap()).collect();
            match (n[0], n[1]) {
                (7, 2) => n[2] >= 4,
                (6, 18) => n[2] >= 50,
                (6, 12) => n[2] >= 117,
                v => v >= (7, 3),
            }
        };
        let text_names: std::collections::HashSet<&str> = mods
            .lines()
            .filter(|l| l.ends_with(&tag))
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                matches!(w.get(1), Some(&"t") | Some(&"T")).then(|| w[2])
            })
            .collect();
        let lines: Vec<[String; 4]> = lines
            .into_iter()
            .filter(|l| {
                !newer
                    || l[1]
                        .split('+')
                        .next()
                        .is_some_and(|n| text_names.contains(n))
            })
            .collect();
        if lines.len() < 2 {
            failures.push(format!("{}: {} module lines to judge", k.name, lines.len()));
            continue;
        }
        let addrs: Vec<String> = lines.iter().map(|l| l[0].clone()).collect();
        let oops = format!(
            "CPU: 0 PID: 1 Comm: insmod Not tainted {} #1 Debian {}\nCall Trace:\n{}\n",
            k.value("RELEASE"),
            k.value("PACKAGE_VERSION"),
            addrs.join("\n")
        );
        for (how, args, stdin) in [
            (
                "stated",
                vec!["--kernel-version".to_string(), version.clone()],
                None,
            ),
            ("from the oops", Vec::new(), Some(oops.as_str())),
        ] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_klpsym"));
            cmd.arg("addr")
                .arg("-k")
                .arg(&saved)
                .arg("--json")
                .args(&args);
            let out = match stdin {
                None => cmd.args(&addrs).output().unwrap(),
                Some(s) => {
                    use std::io::Write;
                    let mut c = cmd
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap();
                    c.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
                    c.wait_with_output().unwrap()
                }
            };
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("warning") {
                failures.push(format!("{}: {how}: {version}: {err}", k.name));
            }
            let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{}: {how}: {e}: {err}", k.name));
                    continue;
                }
            };
            let got = v["results"][0]["addresses"].as_array().unwrap();
            if got.len() != lines.len() {
                failures.push(format!(
                    "{}: {how}: {} answers for {} addresses",
                    k.name,
                    got.len(),
                    lines.len()
                ));
                continue;
            }
            for (l, a) in lines.iter().zip(got) {
                let text = a["text"].as_str().unwrap_or("?");
                if text != l[1] {
                    failures.push(format!(
                        "{} ({version}, {how}): {}: %pS {}, klpsym {text}",
                        k.name, l[0], l[1]
                    ));
                }
                judged += 1;
            }
        }
    }
    if !failures.is_empty() {
        panic!("{} differ:\n{}", failures.len(), failures.join("\n"));
    }
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "module %pS from a saved kallsyms",
            "no lab kernel ran the livepatch oracle",
        );
    } else {
        eprintln!("{judged} module %pS strings printed the same from a saved kallsyms and the kernel's version");
    }
}
