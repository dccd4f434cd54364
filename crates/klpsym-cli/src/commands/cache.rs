//! `klpsym cache`: what the cache of decoded tables holds, and pruning it.

use crate::cli::CacheArgs;
use crate::output::{print_json, CliError, Outcome};

pub fn run(args: &CacheArgs) -> Result<Outcome, CliError> {
    let l = klpsym::cache_listing(args.cache_dir.clone(), args.prune)?;
    if args.json {
        print_json(&l)?;
        return Ok(Outcome::all_ok(true));
    }
    let kept = &l.entries;
    println!(
        "{}: {} entr{}, {:.1} MB",
        l.dir,
        kept.len(),
        if kept.len() == 1 { "y" } else { "ies" },
        l.bytes as f64 / 1e6
    );
    for e in kept {
        println!(
            "  {:>8.1} MB  {}{}{}",
            e.bytes as f64 / 1e6,
            e.source
                .as_deref()
                .unwrap_or("(another klpsym version's entry)"),
            if e.current && e.kind != "kernel" {
                format!(" ({})", e.kind)
            } else {
                String::new()
            },
            if klpsym::input_present(e) {
                ""
            } else {
                "  (input gone or changed)"
            }
        );
    }
    if !l.removed.is_empty() {
        println!(
            "removed {} entr{}",
            l.removed.len(),
            if l.removed.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(Outcome::all_ok(true))
}
