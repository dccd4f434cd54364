//! Real-kernel check: the module lines of a captured /proc/kallsyms (Debian
//! kernel booted in QEMU after loading real modules) must equal what
//! `module_kallsyms` computes from the same `.ko` files; each symbol's address must be its
//! section's address as the loader's sysfs shows it plus its value, and `place_module` must
//! derive the section bases sysfs shows.
//!
//! Inputs (skipped when unset):
//! - `KLPSYM_TEST_KALLSYMS_MODS`: the captured /proc/kallsyms.
//! - `KLPSYM_TEST_MODULES_LOADED`: lines `<kernel name>\t<path relative to
//!   lib/modules/<release>/>`.
//! - `KLPSYM_TEST_MODULES_DIR` (optional): the `lib/modules/<release>` folder;
//!   default: the single `../root/lib/modules/*` beside the capture folder.
//! - `proc-modules.txt` beside `KLPSYM_TEST_MODULES_LOADED` (optional): the
//!   captured /proc/modules; on kernels before 6.4 its base addresses must give,
//!   through `layout_core_sections`, the same addresses as the kernel shows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use klpsym_elf::{layout_core_sections, module_kallsyms, place_module, KernelVersion};

type Line = (u64, u8, String);

fn parse_kallsyms(text: &str) -> HashMap<String, Vec<Line>> {
    let mut out: HashMap<String, Vec<Line>> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let Some((head, module)) = line.split_once('\t') else {
            continue;
        };
        let module = module
            .strip_prefix('[')
            .and_then(|m| m.strip_suffix(']'))
            .unwrap_or_else(|| panic!("line {}: bad module field {module:?}", n + 1));
        let mut it = head.splitn(3, ' ');
        let addr = u64::from_str_radix(it.next().unwrap(), 16)
            .unwrap_or_else(|e| panic!("line {}: bad address: {e}", n + 1));
        let kind = it.next().unwrap().as_bytes()[0];
        let name = it.next().unwrap_or("").to_owned();
        out.entry(module.to_owned())
            .or_default()
            .push((addr, kind, name));
    }
    out
}

fn modules_dir(loaded: &Path) -> PathBuf {
    if let Ok(d) = std::env::var("KLPSYM_TEST_MODULES_DIR") {
        return PathBuf::from(d);
    }
    let base = loaded
        .parent()
        .and_then(Path::parent)
        .expect("modules-loaded.txt has a grandparent")
        .join("root/lib/modules");
    let mut dirs: Vec<_> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{}: {e}", base.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "expected one release under {}",
        base.display()
    );
    dirs.pop().unwrap()
}

/// `name size refs deps state address` lines of /proc/modules.
fn proc_module_bases(loaded: &Path) -> HashMap<String, u64> {
    let Ok(text) = std::fs::read_to_string(loaded.with_file_name("proc-modules.txt")) else {
        return HashMap::new();
    };
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let addr = f.last()?.strip_prefix("0x")?;
            Some((f.first()?.to_string(), u64::from_str_radix(addr, 16).ok()?))
        })
        .collect()
}

#[test]
fn captured_module_kallsyms_match() {
    let (Ok(kallsyms), Ok(loaded)) = (
        std::env::var("KLPSYM_TEST_KALLSYMS_MODS"),
        std::env::var("KLPSYM_TEST_MODULES_LOADED"),
    ) else {
        klpsym_testkit::lab::skip(
            "modules against a real kernel's capture",
            "KLPSYM_TEST_KALLSYMS_MODS and KLPSYM_TEST_MODULES_LOADED are not set (run scripts/test.sh)",
        );
        return;
    };
    let text = std::fs::read_to_string(&kallsyms).expect("read kallsyms capture");
    let by_module = parse_kallsyms(&text);
    let loaded = PathBuf::from(loaded);
    let dir = modules_dir(&loaded);
    let list = std::fs::read_to_string(&loaded).expect("read modules-loaded");

    let proc_bases = proc_module_bases(&loaded);
    let mut laid_out = 0usize;
    let mut failures = Vec::new();
    let mut checked = 0usize;
    let mut symbols = 0usize;
    for row in list.lines().filter(|l| !l.trim().is_empty()) {
        let (kname, rel) = row.split_once('\t').expect("name<TAB>path");
        let path = dir.join(rel);
        let ko = klpsym_testkit::lab::module_bytes(&path);
        let mods = module_kallsyms(&ko).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if mods.name != kname {
            failures.push(format!("{kname}: .ko says its name is {}", mods.name));
        }
        let kernel = by_module.get(kname).map(Vec::as_slice).unwrap_or(&[]);
        let ours: Vec<(u8, &str)> = mods.entries.iter().map(|e| (e.kind, e.name)).collect();
        let theirs: Vec<(u8, &str)> = kernel.iter().map(|l| (l.1, l.2.as_str())).collect();
        if ours != theirs {
            let n = ours.len().max(theirs.len());
            for i in 0..n {
                let (o, t) = (ours.get(i), theirs.get(i));
                if o != t {
                    failures.push(format!(
                        "{kname}: entry {i}: kernel {:?}, ours {:?}",
                        t.map(|(k, n)| format!("{} {n}", *k as char)),
                        o.map(|(k, n)| format!("{} {n}", *k as char))
                    ));
                }
            }
            continue;
        }
        if let Some(&base) = proc_bases.get(kname) {
            let layout_applies = mods
                .vermagic
                .as_deref()
                .and_then(KernelVersion::parse)
                .is_some_and(|v| (v.major, v.minor) < (6, 4));
            if layout_applies {
                let bases = layout_core_sections(&mods, base, 4096);
                for (e, l) in mods.entries.iter().zip(kernel) {
                    let Some(b) = e.section_index.and_then(|i| bases.get(&i)) else {
                        continue; // percpu or absolute: not in the core allocation
                    };
                    laid_out += 1;
                    if b + e.addr != l.0 {
                        failures.push(format!(
                            "{kname}: layout puts {} at {:#x}, kernel shows {:#x}",
                            e.name,
                            b + e.addr,
                            l.0
                        ));
                    }
                }
            }
        }
        // (Placement from these lines is judged against the loader's sysfs, below: compared
        // with the lines it was made from it could only agree.)
        checked += 1;
        symbols += ours.len();
    }
    eprintln!(
        "checked {checked} modules, {symbols} symbols ({laid_out} also placed from the \
         /proc/modules base by layout_core_sections), {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    assert!(
        checked >= 5 && symbols >= 100,
        "judged only {checked} modules and {symbols} symbols of the capture (at least 5 and 100)"
    );
}

/// Every `.ko` under `KLPSYM_TEST_MODULES_DIR` parses, names itself like its
/// file (dashes become underscores), and yields well-formed entries.
#[test]
fn every_module_in_a_tree_parses() {
    let Ok(dir) = std::env::var("KLPSYM_TEST_MODULES_DIR") else {
        klpsym_testkit::lab::skip(
            "every module of a real tree",
            "KLPSYM_TEST_MODULES_DIR is not set (run scripts/test.sh)",
        );
        return;
    };
    let mut stack = vec![PathBuf::from(dir)];
    let (mut files, mut symbols) = (0usize, 0usize);
    let mut failures = Vec::new();
    let start = std::time::Instant::now();
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if !klpsym_testkit::lab::is_module_file(&path) {
                continue;
            }
            files += 1;
            let bytes = klpsym_testkit::lab::module_bytes(&path);
            let file = path.file_name().unwrap().to_string_lossy();
            let stem = file[..file.find(".ko").unwrap()].replace('-', "_");
            match module_kallsyms(&bytes) {
                Ok(m) => {
                    symbols += m.entries.len();
                    if m.name != stem {
                        failures.push(format!("{}: name {}", path.display(), m.name));
                    }
                    if m.entries.iter().any(|e| e.name.is_empty()) {
                        failures.push(format!("{}: empty name", path.display()));
                    }
                }
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
    }
    eprintln!(
        "parsed {files} modules, {symbols} kallsyms entries in {:?}, {} failures",
        start.elapsed(),
        failures.len()
    );
    // A Debian kernel ships thousands (6.1: about 4,000): a tree that yields a handful was
    // not read whole.
    assert!(
        files >= 1000,
        "only {files} module files (.ko, .ko.xz, .ko.zst, .ko.gz) found (at least 1,000)"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `module-sections.txt` of a capture: module -> section name -> the address the loader put
/// it at (/sys/module/<module>/sections, read as root in the guest).
fn sysfs_sections(path: &Path) -> HashMap<String, HashMap<String, u64>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [module, section, addr] = f[..] else {
            panic!(
                "{}:{}: not MODULE SECTION ADDR: {line:?}",
                path.display(),
                n + 1
            );
        };
        let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
        out.entry(module.to_string())
            .or_default()
            .insert(section.to_string(), addr);
    }
    out
}

/// Module symbols and placement held to the loader itself, on every kernel of the lab matrix
/// with a capture: the kernel's sysfs says where it put each section of each loaded module
/// (independent of /proc/kallsyms), so (1) every symbol of a placed section lies at that
/// section's address plus the symbol's value as klpsym reads the `.ko` (the kernel's line
/// for it must show exactly that), and (2) the section bases klpsym's placement derives from
/// the kernel's /proc/kallsyms lines are the ones sysfs shows. At least five modules and a
/// hundred symbols a kernel, or the capture judged too little.
#[test]
fn module_symbols_and_placement_agree_with_the_loaders_sysfs_sections() {
    let kernels: Vec<_> = klpsym_testkit::lab::lab_kernels()
        .into_iter()
        .filter(|k| k.get("CAPTURE_DIR").is_some())
        .collect();
    if kernels.is_empty() {
        klpsym_testkit::lab::skip(
            "module placement against the loader's sysfs",
            "no lab kernel with a capture (run scripts/test.sh)",
        );
        return;
    }
    let mut failures = Vec::new();
    for k in &kernels {
        let capture = k.path("CAPTURE_DIR");
        let sysfs = sysfs_sections(&capture.join("module-sections.txt"));
        let text = std::fs::read_to_string(k.path("KALLSYMS_MODS")).expect("kallsyms capture");
        let by_module = parse_kallsyms(&text);
        let loaded = std::fs::read_to_string(k.path("MODULES_LOADED")).expect("modules-loaded");
        let dir = k.path("MODULES_DIR");
        let (mut modules, mut symbols, mut bases) = (0usize, 0usize, 0usize);
        for row in loaded.lines().filter(|l| !l.trim().is_empty()) {
            let (kname, rel) = row.split_once('\t').expect("name<TAB>path");
            let what = format!("{}: {kname}", k.name);
            let ko = klpsym_testkit::lab::module_bytes(&dir.join(rel));
            let mods = module_kallsyms(&ko).unwrap_or_else(|e| panic!("{what}: {e}"));
            let Some(placed) = sysfs.get(kname) else {
                failures.push(format!("{what}: no sections in sysfs"));
                continue;
            };
            let kernel = by_module.get(kname).map(Vec::as_slice).unwrap_or(&[]);
            if kernel.len() != mods.entries.len() {
                failures.push(format!(
                    "{what}: the kernel lists {} symbols, klpsym {}",
                    kernel.len(),
                    mods.entries.len()
                ));
                continue;
            }
            let name_of: HashMap<u32, &str> = mods
                .sections
                .iter()
                .map(|s| (s.index, s.name.as_str()))
                .collect();
            // (1) Each symbol at its section's sysfs address plus its value.
            for (e, l) in mods.entries.iter().zip(kernel) {
                let Some(at) = e
                    .section_index
                    .and_then(|i| name_of.get(&i))
                    .and_then(|n| placed.get(*n))
                else {
                    continue; // absolute or per-cpu: no section address in sysfs
                };
                symbols += 1;
                if at.wrapping_add(e.addr) != l.0 {
                    failures.push(format!(
                        "{what}: {} at {:#x} by sysfs + value {:#x}, the kernel lists {:#x}",
                        e.name,
                        at.wrapping_add(e.addr),
                        e.addr,
                        l.0
                    ));
                }
            }
            // (2) The bases placement derives from the kernel's lines.
            let lines: Vec<(u64, u8, &str)> =
                kernel.iter().map(|l| (l.0, l.1, l.2.as_str())).collect();
            match place_module(&mods, &lines) {
                Err(e) => failures.push(format!("{what}: placement: {e}")),
                Ok(addrs) => {
                    for (idx, base) in klpsym_elf::section_bases(&mods, &addrs) {
                        let name = name_of.get(&idx).copied().unwrap_or("?");
                        // sysfs lists a section only when it is allocated and not empty
                        // (sect_empty(), kernel/module/sysfs.c): an empty .bss has no file.
                        if mods.sections.iter().any(|s| s.index == idx && s.size == 0) {
                            continue;
                        }
                        match placed.get(name) {
                            Some(&want) if want == base => bases += 1,
                            Some(&want) => failures.push(format!(
                                "{what}: placement puts {name} at {base:#x}, sysfs {want:#x}"
                            )),
                            None => failures.push(format!(
                                "{what}: placement puts {name} at {base:#x}; sysfs has no such section"
                            )),
                        }
                    }
                }
            }
            modules += 1;
        }
        eprintln!(
            "{}: {modules} modules, {symbols} symbols at sysfs section addresses, {bases} placed section bases as sysfs shows",
            k.name
        );
        if modules < 5 || symbols < 100 || bases < modules {
            failures.push(format!(
                "{}: judged only {modules} modules, {symbols} symbols, {bases} section bases (at least 5, 100 and one a module)",
                k.name
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
