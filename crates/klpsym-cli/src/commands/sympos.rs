//! `klpsym sympos`: every definition of a name with its position, per object.

use serde::Serialize;

use klpsym::{Definitions, KernelFailure, Outcome, Queries};

use super::warn_livepatch_unsupported;
use crate::cli::SymposArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct SymposJson<'a> {
    name: &'a str,
    results: &'a [Definitions],
    failed: &'a [KernelFailure],
}

pub fn run(args: &SymposArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let run =
        kernels.answer(|k| k.sympos(&args.name, args.object.as_deref(), args.file.as_deref()))?;
    print_run(&run.notes, &run.failed);
    let results = &run.results;
    for r in results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
        match &r.file_note {
            // The note names the kernel itself.
            Some(n) if r.files_unknown => eprintln!("klpsym: warning: {n}"),
            Some(n) => eprintln!("klpsym: warning: {}: {n}", r.kernel),
            None => {}
        }
    }
    if args.source.json {
        print_json(&SymposJson {
            name: &args.name,
            results,
            failed: &run.failed,
        })?;
    } else {
        klpsym::render::sympos(
            &mut stdout(),
            &args.name,
            args.object.as_deref(),
            args.file.as_deref(),
            results,
        )?;
    }
    Ok(run.outcome)
}
