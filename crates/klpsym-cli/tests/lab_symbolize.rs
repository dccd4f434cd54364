//! `klpsym addr` held to the kernel's own `%pS` and `%pB`: the lab's `symbolize` case
//! (lab/livepatch/cases/symbolize) prints, in the guest, `KLPSYM <%px> <%pS> <%pB>` for each
//! address around cmdline_proc_show's start and end, vmlinux's `_end` (the last byte before
//! it, `_end` itself and past it) and the case module's own functions (its last function
//! ends the module's text). klpsym is given what a user has: the kernel's image, the
//! module's file, and where /proc/kallsyms showed the module; it must print the same text,
//! or the number where the kernel prints the number.

mod common;
use common::livepatch_kernels;

use std::path::Path;
use std::process::Command;

/// The words of each `out=KLPSYM` line. A module symbol's ` [module]` belongs to the word
/// before it.
fn kernel_words(oracle: &str) -> Vec<Vec<String>> {
    oracle
        .lines()
        .filter_map(|l| l.strip_prefix("out=KLPSYM "))
        .map(|l| {
            let mut words: Vec<String> = Vec::new();
            for w in l.split_whitespace() {
                match words.last_mut() {
                    Some(prev) if w.starts_with('[') => {
                        prev.push(' ');
                        prev.push_str(w);
                    }
                    _ => words.push(w.to_string()),
                }
            }
            words
        })
        .collect()
}

/// (address, %pS, %pB) of each `out=KLPSYM` line; the symbolize case prints three columns,
/// and a line of another shape fails the test naming it.
fn kernel_lines(oracle: &str) -> Vec<(String, String, String)> {
    kernel_words(oracle)
        .into_iter()
        .map(|w| match &w[..] {
            [a, s, b] => (a.clone(), s.clone(), b.clone()),
            _ => panic!("an out=KLPSYM line of {} words, not 3: {w:?}", w.len()),
        })
        .collect()
}

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

/// One `addr2line -f -i -p` record for `addr` (`tool`: binutils' or llvm's), its lines.
fn addr2line_record(tool: &str, args: &[&str], addr: u64) -> Vec<String> {
    let out = Command::new(tool)
        .args(["-f", "-i", "-p"])
        .args(args)
        .arg(format!("{addr:#x}"))
        .output()
        .unwrap_or_else(|e| panic!("{tool} runs (apt-get install binutils llvm): {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().trim_start_matches("(inlined by) ").to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Whether klpsym's `source` frames say what an addr2line record says: the same functions
/// and lines, each file the same or the tail of the tool's absolute path (klpsym's are
/// relative to the source tree), the discriminator on the innermost line; no frame where
/// the tool knows no line.
fn frames_agree(theirs: &[String], ours: &[serde_json::Value]) -> bool {
    let known = |l: &String| !(l.contains(" at ??:") || l.ends_with(":?"));
    if theirs.len() == 1 && !known(&theirs[0]) {
        return ours.is_empty();
    }
    theirs.len() == ours.len()
        && theirs.iter().zip(ours).enumerate().all(|(i, (t, o))| {
            let (t, disc) = match t.split_once(" (discriminator ") {
                Some((t, d)) => (t, d.trim_end_matches(')').parse::<u64>().ok()),
                None => (t.as_str(), None),
            };
            let Some((func, place)) = t.split_once(" at ") else {
                return false;
            };
            let Some((file, line)) = place.rsplit_once(':') else {
                return false;
            };
            let f = o["file"].as_str().unwrap_or("??");
            o["function"].as_str().unwrap_or("??") == func
                && (file == f || file.ends_with(&format!("/{f}")))
                && o["line"].as_u64().map(|l| l.to_string()).as_deref() == Some(line)
                && (i > 0 || o["discriminator"].as_u64() == disc)
        })
}

/// `klpsym addr` prints file:line and inline chains as decode_stacktrace's addr2line does,
/// for kernel and module addresses alike: the symbolize case's addresses, KASLR'd as the
/// guest printed them, against the kernel's `-dbg` vmlinux and the case module's own file
/// (placed from the guest's /proc/kallsyms), each frame held to binutils' or
/// llvm-addr2line's record at the link-time place (the symbol's address in the vmlinux or
/// its section offset in the .ko, plus the answer's offset).
#[test]
fn addr_prints_file_line_as_addr2line_does_for_kernel_and_module_addresses() {
    use object::{Object, ObjectSymbol};
    let mut failures = Vec::new();
    let mut judged = 0;
    for k in livepatch_kernels() {
        let dbg = k.path("VMLINUX_DBG");
        if k.value("VMLINUX_DBG").is_empty() {
            klpsym_testkit::lab::skip(
                &format!("{}: addr file:line", k.name),
                "the kernel has no -dbg vmlinux in the lab",
            );
            continue;
        }
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize");
        let oracle = std::fs::read_to_string(cdir.join("oracle.txt"))
            .unwrap_or_else(|e| panic!("{}: symbolize: {e}", k.name));
        let addrs: Vec<String> = kernel_lines(&oracle).into_iter().map(|l| l.0).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_klpsym"))
            .args(["addr", "--json", "-k"])
            .arg(&dbg)
            .arg("--modules")
            .arg(&cdir)
            .args(["--loaded", "klp_symbolize", "--place-from"])
            .arg(cdir.join("kallsyms-modules.txt"))
            .args(&addrs)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let vmlinux_bytes = std::fs::read(&dbg).unwrap();
        let vmlinux = object::File::parse(&*vmlinux_bytes).unwrap();
        // The guest's KASLR offset: its _text against the vmlinux's, where its capture lists
        // _text (the module capture lists only modules: the guest ran at the link address,
        // as the %pS test above holds it to).
        let text_of = |t: &str| {
            t.lines().find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 3 && w[2] == "_text").then(|| u64::from_str_radix(w[0], 16).unwrap())
            })
        };
        let guest = std::fs::read_to_string(cdir.join("kallsyms-modules.txt")).unwrap();
        let link = vmlinux
            .symbols()
            .find(|s| s.name() == Ok("_text"))
            .map(|s| s.address())
            .unwrap();
        let delta = text_of(&guest).map_or(0, |t| t.wrapping_sub(link));
        let ko_path = cdir.join("klp_symbolize.ko");
        let ko_bytes = std::fs::read(&ko_path).unwrap();
        let ko = object::File::parse(&*ko_bytes).unwrap();
        let (mut kernel_lines_seen, mut module_lines_seen) = (0, 0);
        for a in v["results"][0]["addresses"].as_array().unwrap() {
            let (Some(sym), Some(off)) = (a["symbol"].as_str(), a["offset"].as_str()) else {
                // No symbol (the kernel printed the number): no line either.
                judged += 1;
                if a["source"].as_array().is_some_and(|s| !s.is_empty()) {
                    failures.push(format!(
                        "{}: {}: no symbol, yet klpsym gives a line: {a}",
                        k.name, a["address"]
                    ));
                }
                continue;
            };
            let off = u64::from_str_radix(off.trim_start_matches("0x"), 16).unwrap();
            let ours = a["source"].as_array().cloned().unwrap_or_default();
            let (records, what) = match a["module"].as_str() {
                None => {
                    let addr = a["address"].as_str().unwrap().trim_start_matches("0x");
                    let at = u64::from_str_radix(addr, 16).unwrap().wrapping_sub(delta);
                    let e = ["-e", dbg.to_str().unwrap()];
                    kernel_lines_seen += usize::from(!ours.is_empty());
                    (
                        vec![
                            addr2line_record("addr2line", &e, at),
                            addr2line_record("llvm-addr2line", &e, at),
                        ],
                        format!("{sym}+{off:#x}"),
                    )
                }
                Some(m) => {
                    let Some(s) = ko.symbols().find(|s| s.name() == Ok(sym)) else {
                        failures.push(format!("{}: {sym} not in {m}'s file", k.name));
                        continue;
                    };
                    let sec = s
                        .section_index()
                        .and_then(|i| ko.section_by_index(i).ok())
                        .and_then(|s| object::ObjectSection::name(&s).ok().map(str::to_string))
                        .unwrap();
                    let args = ["--section", &sec, "-e", ko_path.to_str().unwrap()];
                    module_lines_seen += usize::from(!ours.is_empty());
                    (
                        vec![addr2line_record("addr2line", &args, s.address() + off)],
                        format!("{sym}+{off:#x} [{m}]"),
                    )
                }
            };
            judged += 1;
            if !records.iter().any(|r| frames_agree(r, &ours)) {
                failures.push(format!(
                    "{}: {what}: addr2line {records:?}, klpsym {ours:?}",
                    k.name
                ));
            }
        }
        if kernel_lines_seen == 0 || module_lines_seen == 0 {
            failures.push(format!(
                "{}: klpsym printed no line for {} (vmlinux {kernel_lines_seen}, module {module_lines_seen})",
                k.name,
                if kernel_lines_seen == 0 { "vmlinux" } else { "the module" }
            ));
        }
    }
    if !failures.is_empty() {
        panic!("{} differ:\n{}", failures.len(), failures.join("\n"));
    }
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "addr file:line",
            "no lab kernel with a -dbg vmlinux ran the livepatch oracle",
        );
    } else {
        eprintln!("{judged} answers' file:line as addr2line says");
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

/// Every `.ko` under `dir`, sorted.
fn debug_modules(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "ko") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A colleague's oops with module frames (`name+0x4/0xSIZE [mod]`), decoded from the
/// kernel's packages alone — the image and its -dbg package, no module placement, no
/// kallsyms — as decode_stacktrace.sh decodes them from the module's debug file: each frame's
/// file:line and inline chain held to binutils' addr2line on the module's debug file (the
/// lab's copy of the -dbg package's), and exit 0 (the frames are decoded).
#[test]
fn an_oops_s_module_frames_decode_from_the_packages_alone() {
    let mut failures = Vec::new();
    let mut judged = 0;
    let kernels: Vec<_> = klpsym_testkit::lab::lab_kernels()
        .into_iter()
        .filter(|k| k.get("IMAGE_DEB").is_some() && k.get("DBG_DEB").is_some())
        .filter(|k| k.get("DEBUG_MODULES_DIR").is_some())
        .collect();
    for k in &kernels {
        let mut frames: Vec<(String, String, u64, std::path::PathBuf)> = Vec::new();
        for path in debug_modules(&k.path("DEBUG_MODULES_DIR")).iter().take(3) {
            let module = path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".ko")
                .replace('-', "_");
            let bytes = std::fs::read(path).unwrap();
            let ko = object::File::parse(&*bytes).unwrap();
            use object::{Object, ObjectSection, ObjectSymbol};
            let funcs = ko
                .symbols()
                .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 8)
                // Functions only: the padding before each function on 6.12+ (`__pfx_`,
                // `__cfi_`) is no frame a trace holds, and DWARF has no function there.
                .filter(|s| {
                    s.name()
                        .is_ok_and(|n| !n.starts_with("__pfx_") && !n.starts_with("__cfi_"))
                })
                .filter_map(|s| {
                    let sec = ko.section_by_index(s.section_index()?).ok()?;
                    let name = sec.name().ok()?;
                    let sym = s.name().ok()?.to_string();
                    (name == ".text").then_some((sym, s.address(), s.size()))
                })
                .take(4);
            for (name, addr, size) in funcs {
                frames.push((
                    format!(" {name}+0x4/{size:#x} [{module}]"),
                    name,
                    addr + 4,
                    path.clone(),
                ));
            }
        }
        if frames.len() < 3 {
            failures.push(format!(
                "{}: {} module frames to judge, expected at least 3",
                k.name,
                frames.len()
            ));
            continue;
        }
        let oops = format!(
            "Call Trace:\n <TASK>\n{}\n </TASK>\n",
            frames
                .iter()
                .map(|f| f.0.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        use std::io::Write;
        let mut c = Command::new(env!("CARGO_BIN_EXE_klpsym"))
            .args(["addr", "--json", "-k"])
            .arg(k.path("IMAGE_DEB"))
            .arg("-k")
            .arg(k.path("DBG_DEB"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(oops.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.code() != Some(0) {
            failures.push(format!("{}: exit {:?}: {err}", k.name, out.status.code()));
        }
        let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{}: {e}: {err}", k.name));
                continue;
            }
        };
        let answers = v["results"][0]["addresses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if answers.len() != frames.len() {
            failures.push(format!(
                "{}: {} answers for {} frames",
                k.name,
                answers.len(),
                frames.len()
            ));
            continue;
        }
        for ((line, _, at, path), a) in frames.iter().zip(&answers) {
            judged += 1;
            if a["reason"] != "module_not_placed" {
                failures.push(format!("{}: {line}: {a}", k.name));
                continue;
            }
            let ours = a["source"].as_array().cloned().unwrap_or_default();
            let theirs = addr2line_record(
                "addr2line",
                &["--section", ".text", "-e", path.to_str().unwrap()],
                *at,
            );
            if ours.is_empty() || !frames_agree(&theirs, &ours) {
                failures.push(format!(
                    "{}: {line}: addr2line {theirs:?}, klpsym {ours:?}",
                    k.name
                ));
            }
        }
    }
    if !failures.is_empty() {
        panic!("{} differ:\n{}", failures.len(), failures.join("\n"));
    }
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "module frames from packages alone",
            "no lab kernel with its image and -dbg packages",
        );
    } else {
        eprintln!(
            "{judged} module frames decoded from the packages alone as addr2line decodes them"
        );
    }
}
