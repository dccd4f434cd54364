//! `klpsym sympos`: every definition of a name with its position, per object.

use serde::Serialize;

use klpsym::{Definitions, Queries};

use super::{print_candidates, print_variants, warn_livepatch_unsupported};
use crate::cli::SymposArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

#[derive(Debug, Serialize)]
struct SymposJson<'a> {
    name: &'a str,
    results: &'a [Definitions],
}

pub fn run(args: &SymposArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let results = kernels
        .iter()
        .map(|k| k.sympos(&args.name, args.object.as_deref(), args.file.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    for r in &results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
    }
    let ok = results.iter().all(|r| !r.candidates.is_empty());
    if args.source.json {
        print_json(&SymposJson {
            name: &args.name,
            results: &results,
        })?;
        return Ok(Outcome::all_ok(ok));
    }
    let want = args
        .object
        .as_deref()
        .map(klpsym::layers::core::normalize_module_name);
    let many = results.len() > 1;
    for r in &results {
        if many {
            println!("== {}", r.kernel);
        }
        if r.candidates.is_empty() {
            println!(
                "no symbol named '{}'{}{}",
                args.name,
                want.as_ref().map_or(String::new(), |w| format!(" in {w}")),
                args.file
                    .as_ref()
                    .map_or(String::new(), |f| format!(" defined in {f}"))
            );
            print_variants(&r.variants, "  ");
            continue;
        }
        match &args.file {
            Some(f) => println!(
                "{}: {} definition(s) in {f} ({} in all; POS is the position among them all)",
                args.name, r.count, r.all
            ),
            None => println!("{}: {} definition(s)", args.name, r.count),
        }
        print_candidates(&r.candidates, "");
    }
    Ok(Outcome::all_ok(ok))
}
