//! `klpsym info`: what a source holds.

use serde::Serialize;

use klpsym_core::ObjectKind;

use crate::cli::InfoArgs;
use crate::output::{hex, print_json, CliError, Outcome};
use crate::sources::load_all;

#[derive(Debug, Serialize)]
struct InfoJson {
    kernel: String,
    kind: &'static str,
    bytes: u64,
    symbols: usize,
    distinct_names: usize,
    addresses_hidden: bool,
    lowest_address: Option<String>,
    highest_address: Option<String>,
    /// The release (`6.1.0-57-amd64`), the same form for every kind of source.
    version: Option<String>,
    /// The whole `Linux version ...` banner, when the source has one.
    banner: Option<String>,
    /// The module loader's vermagic, when the source has it (image, vmlinux, module).
    vermagic: Option<String>,
    /// The GNU build id (hex), when the source has it (image, vmlinux).
    build_id: Option<String>,
    arch: Option<String>,
    format: Option<String>,
    facts: std::collections::BTreeMap<String, String>,
    notes: Vec<String>,
    objects: Vec<ObjectJson>,
    read_ms: f64,
    parse_ms: f64,
    /// The cache entry the table was read from (null: decoded from the source).
    cache_entry: Option<String>,
    index_ms: f64,
}

#[derive(Debug, Serialize)]
struct ObjectJson {
    name: String,
    kind: ObjectKind,
    symbols: u32,
    relative: bool,
}

pub fn run(args: &InfoArgs) -> Result<Outcome, CliError> {
    let kernels = load_all(&args.source)?;
    let mut infos = Vec::new();
    for k in &kernels {
        let t = &k.table;
        let distinct = t.distinct_names();
        let index_ms = k.index_time.as_secs_f64() * 1e3;
        let (lo, hi) = if t.addresses_hidden() || t.is_empty() {
            (None, None)
        } else {
            let lo = t.iter().map(|s| s.addr).min();
            let hi = t.iter().map(|s| s.addr).max();
            (lo, hi)
        };
        infos.push(InfoJson {
            kernel: k.path.display().to_string(),
            kind: k.kind.as_str(),
            bytes: k.bytes,
            symbols: t.len(),
            distinct_names: distinct,
            addresses_hidden: t.addresses_hidden(),
            lowest_address: lo.map(hex),
            highest_address: hi.map(hex),
            version: klpsym_loader::release_of(k),
            banner: k
                .facts
                .version
                .clone()
                .filter(|v| v.starts_with("Linux version ")),
            vermagic: k.facts.vermagic.clone(),
            build_id: k.facts.build_id.clone(),
            arch: k.facts.arch.clone(),
            format: k.facts.format.clone(),
            facts: k.facts.facts.iter().cloned().collect(),
            notes: k.facts.notes.clone(),
            objects: t
                .objects()
                .iter()
                .map(|o| ObjectJson {
                    name: o.name.clone(),
                    kind: o.kind,
                    symbols: o.symbol_count,
                    relative: o.relative,
                })
                .collect(),
            read_ms: k.read_time.as_secs_f64() * 1e3,
            cache_entry: k.cached.as_ref().map(|p| p.display().to_string()),
            parse_ms: k.parse_time.as_secs_f64() * 1e3,
            index_ms,
        });
    }
    if args.source.json {
        if infos.len() == 1 {
            print_json(&infos[0])?;
        } else {
            print_json(&infos)?;
        }
        return Ok(Outcome::Ok);
    }
    for i in &infos {
        println!("source:          {}", i.kernel);
        println!("kind:            {}", i.kind);
        if let Some(f) = &i.format {
            println!("format:          {f}");
        }
        if let Some(v) = &i.version {
            println!("version:         {v}");
        }
        if let Some(b) = &i.banner {
            println!("banner:          {b}");
        }
        if let Some(v) = &i.vermagic {
            println!("vermagic:        {}", v.trim_end());
        }
        if let Some(b) = &i.build_id {
            println!("build id:        {b}");
        }
        if let Some(a) = &i.arch {
            println!("arch:            {a}");
        }
        println!("size:            {} bytes", i.bytes);
        println!(
            "symbols:         {} ({} distinct names)",
            i.symbols, i.distinct_names
        );
        println!(
            "addresses:       {}",
            if i.addresses_hidden {
                "hidden (all zero; see the warning above)".to_string()
            } else {
                format!(
                    "{} .. {}",
                    i.lowest_address.as_deref().unwrap_or("-"),
                    i.highest_address.as_deref().unwrap_or("-")
                )
            }
        );
        let mods = i
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Module)
            .count();
        let pseudo: Vec<&str> = i
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Pseudo)
            .map(|o| o.name.as_str())
            .collect();
        println!(
            "objects:         vmlinux ({} symbols), {mods} module(s){}",
            i.objects[0].symbols,
            if pseudo.is_empty() {
                String::new()
            } else {
                format!(", pseudo: {}", pseudo.join(" "))
            }
        );
        for (k, v) in &i.facts {
            println!("{:<16} {v}", format!("{k}:"));
        }
        for n in &i.notes {
            println!("note:            {n}");
        }
        if args.objects {
            for o in &i.objects {
                println!(
                    "  {:<24} {:>7} symbols{}",
                    o.name,
                    o.symbols,
                    if o.relative {
                        " (unplaced: +0x... offsets in their sections)"
                    } else {
                        ""
                    }
                );
            }
        }
        println!(
            "time:            read {:.1} ms, parse/decode {:.1} ms, indexes {:.1} ms{}",
            i.read_ms,
            i.parse_ms,
            i.index_ms,
            if i.cache_entry.is_some() {
                " (table from the cache)"
            } else {
                ""
            }
        );
    }
    Ok(Outcome::Ok)
}
