//! `klpsym search`: which names exist, by glob or substring, with counts and objects — for an
//! author whose function may have been renamed (`.isra.0`, `.constprop.0`...) or who only
//! half remembers it.

use serde::Serialize;

use klpsym::{NamePattern, Queries, SearchAnswer, SearchQuery};

use crate::cli::SearchArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

#[derive(Debug, Serialize)]
struct SearchJson<'a> {
    pattern: &'a str,
    /// `glob` or `substring`.
    mode: &'static str,
    results: &'a [SearchAnswer],
}

pub fn run(args: &SearchArgs) -> Result<Outcome, CliError> {
    let m =
        NamePattern::new(&args.pattern).map_err(|e| format!("PATTERN '{}': {e}", args.pattern))?;
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let results = kernels
        .iter()
        .map(|k| {
            k.search_by(&SearchQuery {
                object: args.object.as_deref(),
                limit: args.limit,
                duplicates: args.duplicates,
                sort_by_name: args.sort,
                fold_twins: args.fold,
                ..SearchQuery::new(&m)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let any = results.iter().any(|r| r.names > 0);
    if args.source.json {
        print_json(&SearchJson {
            pattern: &args.pattern,
            mode: m.mode(),
            results: &results,
        })?;
        return Ok(Outcome::all_ok(any));
    }
    let many = results.len() > 1;
    for r in &results {
        if many {
            println!("== {}", r.kernel);
        }
        let width = r
            .matches
            .iter()
            .map(|x| x.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 60);
        println!(
            "{} name(s) matching {} '{}'{}",
            r.names,
            m.mode(),
            args.pattern,
            if args.duplicates {
                ", defined more than once"
            } else {
                ""
            }
        );
        if !r.matches.is_empty() {
            println!("  {:<width$}  {:>5}  OBJECTS", "NAME", "COUNT");
        }
        for x in &r.matches {
            let twins = if x.twins.is_empty() {
                String::new()
            } else {
                format!("  (+ {})", x.twins.join(" "))
            };
            println!(
                "  {:<width$}  {:>5}  {}{twins}",
                x.name,
                x.count,
                x.objects.join(" ")
            );
        }
        if r.names > r.matches.len() {
            println!(
                "  ... {} more (--limit N shows more)",
                r.names - r.matches.len()
            );
        }
    }
    Ok(Outcome::all_ok(any))
}
