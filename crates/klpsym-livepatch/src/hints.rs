//! What to tell an author next to a failed lookup: candidates and likely causes.

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::SymbolTable;

use crate::report::Candidate;

pub(crate) fn candidates(table: &SymbolTable, ids: &[klpsym_core::SymbolId]) -> Vec<Candidate> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let s = table.symbol(id);
            Candidate {
                position: i as u64 + 1,
                object: table.object_info(s.object).name.clone(),
                address: (!table.addresses_hidden()).then_some(s.addr),
                unplaced: table.object_info(s.object).relative,
                kind: s.kind,
            }
        })
        .collect()
}

/// Where else the name lives, or compiler-suffixed variants of it. Looking for the variants
/// walks the whole table, with a tick per symbol.
pub(crate) fn not_found_hint(
    table: &SymbolTable,
    name: &str,
    object: &str,
    resched: &mut Resched,
) -> Result<String, Cancelled> {
    let mut elsewhere: Vec<String> = table
        .by_name(name)
        .map(|s| table.object_info(s.object).name.clone())
        .filter(|o| o != object)
        .collect();
    elsewhere.dedup();
    if !elsewhere.is_empty() {
        return Ok(format!(
            "'{name}' is not in {object} but in {}: wrong object?",
            elsewhere.join(", ")
        ));
    }
    let prefix = format!("{name}.");
    let mut suffixed: Vec<&str> = Vec::new();
    for s in table.iter() {
        resched.tick()?;
        if s.name.starts_with(&prefix) {
            suffixed.push(s.name);
            if suffixed.len() == 5 {
                break;
            }
        }
    }
    if !suffixed.is_empty() {
        return Ok(format!(
            "not found, but compiler-suffixed variants exist: {}",
            suffixed.join(", ")
        ));
    }
    if object != "vmlinux" && table.object_by_name(object).is_none() {
        return Ok(format!("module {object} is not loaded on the target"));
    }
    Ok(format!(
        "no symbol '{name}' in {object}: renamed, inlined, or not in kallsyms on this kernel"
    ))
}
