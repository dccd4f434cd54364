//! `klpsym sympos`: every definition of a name with its position, per object.

use serde::Serialize;

use klpsym_core::{normalize_module_name, ObjectId, SymbolId};

use super::{candidates, print_candidates, Candidate};
use crate::cli::SymposArgs;
use crate::output::{print_json, CliError, Outcome};
use crate::sources::load_all;

#[derive(Debug, Serialize)]
struct SymposJson {
    name: String,
    results: Vec<KernelSympos>,
}

#[derive(Debug, Serialize)]
struct KernelSympos {
    kernel: String,
    /// Total definitions listed.
    count: usize,
    /// With --file: every definition of the name (in the objects asked), before the file chose.
    all: usize,
    /// Positions restart at 1 in each object, in kallsyms order.
    candidates: Vec<Candidate>,
}

pub fn run(args: &SymposArgs) -> Result<Outcome, CliError> {
    let kernels = load_all(&args.source)?;
    let want: Option<String> = args.object.as_deref().map(normalize_module_name);
    let mut results = Vec::new();
    for k in &kernels {
        let t = &k.table;
        // Group the matches by object, keeping objects in table order.
        let mut per_object: Vec<(ObjectId, Vec<SymbolId>)> = Vec::new();
        for s in t.by_name(&args.name) {
            let oname = &t.object_info(s.object).name;
            if want.as_ref().is_some_and(|w| w != oname) {
                continue;
            }
            match per_object.iter_mut().find(|(o, _)| *o == s.object) {
                Some((_, v)) => v.push(s.id),
                None => per_object.push((s.object, vec![s.id])),
            }
        }
        per_object.sort_by_key(|(o, _)| *o);
        let mut cands: Vec<Candidate> = per_object
            .iter()
            .flat_map(|(_, ids)| candidates(t, ids))
            .collect();
        let all = cands.len();
        if let Some(f) = &args.file {
            super::require_files(k)?;
            cands.retain(|c| c.file.as_deref().is_some_and(|x| super::file_matches(x, f)));
        }
        super::add_lines(k, &mut cands, &args.source)?;
        results.push(KernelSympos {
            kernel: k.path.display().to_string(),
            count: cands.len(),
            all,
            candidates: cands,
        });
    }
    let ok = all_found(&results);
    if args.source.json {
        print_json(&SymposJson {
            name: args.name.clone(),
            results,
        })?;
        return Ok(Outcome::all_ok(ok));
    }
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

fn all_found(results: &[KernelSympos]) -> bool {
    results.iter().all(|r| !r.candidates.is_empty())
}
