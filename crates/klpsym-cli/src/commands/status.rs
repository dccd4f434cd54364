//! `klpsym status`: the livepatches loaded on the running system, their functions resolved
//! against the kernel's symbols (see crates/klpsym-livepatch/CLI.md).

use std::fs;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use klpsym_core::{find_object_symbol, LookupRequest, SymbolTable, Verdict};

use crate::cli::SourceArgs;
use crate::output::{hex, print_json, CliError, Outcome};
use crate::sources::load_all;

/// `klpsym status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Where the livepatch sysfs tree is (tests point it at a copy).
    #[arg(long, value_name = "DIR", default_value = "/sys/kernel/livepatch")]
    pub sysfs: PathBuf,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Serialize)]
struct FuncStatus {
    name: String,
    /// The `,N` of the sysfs entry (old_sympos, 0 shown as 1).
    sympos: u64,
    address: Option<String>,
    verdict: Verdict,
    message: Option<String>,
}

#[derive(Debug, Serialize)]
struct ObjectStatus {
    name: String,
    loaded: bool,
    funcs: Vec<FuncStatus>,
}

#[derive(Debug, Serialize)]
struct PatchStatus {
    name: String,
    enabled: Option<bool>,
    transition: Option<bool>,
    objects: Vec<ObjectStatus>,
}

#[derive(Debug, Serialize)]
struct StatusJson {
    patches: Vec<PatchStatus>,
}

fn flag(p: &Path) -> Option<bool> {
    fs::read_to_string(p).ok().map(|s| s.trim() == "1")
}

fn subdirs(p: &Path) -> Result<Vec<String>, CliError> {
    let mut v: Vec<String> = fs::read_dir(p)
        .map_err(|e| format!("{}: {e}", p.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

/// Resolves a sysfs `name,N` entry: N is old_sympos with 0 shown as 1, so a `,1` entry is
/// tried as 0 (unique) first.
fn resolve(table: &SymbolTable, object: &str, entry: &str) -> FuncStatus {
    let (name, pos) = entry.rsplit_once(',').unwrap_or((entry, "1"));
    let sympos: u64 = pos.parse().unwrap_or(1);
    let obj = (object != "vmlinux").then_some(object);
    let look = |p| {
        find_object_symbol(
            table,
            &LookupRequest {
                name,
                object: obj,
                sympos: p,
            },
        )
    };
    let mut out = look(if sympos == 1 { 0 } else { sympos });
    if sympos == 1 && out.verdict == Verdict::Ambiguous {
        out = look(1);
    }
    FuncStatus {
        name: name.to_string(),
        sympos,
        address: out.address.map(hex),
        verdict: out.verdict,
        message: out.message,
    }
}

pub fn run(args: &StatusArgs) -> Result<Outcome, CliError> {
    if !args.sysfs.is_dir() {
        return Err(format!(
            "{}: not found — is CONFIG_LIVEPATCH enabled, and sysfs mounted?",
            args.sysfs.display()
        )
        .into());
    }
    let kernels = load_all(&args.source)?;
    let table = &kernels[0].table;
    let mut patches = Vec::new();
    for p in subdirs(&args.sysfs)? {
        let dir = args.sysfs.join(&p);
        let mut objects = Vec::new();
        for o in subdirs(&dir)? {
            let loaded = o == "vmlinux" || table.object_by_name(&o).is_some();
            let funcs = subdirs(&dir.join(&o))?
                .iter()
                .map(|f| resolve(table, &o, f))
                .collect();
            objects.push(ObjectStatus {
                name: o,
                loaded,
                funcs,
            });
        }
        patches.push(PatchStatus {
            enabled: flag(&dir.join("enabled")),
            transition: flag(&dir.join("transition")),
            name: p,
            objects,
        });
    }
    let ok = patches
        .iter()
        .flat_map(|p| &p.objects)
        .filter(|o| o.loaded)
        .flat_map(|o| &o.funcs)
        .all(|f| f.verdict == Verdict::Found);
    if args.source.json {
        print_json(&StatusJson { patches })?;
        return Ok(Outcome::all_ok(ok));
    }
    if patches.is_empty() {
        println!("no livepatch loaded");
    }
    for p in &patches {
        let b = |v: Option<bool>| v.map_or("?", |x| if x { "1" } else { "0" });
        println!(
            "{}  enabled={} transition={}",
            p.name,
            b(p.enabled),
            b(p.transition)
        );
        for o in &p.objects {
            for f in &o.funcs {
                let what = if !o.loaded {
                    "module not loaded".to_string()
                } else {
                    match (&f.address, &f.message) {
                        (Some(a), _) => a.clone(),
                        (None, Some(m)) => format!("livepatch: {m}"),
                        (None, None) => "(address hidden)".to_string(),
                    }
                };
                let entry = format!("{},{}", f.name, f.sympos);
                println!("  {:<10} {entry:<32} -> {what}", o.name);
            }
        }
    }
    Ok(Outcome::all_ok(ok))
}
