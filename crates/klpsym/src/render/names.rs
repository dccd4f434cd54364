//! Names: definitions and positions (`sympos`, `lookup`), searches and drift.

use std::io::Write;

use klpsym_core::LookupVerdict;

use super::Result;
use crate::drift::{Drift, DriftStatus};
use crate::query::{Candidate, Definitions, LookupAnswer, SearchAnswer};

/// The line explaining `+0x...` addresses, printed under a table that has them.
pub const UNPLACED_NOTE: &str = "+0x...: an unplaced module symbol (read from its .ko): an offset in its section, no load address; place it with --loaded NAME --place-from KALLSYMS";

/// Candidates as an aligned table (with a FILE column when any has a file).
pub fn candidates(out: &mut dyn Write, cands: &[Candidate], indent: &str) -> Result {
    let files = cands.iter().any(|c| c.file.is_some());
    writeln!(
        out,
        "{indent}{:>4}  {:<18}  TYPE  {:<10}  {:<10}{}",
        "POS",
        "ADDRESS",
        "SIZE",
        "OBJECT",
        if files { "  FILE" } else { "" }
    )?;
    for c in cands {
        writeln!(
            out,
            "{indent}{:>4}  {:<18}  {:<4}  {:<10}  {:<10}{}",
            c.position,
            c.address_text(),
            c.kind,
            c.size.map_or("?".to_string(), |s| format!("{s:#x}")),
            c.object,
            match (c.file_text(), files) {
                (Some(f), _) => format!("  {f}"),
                (None, true) => "  ?".to_string(),
                (None, false) => String::new(),
            }
        )?;
    }
    if cands.iter().any(|c| c.unplaced) {
        writeln!(out, "{indent}{UNPLACED_NOTE}")?;
    }
    Ok(())
}

/// The compiler-made variants of a missing name, one per line.
pub fn variants(out: &mut dyn Write, variants: &[String], indent: &str) -> Result {
    for v in variants {
        writeln!(
            out,
            "{indent}note: compiler-made variant: {v} (a patch names it with its suffix)"
        )?;
    }
    Ok(())
}

/// `lookup`'s answers, one per kernel (`== KERNEL` heads each when there are several).
pub fn lookup(out: &mut dyn Write, name: &str, answers: &[LookupAnswer]) -> Result {
    let many = answers.len() > 1;
    for r in answers {
        if many {
            writeln!(out, "== {}", r.kernel)?;
        }
        let object = r.object.as_str();
        if r.verdict == LookupVerdict::Found {
            let address = match r.address {
                None => "(hidden)".to_string(),
                Some(a) if r.unplaced => format!("+{a:#x}"),
                Some(a) => format!("{a:016x}"),
            };
            writeln!(
                out,
                "{address} {} {name}{} (position {} of {} in {object}{})",
                r.kind.unwrap_or('?'),
                if object == "vmlinux" {
                    String::new()
                } else {
                    format!("\t[{object}]")
                },
                r.position.unwrap_or(0),
                r.candidates.len(),
                r.size.map_or(String::new(), |s| format!(", size {s:#x}")),
            )?;
            if r.unplaced {
                writeln!(out, "{UNPLACED_NOTE}")?;
            }
            continue;
        }
        writeln!(
            out,
            "{}",
            r.message
                .as_deref()
                .or(r.file_note.as_deref())
                .unwrap_or("livepatch: (no message)")
        )?;
        if !r.object_loaded {
            writeln!(
                out,
                "  note: object '{object}' is not in this symbol table (module not loaded?)"
            )?;
        } else if r.candidates.is_empty() {
            writeln!(out, "  note: no symbol named '{name}' in {object}")?;
            variants(out, &r.variants, "  ")?;
        } else {
            writeln!(
                out,
                "  {name} has {} definition(s) in {object}; choose one with --sympos N (the patch's old_sympos):",
                r.candidates.len()
            )?;
            candidates(out, &r.candidates, "  ")?;
        }
    }
    Ok(())
}

/// `sympos`'s answers: every definition per kernel; `object` and `file` as asked.
pub fn sympos(
    out: &mut dyn Write,
    name: &str,
    object: Option<&str>,
    file: Option<&str>,
    results: &[Definitions],
) -> Result {
    let want = object.map(klpsym_core::normalize_module_name);
    let many = results.len() > 1;
    for r in results {
        if many {
            writeln!(out, "== {}", r.kernel)?;
        }
        if let (true, Some(f)) = (r.files_unknown, file) {
            writeln!(
                out,
                "{name}: {} definition(s); which are in {f} is not known here: this kernel names no source files",
                r.all
            )?;
            continue;
        }
        if r.candidates.is_empty() {
            writeln!(
                out,
                "no symbol named '{name}'{}{}",
                want.as_ref().map_or(String::new(), |w| format!(" in {w}")),
                file.map_or(String::new(), |f| format!(" defined in {f}"))
            )?;
            variants(out, &r.variants, "  ")?;
            continue;
        }
        match file {
            // Every file of the base name is listed: the path itself is not confirmed.
            Some(f) if r.base_name_only => writeln!(
                out,
                "{name}: {} definition(s) in files named {} ({f} itself cannot be confirmed; {} in all; POS is the position among them all)",
                r.count,
                f.rsplit('/').next().unwrap_or(f),
                r.all
            )?,
            Some(f) => writeln!(
                out,
                "{name}: {} definition(s) in {f} ({} in all; POS is the position among them all)",
                r.count, r.all
            )?,
            None => writeln!(out, "{name}: {} definition(s)", r.count)?,
        }
        candidates(out, &r.candidates, "")?;
    }
    Ok(())
}

/// `search`'s answers: `pattern` and whether only duplicated names were asked for.
pub fn search(
    out: &mut dyn Write,
    pattern: &klpsym_core::NamePattern,
    text: &str,
    duplicates: bool,
    results: &[SearchAnswer],
) -> Result {
    let many = results.len() > 1;
    for r in results {
        if many {
            writeln!(out, "== {}", r.kernel)?;
        }
        let width = r
            .matches
            .iter()
            .map(|x| x.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 60);
        writeln!(
            out,
            "{} name(s) matching {} '{text}'{}",
            r.names,
            pattern.mode(),
            if duplicates {
                ", defined more than once"
            } else {
                ""
            }
        )?;
        if !r.matches.is_empty() {
            writeln!(out, "  {:<width$}  {:>5}  OBJECTS", "NAME", "COUNT")?;
        }
        for x in &r.matches {
            let twins = if x.twins.is_empty() {
                String::new()
            } else {
                format!("  (+ {})", x.twins.join(" "))
            };
            writeln!(
                out,
                "  {:<width$}  {:>5}  {}{twins}",
                x.name,
                x.count,
                x.objects.join(" ")
            )?;
        }
        if r.names > r.matches.len() {
            writeln!(
                out,
                "  ... {} more (--limit N shows more)",
                r.names - r.matches.len()
            )?;
        }
    }
    Ok(())
}

/// `drift`'s answers: each name's definitions on two builds, row by row.
pub fn drift(out: &mut dyn Write, results: &[Drift]) -> Result {
    for d in results {
        writeln!(
            out,
            "{} in {}: {} definition(s) on {}, {} on {}",
            d.name,
            d.object,
            d.from.len(),
            d.from_kernel,
            d.to.len(),
            d.to_kernel
        )?;
        if d.rows.is_empty() {
            continue;
        }
        writeln!(
            out,
            "  FROM    TO  STATUS   IDENTITY (source file, copy in it)"
        )?;
        for r in &d.rows {
            let pos = |p: Option<u64>| p.map_or("-".to_string(), |p| p.to_string());
            let status = match r.status {
                DriftStatus::Same => "same",
                DriftStatus::Moved => "MOVED",
                DriftStatus::Gone => "GONE",
                DriftStatus::New => "NEW",
                DriftStatus::Unknown => "unknown",
            };
            writeln!(
                out,
                "  {:>4}  {:>4}  {:<7}  {}",
                pos(r.from_position),
                pos(r.to_position),
                status,
                r.identity
                    .as_ref()
                    .map_or("no source file known".to_string(), |i| i.to_string())
            )?;
        }
        if d.rows.iter().any(|r| r.status == DriftStatus::Unknown) {
            writeln!(
                out,
                "  unknown: a build without source files (an image's kallsyms names none; give its -dbg package or vmlinux)"
            )?;
        }
    }
    Ok(())
}
