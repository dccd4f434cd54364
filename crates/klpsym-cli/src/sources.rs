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
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        let mut k = load(&p, &opts, &mut rs)?;
        if !loaded.is_empty() {
            k.table = compose(&k.table, tree.as_ref(), &loaded, placement, &opts, &mut rs)?;
        }
        let t0 = std::time::Instant::now();
        k.table.build_indexes(&mut rs)?;
        k.index_time = t0.elapsed();
        if k.table.addresses_hidden() {
            warn_hidden(&k);
        }
        out.push(k);
    }
    Ok(out)
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
