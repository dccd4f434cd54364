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
        match &r.file_note {
            // The note names the kernel itself.
            Some(n) if r.files_unknown => eprintln!("klpsym: warning: {n}"),
            Some(n) => eprintln!("klpsym: warning: {}: {n}", r.kernel),
            None => {}
        }
    }
    // A path the kernel can only match by base name, or a kernel that names no source files,
    // is not an answer for that path (exit 1); the kernels that answered still did.
    let ok = results
        .iter()
        .all(|r| !r.candidates.is_empty() && !r.base_name_only && !r.files_unknown);
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
