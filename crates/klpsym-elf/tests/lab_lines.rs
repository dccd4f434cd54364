//! file:line and inline chains held to the two addr2lines scripts/faddr2line and
//! scripts/decode_stacktrace.sh run (`addr2line -f -i -p`; `llvm-addr2line` with LLVM=1) on
//! every amd64 lab kernel: a spread of addresses in its `-dbg` vmlinux, and every function of a
//! few modules' debug files (`/usr/lib/debug/lib/modules/…`, a relocatable object each).
//!
//! The vmlinux spread is held to both tools: klpsym must say what one of them says, and each
//! difference must be the other tool's known habit, checked as such: binutils 2.40 names the
//! unit's primary file instead of the row's for some rows of a DWARF 5 line table
//! (`__traceiter_xen_mmu_pgd_pin at arch/x86/xen/trace.c:336`, a file of 30 lines;
//! llvm-addr2line, readelf's decoded lines and klpsym say include/trace/events/xen.h:336:
//! the same functions and lines, another file), and llvm-addr2line names an outer frame by
//! the symbol table or says `??` where DWARF names the function (the same files and lines,
//! another name); binutils writes line 0 as `?`, and where no row covers an address (llvm
//! and klpsym give no line) answers from a neighbouring row. Each habit is counted and
//! bounded. Module debug files are asked per section with
//! `--section`, as faddr2line asks, which only binutils takes: held to binutils, with its one
//! cosmetic habit set aside (it repeats the innermost row's discriminator on every
//! `(inlined by)` line).
//!
//! Compared: every line printed (`func at file:line`, `(inlined by) …`) where a file is
//! known; where none is (`??:0`, `name at ??:?`), klpsym must give no line. Paths are compared
//! with the source tree prefix stripped (as faddr2line strips it).

use std::io::Write;
use std::process::{Command, Stdio};

use klpsym_elf::{DebugLines, SourceFrame};
use klpsym_testkit::lab;
use object::{Object, ObjectSection, ObjectSymbol};

/// binutils' addr2line's records for `addrs`.
fn binutils(args: &[&str], addrs: &[u64]) -> Vec<Vec<String>> {
    addr2line("addr2line", args, addrs)
}

/// `tool`'s records for `addrs` (`addr2line` or `llvm-addr2line`, the same flags): one per
/// address, its lines (`(inlined by) ` kept).
fn addr2line(tool: &str, args: &[&str], addrs: &[u64]) -> Vec<Vec<String>> {
    let mut child = Command::new(tool)
        .args(["-a", "-f", "-i", "-p"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool} runs (apt-get install binutils llvm): {e}"));
    let mut input = String::new();
    for a in addrs {
        input.push_str(&format!("{a:#x}\n"));
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("addr2line output");
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{tool} {args:?} failed");
    let mut records: Vec<Vec<String>> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix(" (inlined by) ") {
            records
                .last_mut()
                .expect("an inlined line follows a record")
                .push(format!("(inlined by) {rest}"));
        } else if let Some((_, rest)) = line.split_once(": ") {
            records.push(vec![rest.to_string()]);
        }
    }
    assert_eq!(records.len(), addrs.len(), "one record per address");
    records
}

/// klpsym's lines as addr2line prints them.
fn ours(frames: &[SourceFrame]) -> Vec<String> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == 0 {
                f.to_string()
            } else {
                format!("(inlined by) {f}")
            }
        })
        .collect()
}

/// addr2line's line with the source tree prefix stripped from its path: the directory above
/// `init/main.c`, or its absolute form where a unit kept it (Debian's assembler units:
/// `/build/reproducible-path/linux-6.1.192/arch/x86/entry/entry_64.S`).
fn strip_root(line: &str, roots: &[String]) -> String {
    roots
        .iter()
        .filter(|r| !r.is_empty())
        .find(|r| line.contains(&format!(" at {r}")))
        .map_or_else(
            || line.to_string(),
            |r| line.replacen(&format!(" at {r}"), " at ", 1),
        )
}

/// `line` without binutils' repeated discriminator on an `(inlined by)` line.
fn without_inlined_discriminator(line: &str) -> String {
    match (
        line.starts_with("(inlined by) "),
        line.find(" (discriminator "),
    ) {
        (true, Some(i)) => line[..i].to_string(),
        _ => line.to_string(),
    }
}

/// Whether klpsym's lines say what a tool's record says (root stripped): the same lines, or
/// no line where the tool knows no line (`??:0`, `name at ??:?`, or binutils' `name at
/// file.o:?` from the symbol table's FILE symbol; nothing after).
fn same(theirs: &[String], ours_: &[String]) -> bool {
    // No line: `??:0`, `name at ??:?`, binutils' `name at file.o:?` from the symbol table's
    // FILE symbol, or llvm-addr2line's `name at file.c:0` (line 0: no row).
    let no_file = theirs[0] == "?? ??:0"
        || theirs[0].contains(" at ??:")
        || theirs[0].ends_with(":?")
        || theirs[0].ends_with(":0");
    if theirs.len() == 1 && no_file {
        return ours_.iter().all(|l| l.contains(" at ??:"));
    }
    theirs == ours_
}

/// A probe in the NOP padding 6.2+ puts before each function (`__pfx_NAME`, for call
/// thunks) to which klpsym gives no line: no line table row is for those bytes (the unit's
/// sequence starts at the function), and the two addr2lines answer from whichever row they
/// meet (binutils the next function's or another unit's line, llvm-addr2line another unit's
/// file at line 0), so neither is an oracle there.
fn padding(symbol: &str, ours_: &[String]) -> bool {
    symbol.starts_with("__pfx_") && ours_.is_empty()
}

/// The (file, line) of each line of a record, the function names set aside: what the
/// tools' known naming habits do not change.
fn places(record: &[String]) -> Vec<String> {
    record
        .iter()
        .map(|l| {
            let l = l.strip_prefix("(inlined by) ").unwrap_or(l);
            l.split_once(" at ").map_or(l, |x| x.1).to_string()
        })
        .collect()
}

/// The functions and line numbers of each line of a record, the files set aside, and line 0
/// written as binutils writes it (`?`).
fn functions_and_lines(record: &[String]) -> Vec<String> {
    record
        .iter()
        .map(|l| {
            let l = l.strip_prefix("(inlined by) ").unwrap_or(l);
            match l.split_once(" at ") {
                Some((f, place)) => {
                    let line = place.rsplit_once(':').map_or("", |x| x.1);
                    let line = if line == "0" { "?" } else { line };
                    format!("{f} :{line}")
                }
                None => l.to_string(),
            }
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    /// Probes in a function's padding (`__pfx_`) given no line (below).
    padding: usize,
    compared: usize,
    lines: usize,
    binutils: usize,
    llvm: usize,
    /// Where llvm-addr2line differs from klpsym only in a function's name (it names an outer
    /// frame by the symbol table, `parse_probe_arg.isra.0`, or says `??` where DWARF names
    /// the function): every file and line the same.
    llvm_names: usize,
    /// Where binutils differs from klpsym and llvm-addr2line only in a file (binutils 2.40
    /// names a DWARF 5 unit's primary file for some rows) or in writing line 0 as `?`: every
    /// function and line the same.
    binutils_files: usize,
    /// Where binutils names a line and llvm-addr2line and klpsym find no row for the address
    /// (binutils answers from a neighbouring row, as both tools do in a function's padding).
    binutils_neighbour: usize,
    diffs: Vec<String>,
}

impl Tally {
    /// One vmlinux address, where both tools can be asked: klpsym must say what binutils
    /// says or what llvm-addr2line says, and each difference must be one of the two tools'
    /// known habits, checked as such (a difference of another kind fails, whatever the
    /// other tool says).
    fn judge_both(&mut self, what: &str, gnu: &[String], llvm: &[String], ours_: &[String]) {
        self.compared += 1;
        self.lines += ours_.len();
        let g = same(gnu, ours_);
        let l = same(llvm, ours_);
        self.binutils += usize::from(g);
        self.llvm += usize::from(l);
        let llvm_habit = !l && g && places(llvm) == places(ours_);
        let gnu_habit = !g && l && functions_and_lines(gnu) == functions_and_lines(ours_);
        let gnu_neighbour = !g && l && !gnu_habit && ours_.is_empty();
        self.llvm_names += usize::from(llvm_habit);
        self.binutils_files += usize::from(gnu_habit);
        self.binutils_neighbour += usize::from(gnu_neighbour);
        if (!g || !l) && !llvm_habit && !gnu_habit && !gnu_neighbour {
            self.diffs.push(format!(
                "{what}: addr2line {gnu:?}, llvm-addr2line {llvm:?}, klpsym {ours_:?}"
            ));
        }
    }

    /// One module address (only binutils takes `--section`): klpsym must say what it says.
    fn judge_binutils(&mut self, what: &str, gnu: &[String], ours_: &[String]) {
        self.compared += 1;
        self.lines += ours_.len();
        if same(gnu, ours_) {
            self.binutils += 1;
        } else {
            self.diffs
                .push(format!("{what}: addr2line {gnu:?}, klpsym {ours_:?}"));
        }
    }
}

#[test]
fn file_line_and_inline_chains_agree_with_addr2line() {
    let kernels: Vec<_> = lab::lab_kernels()
        .into_iter()
        .filter(|k| k.get("VMLINUX_DBG").is_some_and(|v| !v.is_empty()))
        .collect();
    if kernels.is_empty() {
        lab::skip(
            "file:line against binutils' addr2line",
            "no lab kernel with a -dbg vmlinux (run scripts/test.sh)",
        );
        return;
    }
    let mut failures = Vec::new();
    for k in &kernels {
        let path = k.path("VMLINUX_DBG");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let elf = klpsym_elf::vmlinux_kallsyms(&bytes, None).expect("vmlinux parses");
        // Each text address with its first symbol (the name an addr2line gives an assembly
        // function, where DWARF names none).
        let mut named: Vec<(u64, String)> = elf
            .entries
            .iter()
            .filter(|e| matches!(e.kind, b't' | b'T'))
            .map(|e| (e.addr, e.name.to_string()))
            .collect();
        named.sort_by_key(|e| e.0);
        named.dedup_by_key(|e| e.0);
        let text: Vec<u64> = named.iter().map(|e| e.0).collect();
        drop(elf);
        let shared: klpsym_elf::Shared = std::sync::Arc::new(bytes);
        let lines = DebugLines::vmlinux(shared).expect("the -dbg vmlinux has DWARF");
        let roots = lines.roots().to_vec();
        assert!(!roots.is_empty(), "{}: no init/main.c unit", k.name);
        // An assembler's unit is relative to the tree too (#48: Debian's keep the absolute
        // build path, `/build/reproducible-path/linux-6.1.192/arch/x86/entry/entry_64.S`).
        for asm in ["entry_SYSCALL_64", "vectors"] {
            let Some(&(a, _)) = named.iter().find(|e| e.1 == asm) else {
                continue;
            };
            let frames = lines.frames(a);
            match frames.first().and_then(|f| f.file.as_deref()) {
                Some(f) if !f.starts_with('/') && f.contains("entry") => {}
                other => panic!(
                    "{}: {asm} at {other:?}: not a path relative to the source tree",
                    k.name
                ),
            }
        }
        // A spread: every 97th function, at its start and a third and two thirds in.
        let mut probes = Vec::new();
        for (i, w) in text.windows(2).enumerate().step_by(97) {
            let gap = w[1] - w[0];
            probes.push((w[0], i));
            if gap >= 3 {
                probes.push((w[0] + gap / 3, i));
                probes.push((w[0] + 2 * gap / 3, i));
            }
        }
        let addrs: Vec<u64> = probes.iter().map(|p| p.0).collect();
        let e = ["-e", path.to_str().unwrap()];
        let llvm = addr2line("llvm-addr2line", &e, &addrs);
        let gnu = binutils(&e, &addrs);
        let norm = |r: &Vec<String>| -> Vec<String> {
            r.iter()
                .map(|x| without_inlined_discriminator(&strip_root(x, &roots)))
                .collect()
        };
        let mut t = Tally::default();
        for ((a, i), (l, g)) in probes.iter().zip(llvm.iter().zip(&gnu)) {
            let mine = ours(&lines.frames_named(*a, Some(&named[*i].1)));
            if padding(&named[*i].1, &mine) {
                t.padding += 1;
                continue;
            }
            t.judge_both(&format!("{} {a:#x}", k.name), &norm(g), &norm(l), &mine);
        }
        let vmlinux = t;
        // Modules: every function of every executable section, at its start and middle.
        let mut m = Tally::default();
        let mut modules = 0;
        let dir = k.path("DEBUG_MODULES_DIR");
        for entry in walk(&dir) {
            let data = std::fs::read(&entry).unwrap();
            let mut lines = DebugLines::module(&data)
                .unwrap_or_else(|| panic!("{}: no DWARF", entry.display()));
            lines.set_roots(&roots);
            modules += 1;
            let obj = object::File::parse(&*data).unwrap();
            for sec in obj.sections() {
                if sec.kind() != object::SectionKind::Text || sec.size() == 0 {
                    continue;
                }
                let name = sec.name().unwrap();
                let mut offs: Vec<(u64, String)> = obj
                    .symbols()
                    .filter(|s| {
                        s.kind() == object::SymbolKind::Text
                            && s.section_index() == Some(sec.index())
                    })
                    .flat_map(|s| {
                        let name = s.name().unwrap_or("").to_string();
                        [
                            (s.address(), name.clone()),
                            (s.address() + s.size() / 2, name),
                        ]
                    })
                    .collect();
                offs.sort_by_key(|o| o.0);
                offs.dedup_by_key(|o| o.0);
                if offs.is_empty() {
                    continue;
                }
                let at: Vec<u64> = offs.iter().map(|o| o.0).collect();
                let theirs = binutils(&["--section", name, "-e", entry.to_str().unwrap()], &at);
                for ((off, sym), th) in offs.iter().zip(&theirs) {
                    let at = lines.place(name, *off).expect("section placed");
                    let mine = ours(&lines.frames_named(at, Some(sym)));
                    if padding(sym, &mine) {
                        m.padding += 1;
                        continue;
                    }
                    let th: Vec<String> = th
                        .iter()
                        .map(|l| without_inlined_discriminator(&strip_root(l, &roots)))
                        .collect();
                    m.judge_binutils(
                        &format!("{} {}:{name}+{off:#x}", k.name, entry.display()),
                        &th,
                        &mine,
                    );
                }
            }
        }
        assert!(
            modules > 0,
            "{}: no module debug file in {}",
            k.name,
            dir.display()
        );
        let v = &vmlinux;
        // Enough judged, and the tools' habits a small share of it: a spread that shrank, or
        // a habit that grew to a tenth (binutils) or a quarter (llvm) of the answers, is a
        // change to look at, not to pass.
        if v.compared < 1000 || m.compared < 200 || modules < 3 {
            failures.push(format!(
                "{}: judged only {} vmlinux addresses, {} module addresses in {modules} modules (at least 1,000, 200 and 3)",
                k.name, v.compared, m.compared
            ));
        }
        if (v.binutils_files + v.binutils_neighbour) * 10 > v.compared
            || v.llvm_names * 4 > v.compared
        {
            failures.push(format!(
                "{}: of {} vmlinux addresses, {} differ from binutils by its habits ({} another file or line 0, {} a neighbouring row's line) and {} from llvm-addr2line by its naming habit: more than a tenth / a quarter",
                k.name,
                v.compared,
                v.binutils_files + v.binutils_neighbour,
                v.binutils_files,
                v.binutils_neighbour,
                v.llvm_names
            ));
        }
        eprintln!(
            "{}: vmlinux {} addresses ({} lines, {} more in padding): {} as binutils says, {} as llvm-addr2line says, {} as neither; {modules} modules {} addresses ({} lines, {} more in padding): {} as binutils says, {} not",
            k.name,
            v.compared,
            v.lines,
            v.padding,
            v.binutils,
            v.llvm,
            v.diffs.len(),
            m.compared,
            m.lines,
            m.padding,
            m.binutils,
            m.diffs.len()
        );
        if let Some(path) = std::env::var_os("KLPSYM_TEST_SUMMARY") {
            let line = format!(
                "file-line release={} vmlinux_addresses={} vmlinux_lines={} as_binutils={} as_llvm={} binutils_file_habit={} binutils_neighbour_row={} llvm_naming_habit={} padding={} modules={modules} module_addresses={} module_lines={} module_as_binutils={} differ={}\n",
                k.value("RELEASE"),
                v.compared,
                v.lines,
                v.binutils,
                v.llvm,
                v.binutils_files,
                v.binutils_neighbour,
                v.llvm_names,
                v.padding,
                m.compared,
                m.lines,
                m.binutils,
                v.diffs.len() + m.diffs.len()
            );
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()))
                .unwrap();
        }
        failures.extend(vmlinux.diffs.into_iter().take(10));
        failures.extend(m.diffs.into_iter().take(10));
    }
    assert!(
        failures.is_empty(),
        "first differences:\n{}",
        failures.join("\n")
    );
}

/// Every `.ko` under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
