//! What a lab kernel's livepatch oracle recorded: each case's `oracle.txt` (the guest's
//! loads, errors, addresses and counts), `built-for.txt`, and which cases did not apply.

use std::collections::BTreeMap;
use std::path::Path;

/// What the kernel did in one case.
#[derive(Debug, Default)]
pub struct Oracle {
    /// "accepted", "refused_at_load" or "refused_when_module_loads"
    pub verdict: String,
    /// The errno of the first failing load (`EINVAL`, `ENOEXEC`...).
    pub errno: Option<String>,
    /// The error lines of the module loader and livepatch, in order (informational lines,
    /// once-per-boot taint notices and the cases' own KLP* lines left out).
    pub errors: Vec<String>,
    /// Every `livepatch:` line of the load steps, informational ones included, in order.
    pub livepatch_log: Vec<String>,
    /// (object, name) -> address the kernel used (nonzero only).
    pub addrs: BTreeMap<(String, String), u64>,
    /// Modules the case loads.
    pub modules: Vec<String>,
    /// symbol name -> address the patched code saw through its klp relocation.
    pub relocs: BTreeMap<String, u64>,
    /// Calls of the walks' callback (kprobe on klp_find_callback) over all load steps, when
    /// the guest could count them.
    pub find_callbacks: Option<u64>,
    /// Calls of klp_match_callback (6.2+: one per vmlinux match called back), likewise.
    pub match_callbacks: Option<u64>,
    /// Calls of kallsyms_expand_symbol (every vmlinux name a walk or the binary search
    /// reads), likewise.
    pub expansions: Option<u64>,
    /// What makes the record unusable: a load without its `rc=` line, a `note=` (a
    /// transition that timed out). Each is a failure, never a verdict.
    pub broken: Vec<String>,
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

pub fn read_oracle(dir: &Path) -> Oracle {
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

/// The `built-for.txt` of a case the oracle loaded from another build's oracle (`built_for=`
/// in case.conf): `suite`, `release`, `lab_dir`, `load_flags`.
pub fn built_for(cdir: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(cdir.join("built-for.txt")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// How many cases the oracle of `dir` found not applicable to its kernel (`requires=`).
pub fn not_applicable(dir: &Path) -> usize {
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
