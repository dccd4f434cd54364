//! `klpsym lookup`: klp_find_object_symbol() with the kernel's verdicts and messages.

use serde::Serialize;

use klpsym_core::{find_object_symbol, LookupRequest, Verdict, SIZE_UNKNOWN};

use super::{candidates, print_candidates, Candidate};
use crate::cli::LookupArgs;
use crate::output::{hex, print_json, CliError, Outcome};
use crate::sources::load_all_few;

#[derive(Debug, Serialize)]
struct LookupJson {
    name: String,
    object: String,
    sympos: u64,
    results: Vec<KernelResult>,
}

#[derive(Debug, Serialize)]
struct KernelResult {
    kernel: String,
    verdict: Verdict,
    address: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    size: Option<String>,
    position: Option<u64>,
    count: u64,
    message: Option<String>,
    /// With --file: why no position could be chosen from the file (then `message` is null).
    file_note: Option<String>,
    object_loaded: bool,
    /// True when `address` is an offset in its section (an unplaced module symbol).
    unplaced: bool,
    /// When the name is missing: its compiler-made variants (`NAME.isra.0 [OBJECT]`...).
    variants: Vec<String>,
    #[serde(skip)]
    text: Option<String>,
    candidates: Vec<Candidate>,
}

/// Candidates sized by walking the table (one walk each, usually a few records); more build
/// the indexes first.
const WALKED_SIZES: usize = 64;

pub fn run(args: &LookupArgs) -> Result<Outcome, CliError> {
    let kernels = load_all_few(&args.source)?;
    let req = LookupRequest {
        name: &args.name,
        object: args.object.as_deref(),
        sympos: args.sympos,
    };
    let mut all_found = true;
    let mut results = Vec::new();
    let mut object_name = String::new();
    for k in &kernels {
        let t = &k.table;
        // --file: the position of the definition in that file, then the kernel's lookup.
        let mut req = req;
        let mut file_miss = None;
        if let Some(f) = &args.file {
            super::require_files(k)?;
            let all = find_object_symbol(t, &LookupRequest { sympos: 0, ..req });
            let hits: Vec<u64> = all
                .candidates
                .iter()
                .enumerate()
                .filter(|(_, &id)| t.file(id).is_some_and(|x| super::file_matches(x, f)))
                .map(|(i, _)| i as u64 + 1)
                .collect();
            match hits.as_slice() {
                [p] => req.sympos = *p,
                [] => {
                    let mut files: Vec<&str> =
                        all.candidates.iter().filter_map(|&id| t.file(id)).collect();
                    files.dedup();
                    file_miss = Some(format!(
                        "no definition of '{}' in {f}{}",
                        args.name,
                        if files.is_empty() {
                            String::new()
                        } else {
                            format!(" (its definitions are in {})", files.join(", "))
                        }
                    ));
                }
                many => {
                    file_miss = Some(format!(
                        "{} definitions of '{}' in {f} (positions {:?}): one file holds several copies; choose with --sympos",
                        many.len(),
                        args.name,
                        many
                    ));
                }
            }
        }
        let mut o = find_object_symbol(t, &req);
        if o.candidates.len() > WALKED_SIZES {
            // Each size would be a walk of the table: build the address index instead, with
            // the reschedule points.
            t.build_indexes(&mut crate::sources::resched(&args.source))?;
        }
        if file_miss.is_some() {
            // Not the kernel's answer: no position could be chosen from the file.
            o.verdict = Verdict::NotFound;
            o.symbol = None;
            o.address = None;
            o.message = None;
        }
        object_name.clone_from(&o.object);
        all_found &= o.verdict == Verdict::Found;
        let sym = o.symbol.map(|id| (t.symbol(id), t.size(id)));
        let mut cands = candidates(t, &o.candidates);
        super::add_lines(k, &mut cands, &args.source)?;
        results.push(KernelResult {
            kernel: k.path.display().to_string(),
            verdict: o.verdict,
            address: o.address.map(hex),
            kind: sym.map(|(s, _)| s.kind.to_string()),
            size: sym.and_then(|(_, sz)| {
                (sz != SIZE_UNKNOWN && !t.addresses_hidden()).then(|| format!("{sz:#x}"))
            }),
            position: (o.verdict == Verdict::Found).then_some(o.count),
            count: o.count,
            message: o.message.as_ref().map(|m| format!("livepatch: {m}")),
            file_note: file_miss.clone(),
            object_loaded: o.object_id.is_some(),
            variants: if o.candidates.is_empty() {
                t.variants_of(&args.name)
                    .map(|s| format!("{} [{}]", s.name, t.object_info(s.object).name))
                    .collect()
            } else {
                Vec::new()
            },
            unplaced: o
                .object_id
                .is_some_and(|id| t.object_info(id).relative && o.symbol.is_some()),
            // The found line reads like a /proc/kallsyms line; unplaced symbols show `+0x..`.
            text: o.symbol.map(|id| {
                let a = klpsym_core::address_text(t, id);
                a.strip_prefix("0x").map_or(a.clone(), str::to_string)
            }),
            candidates: cands,
        });
    }
    if args.source.json {
        print_json(&LookupJson {
            name: args.name.clone(),
            object: object_name,
            sympos: args.sympos,
            results,
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
                    for v in &r.variants {
                        println!("  note: compiler-made variant: {v}");
                    }
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
