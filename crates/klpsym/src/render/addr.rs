//! Addresses: `INPUT => %pS` lines, as `klpsym addr` prints them.

use std::io::Write;

use super::Result;
use crate::symbolize::AddrAnswer;

/// One query's line: `INPUT => name+0xoff/0xsize [module]` (what %pS prints; the number
/// where no symbol is, with why in parentheses when `explain`; where the line's own
/// `name+0xoff` disagrees with its `[<address>]`, that flagged in parentheses); for `name+0xoff` input a line
/// per address it stands for; for an input that could not be read, the line marked in place
/// (`INPUT => ?? (error)`), so a pasted trace keeps every line in its order.
pub fn addr_line(out: &mut dyn Write, a: &AddrAnswer, explain: bool) -> Result {
    if let Some(e) = &a.error {
        writeln!(out, "{} => ?? ({e})", a.input)?;
        return Ok(());
    }
    if !a.addresses.is_empty() {
        return resolved_lines(out, a);
    }
    // A module's frame without a placement: no address, its place from the debug file.
    if a.reason == Some(crate::NoSymbol::ModuleNotPlaced) {
        let (name, off) = (a.symbol.as_deref().unwrap_or("??"), a.offset.unwrap_or(0));
        write!(out, "{} => {name}+{off:#x}", a.input)?;
        if let Some(size) = a.size {
            write!(out, "/{size:#x}")?;
        }
        write!(
            out,
            " [{}] (module not placed: no address",
            a.module.as_deref().unwrap_or("??")
        )?;
        if let (Some(why), true) = (&a.explanation, explain) {
            write!(out, "; {why}")?;
        }
        writeln!(out, ")")?;
        return source_lines(out, &a.source);
    }
    let Some(text) = &a.text else {
        return Ok(());
    };
    write!(out, "{} => {text}", a.input)?;
    if let (Some(why), true) = (&a.explanation, explain) {
        write!(out, " ({why})")?;
    }
    // Flagged whether or not `explain`: the paste is not what this kernel prints there.
    if let Some(said) = &a.line_says {
        write!(out, " (the line says {said}; the address is answered)")?;
    }
    writeln!(out)?;
    source_lines(out, &a.source)
}

/// A place's `file:line` and inline chain under its line, indented, each as `addr2line -f -i
/// -p` (and `scripts/faddr2line`) prints it: `func at file:line`, then `(inlined by) caller
/// at file:line` for each function it was inlined into.
pub fn source_lines(out: &mut dyn Write, frames: &[crate::SourceFrame]) -> Result {
    for (i, f) in frames.iter().enumerate() {
        if i == 0 {
            writeln!(out, "    {f}")?;
        } else {
            writeln!(out, "    (inlined by) {f}")?;
        }
    }
    Ok(())
}

/// The addresses a `name+0xoff` input stands for, one line each with its object.
pub fn resolved_lines(out: &mut dyn Write, a: &AddrAnswer) -> Result {
    let many = match a.addresses.as_slice() {
        [first, _, ..] => format!(
            "  ({} definitions of {}: add /0xSIZE or [module] to tell them apart)",
            a.addresses.len(),
            first.name
        ),
        _ => String::new(),
    };
    for r in &a.addresses {
        // A size the name has nowhere here: the address is answered, the difference said.
        let differs = match (a.line_size, r.size) {
            (Some(said), Some(here)) => format!(
                "  (the line says size {said:#x}; {} is {here:#x} here: another build?)",
                r.name
            ),
            _ => String::new(),
        };
        writeln!(
            out,
            "{} => {:016x} [{}]{many}{differs}",
            a.input, r.address, r.object
        )?;
    }
    // The place of the one address it stands for (as faddr2line answers `func+0xoff`).
    if a.addresses.len() == 1 {
        source_lines(out, &a.source)?;
    }
    Ok(())
}

/// A trace as given, every stack entry followed by ` => ` and its answer (`answers`: one per
/// query of the trace, in order, as [`crate::Kernel::answer_trace`] gives them).
pub fn trace(
    out: &mut dyn Write,
    trace: &crate::trace::Trace,
    answers: &[AddrAnswer],
    explain: bool,
) -> Result {
    let mut answers = answers.iter();
    for l in &trace.lines {
        match l {
            crate::trace::TraceLine::Query { .. } => {
                if let Some(a) = answers.next() {
                    addr_line(out, a, explain)?;
                }
            }
            crate::trace::TraceLine::Text(t) => writeln!(out, "{t}")?,
        }
    }
    Ok(())
}
