//! Loading the kernels a verb was pointed at, with the warnings a user needs.

use std::path::PathBuf;

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
    }
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

/// The sources named with --kernel (or the running kernel's /proc/kallsyms), each composed with
/// the loaded modules of --modules.
pub fn load_all(args: &SourceArgs) -> Result<Vec<LoadedKernel>, CliError> {
    let paths: Vec<PathBuf> = if args.kernels.is_empty() {
        vec![PathBuf::from(DEFAULT_SOURCE)]
    } else {
        args.kernels.clone()
    };
    let opts = load_options(args);
    let mut rs = resched(args);
    let tree = match &args.modules {
        Some(dir) => Some(ModuleTree::scan(dir)?),
        None => None,
    };
    let loaded: Vec<String> = match &args.loaded {
        Some(spec) => LoadedSpec::parse(spec).names()?,
        None => Vec::new(),
    };
    if !loaded.is_empty() && tree.is_none() {
        return Err(
            "--loaded names modules, but no --modules DIR says where their files are".into(),
        );
    }
    let placement_kernel = match &args.place_from {
        Some(p) => Some(load(p, &opts, &mut rs)?),
        None => None,
    };
    let placement = placement_kernel
        .as_ref()
        .map_or(Placement::None, |k| Placement::Kallsyms(&k.table));
    let paths = expand_dirs(paths)?;
    let one = |p: &PathBuf, rs: &mut Resched| -> Result<LoadedKernel, CliError> {
        let mut k = load(p, &opts, rs)?;
        if !loaded.is_empty() {
            k.table = compose(&k.table, tree.as_ref(), &loaded, placement, &opts, rs)?;
        }
        let t0 = std::time::Instant::now();
        k.table.build_indexes(rs)?;
        k.index_time = t0.elapsed();
        Ok(k)
    };
    let out: Vec<LoadedKernel> = if paths.len() == 1 {
        vec![one(&paths[0], &mut rs)?]
    } else {
        load_parallel(&paths, args, &one)?
    };
    for k in &out {
        if k.table.addresses_hidden() {
            warn_hidden(k);
        }
    }
    Ok(out)
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
    eprintln!(
        "klpsym: warning: {}: every address is 0000000000000000 — the kernel hides symbol \
         addresses from readers without CAP_SYSLOG while kernel.kptr_restrict is 1 (and from \
         everyone at 2). Name queries (lookup verdicts, positions) still work; for addresses run \
         as root with kptr_restrict <= 1 (`sysctl kernel.kptr_restrict=1`), or read a saved copy.",
        k.path.display()
    );
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
