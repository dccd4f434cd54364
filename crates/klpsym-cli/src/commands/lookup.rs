//! `klpsym lookup`: klp_find_object_symbol() with the kernel's verdicts and messages.

use serde::Serialize;

use klpsym::{KernelFailure, LookupAnswer, LookupQuery, LookupVerdict, Queries};

use super::warn_livepatch_unsupported;
use crate::cli::LookupArgs;
use crate::options::{answer_each, open_kernels};
use crate::output::{print_json, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct LookupJson<'a> {
    name: &'a str,
    object: &'a str,
    sympos: u64,
    results: &'a [LookupAnswer],
    failed: &'a [KernelFailure],
}

pub fn run(args: &LookupArgs) -> Result<Outcome, CliError> {
    let (kernels, mut failed) = open_kernels(&args.source, &args.source.options(Queries::Few))?;
    let q = LookupQuery {
        name: &args.name,
        object: args.object.as_deref(),
        sympos: args.sympos,
        file: args.file.as_deref(),
    };
    let results = answer_each(&kernels, &mut failed, |k| k.lookup(&q))?;
    for r in &results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
    }
    let all_found = results.iter().all(|r| r.verdict == LookupVerdict::Found);
    if args.source.json {
        print_json(&LookupJson {
            name: &args.name,
            object: results.last().map_or("", |r| r.object.as_str()),
            sympos: args.sympos,
            results: &results,
            failed: &failed,
        })?;
    } else {
        klpsym::render::lookup(&mut stdout(), &args.name, &results)?;
    }
    Ok(Outcome::all_ok(all_found))
}
