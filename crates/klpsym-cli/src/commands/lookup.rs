//! `klpsym lookup`: klp_find_object_symbol() with the kernel's verdicts and messages.

use serde::Serialize;

use klpsym::{KernelFailure, LookupAnswer, LookupQuery, Outcome, Queries};

use super::warn_livepatch_unsupported;
use crate::cli::LookupArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct LookupJson<'a> {
    name: &'a str,
    object: &'a str,
    sympos: u64,
    results: &'a [LookupAnswer],
    failed: &'a [KernelFailure],
}

pub fn run(args: &LookupArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Few))?;
    let q = LookupQuery {
        name: &args.name,
        object: args.object.as_deref(),
        sympos: args.sympos,
        file: args.file.as_deref(),
    };
    let run = kernels.answer(|k| k.lookup(&q))?;
    print_run(&run.notes, &run.failed);
    let results = &run.results;
    for r in results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
    }
    if args.source.json {
        print_json(&LookupJson {
            name: &args.name,
            object: results.last().map_or("", |r| r.object.as_str()),
            sympos: args.sympos,
            results,
            failed: &run.failed,
        })?;
    } else {
        klpsym::render::lookup(&mut stdout(), &args.name, results)?;
    }
    Ok(run.outcome)
}
