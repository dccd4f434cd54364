//! Facts: what a source holds, the livepatches loaded, a conversion, the cache.

use std::io::Write;
use std::path::Path;

use klpsym_core::{ObjectKind, Resched};
use klpsym_livepatch::ConvertReport;

use super::Result;
use crate::cache::CacheListing;
use crate::info::KernelInfo;
use crate::status::Status;

/// What one source holds; `objects`: every object with its symbol count too.
pub fn info(out: &mut dyn Write, i: &KernelInfo, objects: bool) -> Result {
    writeln!(out, "source:          {}", i.kernel)?;
    writeln!(out, "kind:            {}", i.kind.as_str())?;
    let optional = [
        ("format", i.format.as_deref()),
        ("version", i.version.as_deref()),
        ("banner", i.banner.as_deref()),
        ("vermagic", i.vermagic.as_deref().map(str::trim_end)),
        ("build id", i.build_id.as_deref()),
        ("arch", i.arch.as_deref()),
    ];
    for (label, v) in optional {
        if let Some(v) = v {
            writeln!(out, "{:<16} {v}", format!("{label}:"))?;
        }
    }
    writeln!(out, "size:            {} bytes", i.bytes)?;
    writeln!(
        out,
        "symbols:         {} ({} distinct names)",
        i.symbols, i.distinct_names
    )?;
    let addresses = if i.addresses_hidden {
        "hidden (all zero; see the warning above)".to_string()
    } else {
        let h = |a: Option<u64>| a.map_or("-".to_string(), klpsym_core::hex);
        format!("{} .. {}", h(i.lowest_address), h(i.highest_address))
    };
    writeln!(out, "addresses:       {addresses}")?;
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
    writeln!(
        out,
        "objects:         vmlinux ({} symbols), {mods} module(s){}",
        i.objects.first().map_or(0, |o| o.symbols),
        if pseudo.is_empty() {
            String::new()
        } else {
            format!(", pseudo: {}", pseudo.join(" "))
        }
    )?;
    for (k, v) in &i.facts {
        writeln!(out, "{:<16} {v}", format!("{k}:"))?;
    }
    for n in &i.notes {
        writeln!(out, "note:            {n}")?;
    }
    if objects {
        for o in &i.objects {
            writeln!(
                out,
                "  {:<24} {:>7} symbols{}",
                o.name,
                o.symbols,
                if o.unplaced {
                    " (unplaced: +0x... offsets in their sections)"
                } else {
                    ""
                }
            )?;
        }
    }
    writeln!(
        out,
        "time:            read {:.1} ms, parse/decode {:.1} ms, indexes {:.1} ms{}",
        i.read_ms,
        i.parse_ms,
        i.index_ms,
        if i.cache_entry.is_some() {
            " (table from the cache)"
        } else {
            ""
        }
    )?;
    Ok(())
}

/// The livepatches loaded, each function with where it resolves.
pub fn status(out: &mut dyn Write, s: &Status) -> Result {
    if s.patches.is_empty() {
        writeln!(out, "no livepatch loaded")?;
    }
    for p in &s.patches {
        let b = |v: Option<bool>| v.map_or("?", |x| if x { "1" } else { "0" });
        writeln!(
            out,
            "{}  enabled={} transition={}",
            p.name,
            b(p.enabled),
            b(p.transition)
        )?;
        for o in &p.objects {
            for f in &o.funcs {
                let what = if !o.loaded {
                    "module not loaded".to_string()
                } else {
                    match (f.address, &f.message) {
                        (Some(a), _) => klpsym_core::hex(a),
                        (None, Some(m)) => format!("livepatch: {m}"),
                        (None, None) => "(address hidden)".to_string(),
                    }
                };
                let entry = format!("{},{}", f.name, f.sympos);
                writeln!(out, "  {:<10} {entry:<32} -> {what}", o.name)?;
            }
        }
    }
    Ok(())
}

/// What a conversion did, written to `output`.
pub fn convert_report(
    out: &mut dyn Write,
    r: &ConvertReport,
    output: &Path,
    rs: &mut Resched,
) -> Result {
    if r.unchanged {
        writeln!(
            out,
            "nothing to convert: {} copied unchanged",
            output.display()
        )?;
        return Ok(());
    }
    for c in &r.conversions {
        rs.tick()?;
        let addr = c
            .address
            .map_or_else(|| "address hidden".to_string(), klpsym_core::hex);
        let n = c.relocations;
        writeln!(
            out,
            "{:<24} -> {:<48} ({}{addr}, {n} relocation{})",
            c.name,
            c.klp_name,
            if c.pinned { "pinned, " } else { "" },
            if n == 1 { "" } else { "s" }
        )?;
    }
    for s in &r.sections_created {
        writeln!(out, "created {s}")?;
    }
    writeln!(out, "wrote {}", output.display())?;
    Ok(())
}

/// The cache's entries: the folder's size and bound, then each entry with its size, its
/// input, its kind and whether it is live.
pub fn cache_listing(out: &mut dyn Write, l: &CacheListing) -> Result {
    let kept = &l.entries;
    let entries = |n: usize| if n == 1 { "y" } else { "ies" };
    let stale = kept.iter().filter(|e| !e.live).count();
    writeln!(
        out,
        "{}: {} entr{} ({} stale), {:.1} MB of {:.1} MB",
        l.dir,
        kept.len(),
        entries(kept.len()),
        stale,
        l.bytes as f64 / 1e6,
        l.max_bytes as f64 / 1e6,
    )?;
    for e in kept {
        let source = match (&e.source, e.current) {
            (Some(s), _) => s.as_str(),
            (None, false) if e.kind == "kernel" => "(an entry of another cache format)",
            (None, _) => "",
        };
        let mut what = vec![e.kind.to_string()];
        if e.debug_bytes > 0 {
            what.push(format!(
                "{:.1} MB of debug sections",
                e.debug_bytes as f64 / 1e6
            ));
        }
        if e.inputs.len() > 1 {
            what.push(format!("{} inputs", e.inputs.len()));
        }
        writeln!(
            out,
            "  {:>8.1} MB  {:<5}  {source} ({})",
            e.bytes as f64 / 1e6,
            if e.live { "live" } else { "stale" },
            what.join(", "),
        )?;
    }
    if !l.removed.is_empty() {
        writeln!(
            out,
            "removed {} entr{}",
            l.removed.len(),
            entries(l.removed.len())
        )?;
    }
    Ok(())
}
