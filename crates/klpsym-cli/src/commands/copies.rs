//! `klpsym copies`: where a function's code lives (out of line, clones, inlined into which
//! functions), from the kernel's DWARF.

use serde::Serialize;

use klpsym::{Copies, KernelFailure, Outcome, Queries};

use crate::cli::CopiesArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct CopiesJson<'a> {
    name: &'a str,
    results: &'a [Copies],
    failed: &'a [KernelFailure],
}

pub fn run(args: &CopiesArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let run =
        kernels.answer(|k| k.copies(&args.name, args.file.as_deref(), args.object.as_deref()))?;
    print_run(&run.notes, &run.failed);
    if args.source.json {
        print_json(&CopiesJson {
            name: &args.name,
            results: &run.results,
            failed: &run.failed,
        })?;
    } else {
        klpsym::render::copies(&mut stdout(), &run.results)?;
    }
    Ok(run.outcome)
}
