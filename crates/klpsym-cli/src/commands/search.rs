//! `klpsym search`: which names exist, by glob or substring, with counts and objects — for an
//! author whose function may have been renamed (`.isra.0`, `.constprop.0`...) or who only
//! half remembers it.

use serde::Serialize;

use klpsym::{KernelFailure, NamePattern, Queries, SearchAnswer, SearchQuery};

use crate::cli::SearchArgs;
use crate::options::{answer_each, open_kernels};
use crate::output::{print_json, stdout, CliError, Outcome};

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
    let (kernels, mut failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let q = SearchQuery {
        object: args.object.as_deref(),
        limit: args.limit,
        duplicates: args.duplicates,
        sort_by_name: args.sort,
        fold_twins: args.fold,
        ..SearchQuery::new(&m)
    };
    let results = answer_each(&kernels, &mut failed, |k| k.search_by(&q))?;
    let any = results.iter().any(|r| r.names > 0);
    if args.source.json {
        print_json(&SearchJson {
            pattern: &args.pattern,
            mode: m.mode(),
            results: &results,
            failed: &failed,
        })?;
    } else {
        klpsym::render::search(&mut stdout(), &m, &args.pattern, args.duplicates, &results)?;
    }
    Ok(Outcome::all_ok(any))
}
