//! `klpsym addr`'s file:line against binutils' addr2line: kernel and module addresses, and
//! an oops's module frames decoded from the packages alone.

use std::path::Path;
use std::process::Command;

use crate::common::livepatch_kernels;
use crate::kernel_lines;

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
