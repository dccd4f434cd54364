//! `klpsym sympos`: every definition of a name with its position, per object.

use serde::Serialize;

use klpsym::{Definitions, KernelFailure, Queries};

use super::warn_livepatch_unsupported;
use crate::cli::SymposArgs;
use crate::options::{answer_each, open_kernels};
use crate::output::{print_json, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct SymposJson<'a> {
    name: &'a str,
    results: &'a [Definitions],
    failed: &'a [KernelFailure],
}

pub fn run(args: &SymposArgs) -> Result<Outcome, CliError> {
    let (kernels, mut failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let results = answer_each(&kernels, &mut failed, |k| {
        k.sympos(&args.name, args.object.as_deref(), args.file.as_deref())
    })?;
    for r in &results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
        if let Some(n) = &r.file_note {
            eprintln!("klpsym: warning: {}: {n}", r.kernel);
        }
    }
    // A path the kernel can only match by base name is not an answer for that path.
    let ok = results
        .iter()
        .all(|r| !r.candidates.is_empty() && !r.base_name_only);
    if args.source.json {
        print_json(&SymposJson {
            name: &args.name,
            results: &results,
            failed: &failed,
        })?;
    } else {
        klpsym::render::sympos(
            &mut stdout(),
            &args.name,
            args.object.as_deref(),
            args.file.as_deref(),
            &results,
        )?;
    }
    Ok(Outcome::all_ok(ok))
}
