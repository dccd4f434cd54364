//! `klpsym drift`: how names' definitions differ between builds, without a patch.

use serde::Serialize;

use klpsym::{Drift, KernelFailure, Outcome, Queries};

use crate::cli::DriftArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct DriftJson<'a> {
    results: &'a [Drift],
    failed: &'a [KernelFailure],
}

/// The first kernel against each other one, name by name. Exit 1 when a definition moved, is
/// gone or is new (a position chosen on the first binds another definition, or none, there);
/// 2 when a build names no source files (nothing tells its definitions apart).
pub fn run(args: &DriftArgs) -> Result<Outcome, CliError> {
    if args.source.kernels.len() < 2 && !args.source.kernels.iter().any(|k| k.is_dir()) {
        return Err(klpsym::Error::usage(
            "drift compares builds: give the one positions were chosen on, then the others (--kernel FROM --kernel TO...)",
        )
        .into());
    }
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let run = klpsym::drift_all(kernels, &args.names, &args.object)?;
    print_run(&run.notes, &run.failed);
    if args.source.json {
        print_json(&DriftJson {
            results: &run.results,
            failed: &run.failed,
        })?;
    } else {
        klpsym::render::drift(&mut stdout(), &run.results)?;
    }
    Ok(run.outcome)
}
