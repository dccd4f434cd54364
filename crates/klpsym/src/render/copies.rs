//! Copies of functions: where a function's code lives (`copies`), and a check's coverage of
//! every function a patch replaces.

use std::io::Write;

use klpsym_core::{hex, Resched};

use super::Result;
use crate::check::{CopyAsBuilt, CopyStatus, KernelCheck};
use crate::copies::{Copies, Copy, CopyKind};

/// The headline of a patch that leaves copies of what it replaces running the old code.
pub(super) fn partial_coverage_line(c: &KernelCheck) -> String {
    let missed: Vec<String> = c
        .not_replaced()
        .map(|(f, x)| format!("{} {}", f.name, where_(&x.copy)))
        .collect();
    format!(
        "PARTIAL COVERAGE: the kernel accepts the patch, and {} cop{} of the functions it replaces keep{} the old code: {}",
        missed.len(),
        if missed.len() == 1 { "y" } else { "ies" },
        if missed.len() == 1 { "s" } else { "" },
        missed.join("; ")
    )
}

/// `inlined into caller,1`, `cloned as foo.isra.0,1`, `out of line as foo,1`.
fn where_(c: &Copy) -> String {
    let target = c.target().unwrap_or_else(|| "?".to_string());
    match c.kind {
        CopyKind::OutOfLine => format!("out of line as {target}"),
        CopyKind::Clone => format!("cloned as {target}"),
        CopyKind::Inlined => format!("inlined into {target}"),
        CopyKind::ByName => format!("maybe copied as {target}"),
    }
}

/// One copy's line: what, where, the details that tell it apart.
fn copy_line(c: &Copy) -> String {
    let kind = match c.kind {
        CopyKind::OutOfLine => "out of line",
        CopyKind::Clone => "clone",
        CopyKind::Inlined => "inlined into",
        CopyKind::ByName => "by name only",
    };
    let mut s = format!(
        "{kind:<13} {}",
        c.target().unwrap_or_else(|| "?".to_string())
    );
    if let (Some(o), CopyKind::Inlined) = (c.offset, c.kind) {
        s.push_str(&format!("+{o:#x}"));
    }
    if let Some(a) = c.address {
        s.push_str(&format!("  {}", hex(a)));
    }
    if let Some(sec) = &c.section {
        s.push_str(&format!("  [{sec}]"));
    }
    if let Some(site) = &c.call_site {
        s.push_str(&format!("  called at {site}"));
    }
    if !c.through.is_empty() {
        s.push_str(&format!("  through {}", c.through.join(" <- ")));
    }
    if !c.parts.is_empty() {
        s.push_str(&format!("  (also {})", c.parts.join(", ")));
    }
    if c.init {
        s.push_str("  (init code)");
    }
    s
}

/// A check's coverage: every copy of each replaced function and whether the patch replaces
/// it; nothing when no function was looked at.
pub(super) fn coverage(out: &mut dyn Write, c: &KernelCheck, rs: &mut Resched) -> Result {
    if c.coverage.is_empty() {
        return Ok(());
    }
    if c.coverage.iter().all(|f| f.unchecked.is_some()) {
        // Said once per reason, with the warnings (`NOT CHECKED: coverage of ...`).
        for u in c.coverage_unchecked() {
            writeln!(out, "coverage: not checked: {u}")?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "coverage (every copy of each replaced function's code, from DWARF; a copy not replaced runs the old code):"
    )?;
    for f in c.coverage.iter().filter(|f| f.unchecked.is_some()) {
        writeln!(
            out,
            "  {}: not checked: {}",
            f.label(),
            f.unchecked.as_deref().unwrap_or_default()
        )?;
    }
    for f in &c.coverage {
        rs.tick()?;
        if f.unchecked.is_some() {
            continue;
        }
        let missed = f.not_replaced().count();
        writeln!(
            out,
            "  {} ({}): {} cop{}, {}",
            f.label(),
            f.definition.as_deref().unwrap_or("?"),
            f.copies.len(),
            if f.copies.len() == 1 { "y" } else { "ies" },
            if missed == 0 {
                "all replaced".to_string()
            } else {
                format!("{missed} NOT REPLACED")
            }
        )?;
        for x in &f.copies {
            rs.tick()?;
            let status = match x.status {
                CopyStatus::Replaced => format!(
                    "replaced{}",
                    x.replaced_by
                        .as_ref()
                        .map_or(String::new(), |r| format!(" ({r})"))
                ),
                CopyStatus::NotReplaced => format!(
                    "NOT REPLACED: patch {}",
                    x.patch.as_deref().unwrap_or("the function holding it")
                ),
                CopyStatus::Init => "init code, freed after start: nothing runs it".to_string(),
                CopyStatus::Unknown => "DWARF ties it to no function: it may be a copy".to_string(),
            };
            let built = match x.as_built {
                Some(CopyAsBuilt::New) => "  (NEW: not on the built-for kernel)",
                _ => "",
            };
            writeln!(out, "    {}  {status}{built}", copy_line(&x.copy))?;
        }
        for g in &f.gone {
            writeln!(out, "    {}  (only on the built-for kernel)", copy_line(g))?;
        }
        for i in &f.incomplete {
            writeln!(out, "    may be incomplete: {i}")?;
        }
    }
    Ok(())
}

/// `copies`' answers, one per kernel (`== KERNEL` heads each when there are several).
pub fn copies(out: &mut dyn Write, answers: &[Copies]) -> Result {
    for a in answers {
        if answers.len() > 1 {
            writeln!(out, "== {}", a.kernel)?;
        }
        let file = a
            .file
            .as_ref()
            .map_or(String::new(), |f| format!(" in {f}"));
        writeln!(
            out,
            "{}: {} function(s) of that name{file} in {}",
            a.name,
            a.definitions.len(),
            a.object
        )?;
        for d in &a.definitions {
            let running = d.copies.iter().filter(|c| !c.init).count();
            // Its own out-of-line copy: what a patch replacing it binds.
            let own = d.copies.iter().any(|c| {
                c.kind == CopyKind::OutOfLine && c.symbol.as_deref() == Some(d.name.as_str())
            });
            writeln!(
                out,
                "  {} ({}): {} cop{}",
                d.name,
                d.file_text(),
                d.copies.len(),
                if d.copies.len() == 1 { "y" } else { "ies" },
            )?;
            if own && running > 1 {
                writeln!(
                    out,
                    "    a patch replacing {} alone leaves {} of them running the old code",
                    d.name,
                    running - 1
                )?;
            } else if !own && running > 0 {
                writeln!(
                    out,
                    "    no out-of-line {} here: a patch replaces its copies through the functions holding them",
                    d.name
                )?;
            }
            for c in &d.copies {
                writeln!(out, "    {}", copy_line(c))?;
            }
            if d.copies.is_empty() {
                writeln!(
                    out,
                    "    no code (every call was removed, or its code was discarded)"
                )?;
            }
            for i in &d.incomplete {
                writeln!(out, "    may be incomplete: {i}")?;
            }
        }
        for c in &a.by_name {
            writeln!(
                out,
                "  {}  (named like a copy; DWARF ties it to no function)",
                copy_line(c)
            )?;
        }
    }
    Ok(())
}
