//! `klpsym copies`: where a function's code lives (out of line, clones, inlined into which
//! functions), from the kernel's DWARF.

use serde::Serialize;

use klpsym::{Copies, KernelFailure, Queries};

use crate::cli::CopiesArgs;
use crate::options::{answer_each, open_kernels};
use crate::output::{print_json, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct CopiesJson<'a> {
    name: &'a str,
    results: &'a [Copies],
    failed: &'a [KernelFailure],
}

pub fn run(args: &CopiesArgs) -> Result<Outcome, CliError> {
    let (kernels, mut failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let results = answer_each(&kernels, &mut failed, |k| {
        k.copies(&args.name, args.file.as_deref(), args.object.as_deref())
    })?;
    // No function of that name is "not found": exit 1, as sympos does.
    let ok = results.iter().all(|r| !r.definitions.is_empty());
    if args.source.json {
        print_json(&CopiesJson {
            name: &args.name,
            results: &results,
            failed: &failed,
        })?;
    } else {
        klpsym::render::copies(&mut stdout(), &results)?;
    }
    Ok(Outcome::all_ok(ok))
}
