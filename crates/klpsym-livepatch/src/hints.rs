//! What to tell an author next to a failed lookup: candidates and likely causes.

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::SymbolTable;

pub(crate) use klpsym_core::candidates;

/// Where else the name lives, or compiler-made variants of it (one lookup in the table's stem
/// index, built once with a tick per symbol).
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
    let variants = table.variants_of_with(name, resched)?;
    if let Some(v) = variants_list(table, variants.into_iter().map(|id| table.symbol(id))) {
        return Ok(v);
    }
    if object != "vmlinux" && table.object_by_name(object).is_none() {
        return Ok(format!("module {object} is not loaded on the target"));
    }
    Ok(format!(
        "no symbol '{name}' in {object}: renamed, inlined, or not in kallsyms on this kernel"
    ))
}

/// `not found, but compiler-made variants exist: foo.isra.0 (vmlinux), foo.cold (vmlinux,
/// ext4)` — the variants of `name` with the objects that define them (at most 8 names), or
/// `None` when there are none.
pub(crate) fn variants_hint(table: &SymbolTable, name: &str) -> Option<String> {
    variants_list(table, table.variants_of(name))
}

/// The hint for `variants` of one name, found by the caller.
fn variants_list<'t>(
    table: &'t SymbolTable,
    variants: impl Iterator<Item = klpsym_core::Symbol<'t>>,
) -> Option<String> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for s in variants {
        let obj = table.object_info(s.object).name.clone();
        if let Some(i) = found.iter().position(|(n, _)| n == s.name) {
            if !found[i].1.contains(&obj) {
                found[i].1.push(obj);
            }
        } else if found.len() < 8 {
            found.push((s.name.to_string(), vec![obj]));
        }
    }
    (!found.is_empty()).then(|| {
        let list: Vec<String> = found
            .iter()
            .map(|(n, o)| format!("{n} ({})", o.join(", ")))
            .collect();
        format!(
            "not found, but compiler-made variants exist: {} — the compiler renamed or split it; patch the variant",
            list.join(", ")
        )
    })
}
