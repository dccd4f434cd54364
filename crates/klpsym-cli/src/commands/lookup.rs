//! `klpsym lookup`: klp_find_object_symbol() with the kernel's verdicts and messages.

use serde::Serialize;

use klpsym::{LookupAnswer, LookupQuery, Queries, Verdict};

use super::{print_candidates, print_variants, warn_livepatch_unsupported};
use crate::cli::LookupArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

#[derive(Debug, Serialize)]
struct LookupJson<'a> {
    name: &'a str,
    object: &'a str,
    sympos: u64,
    results: &'a [LookupAnswer],
}

pub fn run(args: &LookupArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Few))?;
    let q = LookupQuery {
        name: &args.name,
        object: args.object.as_deref(),
        sympos: args.sympos,
        file: args.file.as_deref(),
    };
    let results = kernels
        .iter()
        .map(|k| k.lookup(&q))
        .collect::<Result<Vec<_>, _>>()?;
    for r in &results {
        warn_livepatch_unsupported(&r.kernel, r.livepatch_unsupported.as_deref());
    }
    let all_found = results.iter().all(|r| r.verdict == Verdict::Found);
    let object_name = results.last().map_or("", |r| r.object.as_str());
    if args.source.json {
        print_json(&LookupJson {
            name: &args.name,
            object: object_name,
            sympos: args.sympos,
            results: &results,
        })?;
        return Ok(Outcome::all_ok(all_found));
    }
    let many = results.len() > 1;
    for r in &results {
        if many {
            println!("== {}", r.kernel);
        }
        match r.verdict {
            Verdict::Found => {
                let total = r.candidates.len();
                println!(
                    "{} {} {}{} (position {} of {} in {}{})",
                    r.text.as_deref().unwrap_or("(hidden)"),
                    r.kind.as_deref().unwrap_or("?"),
                    args.name,
                    if object_name == "vmlinux" {
                        String::new()
                    } else {
                        format!("\t[{object_name}]")
                    },
                    r.position.unwrap_or(0),
                    total,
                    object_name,
                    r.size
                        .as_deref()
                        .map_or(String::new(), |s| format!(", size {s}")),
                );
                if r.unplaced {
                    println!("{}", super::UNPLACED_NOTE);
                }
            }
            _ => {
                println!(
                    "{}",
                    r.message
                        .as_deref()
                        .or(r.file_note.as_deref())
                        .unwrap_or("livepatch: (no message)")
                );
                if !r.object_loaded {
                    println!("  note: object '{object_name}' is not in this symbol table (module not loaded?)");
                } else if r.candidates.is_empty() {
                    println!("  note: no symbol named '{}' in {object_name}", args.name);
                    print_variants(&r.variants, "  ");
                } else {
                    println!(
                        "  {} has {} definition(s) in {object_name}; choose one with --sympos N (the patch's old_sympos):",
                        args.name,
                        r.candidates.len()
                    );
                    print_candidates(&r.candidates, "  ");
                }
            }
        }
    }
    Ok(Outcome::all_ok(all_found))
}
