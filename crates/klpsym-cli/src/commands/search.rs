//! `klpsym search`: which names exist, by glob or substring, with counts and objects — for an
//! author whose function may have been renamed (`.isra.0`, `.constprop.0`...) or who only
//! half remembers it.

use serde::Serialize;

use klpsym::{KernelFailure, NamePattern, Outcome, Queries, SearchAnswer, SearchQuery};

use crate::cli::SearchArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct SearchJson<'a> {
    pattern: &'a str,
    /// `glob` or `substring`.
    mode: &'static str,
    results: &'a [SearchAnswer],
    failed: &'a [KernelFailure],
}

pub fn run(args: &SearchArgs) -> Result<Outcome, CliError> {
    let m =
        NamePattern::new(&args.pattern).map_err(|e| format!("PATTERN '{}': {e}", args.pattern))?;
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let q = SearchQuery {
        object: args.object.as_deref(),
        limit: args.limit,
        duplicates: args.duplicates,
        sort_by_name: args.sort,
        fold_twins: args.fold,
        ..SearchQuery::new(&m)
    };
    let run = kernels.answer(|k| k.search_by(&q))?;
    print_run(&run.notes, &run.failed);
    if args.source.json {
        print_json(&SearchJson {
            pattern: &args.pattern,
            mode: m.mode(),
            results: &run.results,
            failed: &run.failed,
        })?;
    } else {
        klpsym::render::search(
            &mut stdout(),
            &m,
            &args.pattern,
            args.duplicates,
            &run.results,
        )?;
    }
    Ok(run.outcome)
}
