//! `klpsym search`: which names exist, by glob or substring, with counts and objects — for an
//! author whose function may have been renamed (`.isra.0`, `.constprop.0`...) or who only
//! half remembers it.

use serde::Serialize;

use klpsym_core::{normalize_module_name, ObjectKind, SymbolTable};

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

/// How a pattern matches a name.
enum Matcher {
    Glob(globset::GlobMatcher),
    Substring(String),
}

impl Matcher {
    fn new(pattern: &str) -> Result<Matcher, CliError> {
        if pattern.contains(['*', '?', '[']) {
            let g = globset::GlobBuilder::new(pattern)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("PATTERN '{pattern}': {e}"))?;
            Ok(Matcher::Glob(g.compile_matcher()))
        } else {
            Ok(Matcher::Substring(pattern.to_string()))
        }
    }

    fn mode(&self) -> &'static str {
        match self {
            Matcher::Glob(_) => "glob",
            Matcher::Substring(_) => "substring",
        }
    }

    fn is_match(&self, name: &str) -> bool {
        match self {
            Matcher::Glob(g) => g.is_match(name),
            Matcher::Substring(s) => name.contains(s.as_str()),
        }
    }
}

/// Every matching name with its count and objects, in first-seen (kallsyms) order.
fn search(
    t: &SymbolTable,
    m: &Matcher,
    object: Option<klpsym_core::ObjectId>,
    rs: &mut klpsym_core::Resched,
) -> Result<Vec<NameMatch>, CliError> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out: Vec<NameMatch> = Vec::new();
    for s in t.iter() {
        rs.tick()?;
        if object.is_some_and(|o| o != s.object)
            || t.object_info(s.object).kind == ObjectKind::Pseudo
            || !m.is_match(s.name)
        {
            continue;
        }
        let obj = &t.object_info(s.object).name;
        let i = *seen.entry(s.name).or_insert_with(|| {
            out.push(NameMatch {
                name: s.name.to_string(),
                count: 0,
                objects: Vec::new(),
            });
            out.len() - 1
        });
        let e = &mut out[i];
        e.count += 1;
        if !e.objects.contains(obj) {
            e.objects.push(obj.clone());
        }
    }
    Ok(out)
}

pub fn run(args: &SearchArgs) -> Result<Outcome, CliError> {
    let m = Matcher::new(&args.pattern)?;
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
        let mut all = search(&k.table, &m, object, &mut rs)?;
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
