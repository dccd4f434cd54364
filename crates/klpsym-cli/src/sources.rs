//! Loading the kernels a verb was pointed at, with the warnings a user needs.

use std::path::PathBuf;
use std::sync::Arc;

use klpsym_core::resched::{Resched, ReschedPolicy};
use klpsym_loader::{
    compose, load, LoadOptions, LoadedKernel, LoadedSpec, ModuleTree, Placement, DEFAULT_SOURCE,
};

use crate::cli::{SourceArgs, YesNo};
use crate::output::CliError;

/// Loader options from the command line.
pub fn load_options(args: &SourceArgs) -> LoadOptions {
    LoadOptions {
        max_input_size: args.max_input_size,
        max_decompressed_size: args.max_decompressed_size,
        kallsyms_all: args.kallsyms_all.map(|v| v == YesNo::Y),
        package_modules: false,
        cache: cache_of(args),
        export_facts: true,
    }
}

/// The cache the command line asks for: none with --no-cache, else --cache-dir or the default.
pub fn cache_of(args: &SourceArgs) -> Option<klpsym_loader::Cache> {
    if args.no_cache {
        return None;
    }
    args.cache_dir
        .clone()
        .or_else(klpsym_loader::Cache::default_dir)
        .map(|dir| klpsym_loader::Cache { dir })
}

/// The reschedule-point driver the command line asks for.
pub fn resched(args: &SourceArgs) -> Resched {
    let policy = if args.yield_cpu {
        ReschedPolicy::Yield
    } else {
        ReschedPolicy::Nothing
    };
    Resched::new(policy).with_interval(std::time::Duration::from_micros(args.resched_us))
}

/// The module tree: `--modules`, or for the running kernel `/lib/modules/$(uname -r)` when it
/// exists.
pub fn modules_dir(args: &SourceArgs) -> Option<PathBuf> {
    if let Some(d) = &args.modules {
        return Some(d.clone());
    }
    if !args.kernels.is_empty() {
        return None;
    }
    let r = klpsym_loader::live_release()?;
    let d = PathBuf::from(format!("/lib/modules/{r}"));
    d.is_dir().then_some(d)
}

/// The module tree of `dir`, scanned once per process: loading the kernels and a verb's own
/// steps (the target's offline modules) share one scan of thousands of files.
pub fn open_module_tree(
    dir: &std::path::Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Arc<ModuleTree>, klpsym_loader::LoadError> {
    // Shared, not copied: a tree is thousands of paths.
    type Scanned = (PathBuf, u64, u64, Arc<ModuleTree>);
    static SCANNED: std::sync::Mutex<Vec<Scanned>> = std::sync::Mutex::new(Vec::new());
    let key = (opts.max_input_size, opts.max_decompressed_size);
    let scanned = |s: &[Scanned]| {
        s.iter()
            .find(|(d, a, b, _)| d == dir && (*a, *b) == key)
            .map(|(.., t)| t.clone())
    };
    if let Some(t) = scanned(&SCANNED.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(t);
    }
    let t = Arc::new(ModuleTree::open(dir, opts, rs)?);
    SCANNED.lock().unwrap_or_else(|p| p.into_inner()).push((
        dir.to_path_buf(),
        key.0,
        key.1,
        Arc::clone(&t),
    ));
    Ok(t)
}

/// The sources named with --kernel (or the running kernel's /proc/kallsyms), each composed with
/// the loaded modules of --modules.
pub fn load_all(args: &SourceArgs) -> Result<Vec<LoadedKernel>, CliError> {
    load_all_mode(args, false, Queries::Many)
}

/// [`load_all`] for a verb that asks each table a few questions (`lookup` of one name,
/// `dump`): no index is built; the queries walk the table (see
/// `SymbolTable::scan_until_indexed`), and the verb builds the indexes itself, with its
/// reschedule points, before asking more.
pub fn load_all_few(args: &SourceArgs) -> Result<Vec<LoadedKernel>, CliError> {
    load_all_mode(args, false, Queries::Few)
}

/// How many questions a verb asks of each table it loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queries {
    /// Many: the indexes are built while loading.
    Many,
    /// A few: no index is built; queries walk the table.
    Few,
    /// Names only (checking or converting a patch): the name index is built while loading,
    /// never the address index, which no such verb asks (a query that did would build it).
    Names,
}

/// [`load_all`] for the verbs that check a patch against what the module loader sees: packages'
/// modules and Module.symvers are read too when `package_modules`, and only the name index is
/// built (a patch asks names, never addresses).
pub fn load_all_with(
    args: &SourceArgs,
    package_modules: bool,
) -> Result<Vec<LoadedKernel>, CliError> {
    load_all_mode(args, package_modules, Queries::Names)
}

fn load_all_mode(
    args: &SourceArgs,
    package_modules: bool,
    queries: Queries,
) -> Result<Vec<LoadedKernel>, CliError> {
    let opts = LoadOptions {
        package_modules,
        export_facts: queries != Queries::Few,
        ..load_options(args)
    };
    let mut rs = resched(args);
    let loaded: Vec<String> = match &args.loaded {
        Some(spec) => LoadedSpec::parse(spec)
            .names()
            .map_err(|e| format!("--loaded: {e}"))?,
        None => Vec::new(),
    };
    if args.place_from.is_some() && loaded.is_empty() {
        return Err(
            "--place-from places the modules named by --loaded, and no --loaded was given".into(),
        );
    }
    if !loaded.is_empty() && args.modules.is_none() {
        return Err(
            "--loaded names modules, but no --modules DIR says where their files are".into(),
        );
    }
    // Composing the loaded modules needs the tree first; otherwise it is only checked here
    // (and kept for the verb), so it is scanned on a helper thread while the kernels load.
    let (tree, scanning) = match &args.modules {
        Some(dir) if !loaded.is_empty() => (Some(checked_tree(dir, &opts, &mut rs)?), None),
        Some(dir) => (None, Some(scan_in_background(dir, &opts, &rs))),
        None => (None, None),
    };
    let kernels = load_kernels(args, &opts, queries, tree.as_deref(), &loaded, &mut rs);
    // A module tree that is wrong is reported first, as when it was scanned first.
    if let Some(scan) = scanning {
        scan.finish(&mut rs)?;
    }
    kernels
}

/// `--modules DIR` scanned, or the error that says why it cannot serve.
fn checked_tree(
    dir: &std::path::Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Arc<ModuleTree>, CliError> {
    let t = open_module_tree(dir, opts, rs).map_err(|e| format!("--modules: {e}"))?;
    if t.is_empty() {
        return Err(format!(
            "--modules {}: no kernel modules (.ko, .ko.xz, .ko.zst, .ko.gz) under it",
            dir.display()
        )
        .into());
    }
    Ok(t)
}

/// A module tree being scanned on a helper thread (or, when no thread can be started, not
/// yet: [`BackgroundScan::finish`] then scans it).
struct BackgroundScan {
    dir: PathBuf,
    opts: LoadOptions,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

fn scan_in_background(dir: &std::path::Path, opts: &LoadOptions, rs: &Resched) -> BackgroundScan {
    let (d, o, mut helper_rs) = (dir.to_path_buf(), opts.clone(), rs.sibling());
    let thread = std::thread::Builder::new()
        .name("klpsym-modules".into())
        .spawn(move || {
            checked_tree(&d, &o, &mut helper_rs)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .ok();
    BackgroundScan {
        dir: dir.to_path_buf(),
        opts: opts.clone(),
        thread,
    }
}

impl BackgroundScan {
    /// Waits for the scan (its tree is then in the per-process memo) and reports its error.
    fn finish(self, rs: &mut Resched) -> Result<(), CliError> {
        match self.thread.map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r.map_err(CliError::from),
            // A panicked helper or none started: scan here.
            Some(Err(_)) | None => checked_tree(&self.dir, &self.opts, rs).map(|_| ()),
        }
    }
}

/// Loads every kernel of `args` (the body of [`load_all_mode`] once the module tree is known
/// or on its way).
fn load_kernels(
    args: &SourceArgs,
    opts: &LoadOptions,
    queries: Queries,
    tree: Option<&ModuleTree>,
    loaded: &[String],
    rs: &mut Resched,
) -> Result<Vec<LoadedKernel>, CliError> {
    let paths: Vec<PathBuf> = if args.kernels.is_empty() {
        vec![PathBuf::from(DEFAULT_SOURCE)]
    } else {
        args.kernels.clone()
    };
    let placement_kernel = match &args.place_from {
        Some(p) => Some(load(p, opts, rs).map_err(|e| format!("--place-from: {e}"))?),
        None => None,
    };
    let placement = placement_kernel
        .as_ref()
        .map_or(Placement::None, |k| Placement::Kallsyms(&k.table));
    let paths = expand_dirs(paths)?;
    let debug = match &args.debug_vmlinux {
        None => None,
        Some(d) => {
            if paths.len() != 1 {
                return Err(
                    "--debug-vmlinux goes with exactly one --kernel (the same build)".into(),
                );
            }
            let dk = load(d, opts, rs).map_err(|e| format!("--debug-vmlinux: {e}"))?;
            if !dk.table.has_files() {
                return Err(format!(
                    "--debug-vmlinux {}: no source files in it (no DWARF, no FILE entries): expected a vmlinux with debug info (the -dbg package's)",
                    d.display()
                )
                .into());
            }
            Some(dk)
        }
    };
    let one = |p: &PathBuf, rs: &mut Resched| -> Result<LoadedKernel, CliError> {
        let mut k = load(p, opts, rs)?;
        if let Some(d) = &debug {
            files_from_debug(&mut k, d, rs)?;
        }
        if !loaded.is_empty() {
            k.table = compose(&k.table, tree, loaded, placement, opts, rs)?;
        }
        prepare(&mut k, queries, rs)?;
        Ok(k)
    };
    // Packages given together (or found in one directory) form one kernel per release; one
    // package alone is an ordinary source (and cached like one).
    let (packages, paths): (Vec<PathBuf>, Vec<PathBuf>) = if paths.len() == 1 {
        (Vec::new(), paths)
    } else {
        paths
            .into_iter()
            .partition(|p| klpsym_loader::is_package(p))
    };
    let mut out: Vec<LoadedKernel> = match paths.len() {
        0 => Vec::new(),
        1 => vec![one(&paths[0], rs)?],
        _ => load_parallel(&paths, args, &one)?,
    };
    if !packages.is_empty() {
        for mut k in klpsym_loader::load_packages(&packages, opts, rs)? {
            if let Some(d) = k.debug.take() {
                files_from_debug(&mut k, &d, rs)?;
                k.debug = Some(d);
            }
            if !loaded.is_empty() {
                k.table = compose(&k.table, tree, loaded, placement, opts, rs)?;
            }
            prepare(&mut k, queries, rs)?;
            out.push(k);
        }
    }
    if let (Some(d), [k]) = (debug, out.as_mut_slice()) {
        if k.debug.is_none() {
            k.debug = Some(Box::new(d));
        }
    }
    for k in &out {
        if k.table.addresses_hidden() {
            warn_hidden(k);
        }
    }
    Ok(out)
}

/// Builds the indexes now (timed), or marks the table to be walked.
fn prepare(k: &mut LoadedKernel, queries: Queries, rs: &mut Resched) -> Result<(), CliError> {
    match queries {
        Queries::Many => {
            let t0 = std::time::Instant::now();
            k.table.build_indexes(rs)?;
            k.index_time = t0.elapsed();
        }
        Queries::Names => {
            let t0 = std::time::Instant::now();
            k.table.build_name_index(rs)?;
            k.index_time = t0.elapsed();
        }
        Queries::Few => k.table.scan_until_indexed(rs.sibling()),
    }
    Ok(())
}

/// Gives `k`'s vmlinux symbols the source files of the same build's debug vmlinux `d`: the
/// n-th definition of a name in `k` gets the file of the n-th in `d` (both in kallsyms order,
/// which a -dbg vmlinux reproduces: see the lab's dump tests). Refuses different build ids.
fn files_from_debug(
    k: &mut LoadedKernel,
    d: &LoadedKernel,
    rs: &mut Resched,
) -> Result<(), CliError> {
    let (kd, dd) = (k.path.display().to_string(), d.path.display().to_string());
    match (&k.facts.build_id, &d.facts.build_id) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
                "--debug-vmlinux {dd}: build id {b}, but {kd} has {a}: not the same build"
            )
            .into())
        }
        (Some(a), Some(_)) => eprintln!("klpsym: note: source files from {dd} (build id {a}, the same as {kd}'s)"),
        _ => eprintln!(
            "klpsym: warning: {kd}: no build id to compare with {dd}: source files are matched by name and position only"
        ),
    }
    use klpsym_core::ObjectId;
    let mut by_name: std::collections::HashMap<&str, Vec<Option<&str>>> =
        std::collections::HashMap::new();
    for s in d.table.iter() {
        rs.tick()?;
        if s.object == ObjectId::VMLINUX {
            by_name.entry(s.name).or_default().push(d.table.file(s.id));
        }
    }
    // Files borrowed from `d` only, so `k`'s table can take them afterwards.
    let files: Vec<Option<&str>> = {
        let table = &k.table;
        // How often each name is in vmlinux, counted once (not a lookup per symbol).
        let mut total: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for s in table.iter() {
            rs.tick()?;
            if s.object == ObjectId::VMLINUX {
                *total.entry(s.name).or_default() += 1;
            }
        }
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut files = Vec::with_capacity(table.len());
        for s in table.iter() {
            rs.tick()?;
            if s.object != ObjectId::VMLINUX {
                files.push(None);
                continue;
            }
            let n = seen.entry(s.name).or_default();
            let defs = by_name.get(s.name);
            // Only where both list the name as often can the positions be paired.
            let same = defs.is_some_and(|v| Some(&v.len()) == total.get(s.name));
            files.push(if same { defs.and_then(|v| v[*n]) } else { None });
            *n += 1;
        }
        files
    };
    k.table.attach_files(|id| files[id.0 as usize], rs)?;
    Ok(())
}

/// A `--kernel DIR` stands for every regular file in it (sorted): a folder of kernel images,
/// System.maps or saved kallsyms, for compatibility runs over many kernels.
fn expand_dirs(paths: Vec<PathBuf>) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file())
                .collect();
            if files.is_empty() {
                return Err(format!(
                    "{}: the directory holds no kernel source files",
                    p.display()
                )
                .into());
            }
            files.sort();
            out.extend(files);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

/// Loads many kernels on all cores, in order, with a progress bar on a terminal.
fn load_parallel(
    paths: &[PathBuf],
    args: &SourceArgs,
    one: &(dyn Fn(&PathBuf, &mut Resched) -> Result<LoadedKernel, CliError> + Sync),
) -> Result<Vec<LoadedKernel>, CliError> {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len());
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(paths.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} loading kernels [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<LoadedKernel, String>>>> =
        Mutex::new((0..paths.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut rs = resched(args);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = paths.get(i) else { break };
                    let r = one(p, &mut rs).map_err(|e| e.to_string());
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                    if let Some(b) = &bar {
                        b.set_message(
                            p.file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                                .unwrap_or_default(),
                        );
                        b.inc(1);
                    }
                }
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let results = results
        .into_inner()
        .map_err(|_| "a loader thread panicked")?;
    results
        .into_iter()
        .map(|r| match r {
            Some(Ok(k)) => Ok(k),
            Some(Err(e)) => Err(e.into()),
            None => Err("a kernel was not loaded".into()),
        })
        .collect()
}

/// Says why every address is zero and how to fix it, once per source.
pub fn warn_hidden(k: &LoadedKernel) {
    let why = if klpsym_loader::is_live(&k.path) {
        hidden_cause(
            read_sysctl("kernel/kptr_restrict"),
            read_sysctl("kernel/perf_event_paranoid"),
            has_cap_syslog(),
        )
    } else {
        "the file was saved by a reader the kernel hid addresses from (kernel.kptr_restrict, \
         kernel.perf_event_paranoid, CAP_SYSLOG); save it again as root"
            .to_string()
    };
    eprintln!(
        "klpsym: warning: {}: every address is 0000000000000000 — {why}. Name queries (lookup \
         verdicts, positions) still work.",
        k.path.display()
    );
}

fn read_sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// CAP_SYSLOG (34) in this process's effective set.
fn has_cap_syslog() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let caps = u64::from_str_radix(hex, 16).ok()?;
    Some(caps & (1 << 34) != 0)
}

/// Why the running kernel hides addresses from this reader: `kallsyms_show_value()`
/// (kernel/kallsyms.c; kernel/ksyms_common.c since 6.7) shows them when kptr_restrict is 0
/// and perf_event_paranoid <= 1, or when kptr_restrict <= 1 and the opener has CAP_SYSLOG;
/// never at kptr_restrict 2.
pub fn hidden_cause(kptr: Option<i64>, paranoid: Option<i64>, syslog: Option<bool>) -> String {
    let k = kptr.map_or("?".to_string(), |v| v.to_string());
    let p = paranoid.map_or("?".to_string(), |v| v.to_string());
    match (kptr, syslog) {
        (Some(v), _) if v >= 2 => format!(
            "kernel.kptr_restrict is {v}, which hides addresses from everyone, root included; \
             `sysctl kernel.kptr_restrict=1` shows them to root (CAP_SYSLOG)"
        ),
        (_, Some(false)) => format!(
            "this process lacks CAP_SYSLOG (kernel.kptr_restrict={k}, kernel.perf_event_paranoid={p}); \
             run as root{}",
            if kptr == Some(0) {
                ", or lower kernel.perf_event_paranoid to 1 so that everyone sees them"
            } else {
                ""
            }
        ),
        (_, Some(true)) => format!(
            "kernel.kptr_restrict={k} and this process has CAP_SYSLOG, so the kernel should show them: \
             /proc/kallsyms was opened by a process without it (a container's view?)"
        ),
        _ => format!(
            "the kernel hides symbol addresses (kernel.kptr_restrict={k}, kernel.perf_event_paranoid={p}); \
             run as root with kernel.kptr_restrict <= 1"
        ),
    }
}

/// Errors out when a verb needs addresses and the source hides them.
pub fn require_addresses(k: &LoadedKernel) -> Result<(), CliError> {
    if k.table.addresses_hidden() {
        return Err(format!(
            "{}: addresses are hidden (all zero; see the warning above), so addresses cannot be answered",
            k.path.display()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::hidden_cause;

    /// Regression: the hint blamed kptr_restrict=1 when it was 0.
    #[test]
    fn the_hidden_address_hint_names_the_real_cause() {
        let c = hidden_cause(Some(0), Some(2), Some(false));
        assert!(
            c.contains("kptr_restrict=0") && c.contains("perf_event_paranoid"),
            "{c}"
        );
        assert!(c.contains("CAP_SYSLOG"), "{c}");
        assert!(!c.contains("kptr_restrict is 1"), "{c}");
        let c = hidden_cause(Some(2), Some(-1), Some(true));
        assert!(
            c.contains("kptr_restrict is 2") && c.contains("root included"),
            "{c}"
        );
        let c = hidden_cause(Some(1), Some(2), Some(false));
        assert!(
            c.contains("lacks CAP_SYSLOG") && !c.contains("perf_event_paranoid to 1"),
            "{c}"
        );
    }
}
