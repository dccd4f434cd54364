//! `klpsym search`: which names exist, by glob or substring, with counts and objects — for an
//! author whose function may have been renamed (`.isra.0`, `.constprop.0`...) or who only
//! half remembers it.

use serde::Serialize;

use klpsym_core::{normalize_module_name, search_names, NamePattern};

use crate::cli::SearchArgs;
use crate::output::{print_json, CliError, Outcome};
use crate::sources::{load_all, resched};

#[derive(Debug, Serialize)]
struct SearchJson {
    pattern: String,
    /// `glob` or `substring`.
    mode: &'static str,
    results: Vec<KernelMatches>,
}

#[derive(Debug, Serialize)]
struct KernelMatches {
    kernel: String,
    /// Distinct matching names (all of them, even past `--limit`).
    names: usize,
    /// The first `--limit` names, in the order kallsyms first lists them.
    matches: Vec<NameMatch>,
}

#[derive(Debug, Serialize)]
struct NameMatch {
    name: String,
    /// Definitions in all objects.
    count: usize,
    /// The objects defining it, in kallsyms order, each once.
    objects: Vec<String>,
}

pub fn run(args: &SearchArgs) -> Result<Outcome, CliError> {
    let m =
        NamePattern::new(&args.pattern).map_err(|e| format!("PATTERN '{}': {e}", args.pattern))?;
    let kernels = load_all(&args.source)?;
    let mut rs = resched(&args.source);
    let mut results = Vec::new();
    for k in &kernels {
        let object = match &args.object {
            None => None,
            Some(o) => {
                let n = normalize_module_name(o);
                Some(
                    k.table
                        .object_by_name(&n)
                        .ok_or_else(|| format!("--object {n}: not in {}", k.path.display()))?,
                )
            }
        };
        let t = &k.table;
        let mut all: Vec<NameMatch> = search_names(t, &m, object, &mut rs)?
            .into_iter()
            .map(|x| NameMatch {
                name: x.name.to_string(),
                count: x.count,
                objects: x
                    .objects
                    .iter()
                    .map(|&o| t.object_info(o).name.clone())
                    .collect(),
            })
            .collect();
        let names = all.len();
        all.truncate(args.limit);
        results.push(KernelMatches {
            kernel: k.path.display().to_string(),
            names,
            matches: all,
        });
    }
    let any = results.iter().any(|r| r.names > 0);
    if args.source.json {
        print_json(&SearchJson {
            pattern: args.pattern.clone(),
            mode: m.mode(),
            results,
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
            "{} name(s) matching {} '{}'",
            r.names,
            m.mode(),
            args.pattern
        );
        if !r.matches.is_empty() {
            println!("  {:<width$}  {:>5}  OBJECTS", "NAME", "COUNT");
        }
        for x in &r.matches {
            println!(
                "  {:<width$}  {:>5}  {}",
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
