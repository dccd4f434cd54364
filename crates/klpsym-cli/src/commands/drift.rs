//! `klpsym drift`: how names' definitions differ between builds, without a patch.

use serde::Serialize;

use klpsym::{Drift, KernelFailure, Queries};

use crate::cli::DriftArgs;
use crate::options::{open_kernels, print_failure};
use crate::output::{print_json, stdout, CliError, Outcome};

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
    let (kernels, mut failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let Some((from, others)) = kernels.split_first().filter(|(_, o)| !o.is_empty()) else {
        return Err(
            klpsym::Error::usage("drift compares builds: only one kernel could be opened").into(),
        );
    };
    let mut results = Vec::new();
    for to in others {
        for name in &args.names {
            match klpsym::drift(from, to, name, &args.object) {
                Ok(d) => results.push(d),
                Err(e) if e.is_cancelled() => return Err(e.into()),
                Err(e) => failed.push(KernelFailure::new(to.path().display().to_string(), &e)),
            }
        }
    }
    failed.dedup_by(|a, b| a.kernel == b.kernel && a.error == b.error);
    for f in &failed {
        print_failure(f);
    }
    if results.is_empty() {
        if let Some(f) = failed.first() {
            return Err(f.error.clone().into());
        }
    }
    let moved = results.iter().any(Drift::moved);
    if args.source.json {
        print_json(&DriftJson {
            results: &results,
            failed: &failed,
        })?;
    } else {
        klpsym::render::drift(&mut stdout(), &results)?;
    }
    Ok(Outcome::all_ok(!moved))
}
