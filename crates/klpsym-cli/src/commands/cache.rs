//! `klpsym cache`: what the cache of decoded tables holds, and pruning it.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use klpsym_loader::{Cache, EntryInfo};

use crate::output::{print_json, CliError, Outcome};

/// `klpsym cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The cache folder (default: $XDG_CACHE_HOME/klpsym, else ~/.cache/klpsym).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Remove entries whose input is gone or changed, entries of other klpsym versions, and
    /// entries not written for DAYS days (`--prune 0`: every entry).
    #[arg(long, value_name = "DAYS")]
    pub prune: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct CacheJson {
    dir: String,
    entries: Vec<EntryInfo>,
    bytes: u64,
    removed: Vec<String>,
}

/// True when the entry's input still exists with the size it had, or for a module tree's
/// listing, when the folder still exists (the entry itself checks identity and content on
/// use; this is only what pruning can tell cheaply).
fn input_present(e: &EntryInfo) -> bool {
    match (&e.source, e.source_bytes) {
        (Some(s), Some(n)) => std::fs::metadata(s).is_ok_and(|m| m.len() == n),
        (Some(s), None) if e.kind == "module tree" => std::path::Path::new(s).is_dir(),
        _ => false,
    }
}

pub fn run(args: &CacheArgs) -> Result<Outcome, CliError> {
    let dir = args
        .cache_dir
        .clone()
        .or_else(Cache::default_dir)
        .ok_or("no cache folder: set --cache-dir, XDG_CACHE_HOME or HOME")?;
    let cache = Cache { dir: dir.clone() };
    let mut rs = klpsym_core::resched::Resched::none();
    let entries = cache
        .list(&mut rs)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for e in entries {
        let stale = match args.prune {
            None => false,
            Some(days) => {
                !e.current || !input_present(&e) || e.age_secs >= days.saturating_mul(86_400)
            }
        };
        if stale {
            std::fs::remove_file(&e.file).map_err(|err| format!("{}: {err}", e.file.display()))?;
            removed.push(e.file.display().to_string());
        } else {
            kept.push(e);
        }
    }
    let bytes = kept.iter().map(|e| e.bytes).sum();
    if args.json {
        print_json(&CacheJson {
            dir: dir.display().to_string(),
            entries: kept,
            bytes,
            removed,
        })?;
        return Ok(Outcome::all_ok(true));
    }
    println!(
        "{}: {} entr{}, {:.1} MB",
        dir.display(),
        kept.len(),
        if kept.len() == 1 { "y" } else { "ies" },
        bytes as f64 / 1e6
    );
    for e in &kept {
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
            if input_present(e) {
                ""
            } else {
                "  (input gone or changed)"
            }
        );
    }
    if !removed.is_empty() {
        println!(
            "removed {} entr{}",
            removed.len(),
            if removed.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(Outcome::all_ok(true))
}
