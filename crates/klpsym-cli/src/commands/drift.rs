//! `klpsym drift`: how names' definitions differ between builds, without a patch.

use serde::Serialize;

use klpsym::{Drift, DriftStatus, Queries};

use crate::cli::DriftArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

#[derive(Debug, Serialize)]
struct DriftJson<'a> {
    results: &'a [Drift],
}

/// The first kernel against each other one, name by name. Exit 1 when a definition moved, is
/// gone or is new (a position chosen on the first binds another definition, or none, there).
pub fn run(args: &DriftArgs) -> Result<Outcome, CliError> {
    if args.source.kernels.len() < 2 && !args.source.kernels.iter().any(|k| k.is_dir()) {
        return Err(klpsym::Error::usage(
            "drift compares builds: give the one positions were chosen on, then the others (--kernel FROM --kernel TO...)",
        )
        .into());
    }
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let Some((from, others)) = kernels.split_first().filter(|(_, o)| !o.is_empty()) else {
        return Err(
            klpsym::Error::usage("drift compares builds: only one kernel could be opened").into(),
        );
    };
    let mut results = Vec::new();
    for to in others {
        for name in &args.names {
            results.push(klpsym::drift(from, to, name, &args.object)?);
        }
    }
    let moved = results.iter().any(Drift::moved);
    if args.source.json {
        print_json(&DriftJson { results: &results })?;
        return Ok(Outcome::all_ok(!moved));
    }
    for d in &results {
        println!(
            "{} in {}: {} definition(s) on {}, {} on {}",
            d.name,
            d.object,
            d.from.len(),
            d.from_kernel,
            d.to.len(),
            d.to_kernel
        );
        if d.rows.is_empty() {
            continue;
        }
        println!("  FROM    TO  STATUS   IDENTITY (source file, copy in it)");
        for r in &d.rows {
            let pos = |p: Option<usize>| p.map_or("-".to_string(), |p| p.to_string());
            let status = match r.status {
                DriftStatus::Same => "same",
                DriftStatus::Moved => "MOVED",
                DriftStatus::Gone => "GONE",
                DriftStatus::New => "NEW",
                DriftStatus::Unknown => "unknown",
            };
            println!(
                "  {:>4}  {:>4}  {:<7}  {}",
                pos(r.from_position),
                pos(r.to_position),
                status,
                r.identity
                    .as_ref()
                    .map_or("no source file known".to_string(), |i| i.to_string())
            );
        }
        if d.rows.iter().any(|r| r.status == DriftStatus::Unknown) {
            println!(
                "  unknown: a build without source files (an image's kallsyms names none; give its -dbg package or vmlinux)"
            );
        }
    }
    Ok(Outcome::all_ok(!moved))
}
