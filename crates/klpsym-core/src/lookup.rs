//! `klp_find_object_symbol()`: the kernel's livepatch symbol lookup, reproduced exactly.
//!
//! Semantics (kernel/livepatch/core.c, `klp_find_callback` / `klp_match_callback`):
//! the kernel walks the object's symbols in kallsyms order; every exact name match records its
//! address and increments `count`; the walk stops at the `sympos`-th match, or — when `sympos`
//! is 0 — at the second match. Then, in this order:
//! 1. no address recorded (a symbol at address 0 counts as missing):
//!    `symbol '%s' not found in symbol table`. The rule is about load addresses: a symbol of
//!    a module read from its `.ko` and not placed (section-relative addresses, where the
//!    first function of a section sits at offset 0) has a real, non-zero address once the
//!    module loads, so it counts as present.
//! 2. `count > 1 && sympos == 0`:
//!    `unresolvable ambiguity for symbol '%s' in object '%s'` — objname printed raw, so
//!    vmlinux (a NULL objname) reads `'(null)'`
//! 3. `sympos > 0 && count != sympos`:
//!    `symbol position %lu for symbol '%s' in object '%s' not found` — vmlinux reads
//!    `'vmlinux'` here.

use serde::{Deserialize, Serialize};

use crate::object::{normalize_module_name, ObjectId};
use crate::table::{SymbolId, SymbolTable};

/// What to look up: `objname` (None or `vmlinux` for the kernel image), name and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupRequest<'a> {
    /// The symbol name, compared byte for byte (`strcmp`).
    pub name: &'a str,
    /// The object: `None` (or `vmlinux`) for the kernel image, else a module name in any
    /// spelling (`nf-tables`, `nf_tables.ko`); it is normalized as the kernel spells it.
    pub object: Option<&'a str>,
    /// `old_sympos`: 0 = must be unique, N = the N-th match in kallsyms order.
    pub sympos: u64,
}

/// The kernel's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LookupVerdict {
    /// The kernel would use `address`.
    Found,
    /// `symbol '%s' not found in symbol table`.
    NotFound,
    /// `unresolvable ambiguity for symbol '%s' in object '%s'`.
    Ambiguous,
    /// `symbol position %lu for symbol '%s' in object '%s' not found`.
    PositionNotFound,
}

/// The outcome of one lookup: the kernel's verdict and message, plus what a user needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupOutcome {
    /// The verdict.
    pub verdict: LookupVerdict,
    /// The symbol the kernel would resolve to (Found only).
    pub symbol: Option<SymbolId>,
    /// Its address; `None` when the source hides addresses.
    pub address: Option<u64>,
    /// The normalized object name (`vmlinux` for the kernel image).
    pub object: String,
    /// The object's id in the table, when the table has that object.
    pub object_id: Option<ObjectId>,
    /// The kernel's `count` when its walk stopped.
    pub count: u64,
    /// Every match in the object, in kernel order (position = index + 1): the candidates a
    /// patch author chooses `old_sympos` from. Goes past where the kernel's walk stopped.
    pub candidates: Vec<SymbolId>,
    /// The kernel's error message, without the `livepatch: ` prefix; `None` when found.
    pub message: Option<String>,
}

/// Runs `klp_find_object_symbol(objname, name, sympos)` against `table`.
///
/// When the table's addresses are hidden (kptr_restrict), a match counts as an address
/// recorded, so name-only answers (positions, ambiguity) stay right; `address` is then `None`.
pub fn find_object_symbol(table: &SymbolTable, req: &LookupRequest<'_>) -> LookupOutcome {
    let object = match req.object {
        None => "vmlinux".to_string(),
        Some(o) => normalize_module_name(o),
    };
    let is_vmlinux = object == "vmlinux";
    let object_id = if is_vmlinux {
        Some(ObjectId::VMLINUX)
    } else {
        table.object_by_name(&object)
    };
    let hidden = table.addresses_hidden();
    let relative = object_id.is_some_and(|o| table.object_info(o).unplaced);
    let candidates: Vec<SymbolId> = match object_id {
        Some(oid) => table.by_name_in(req.name, oid).map(|s| s.id).collect(),
        None => Vec::new(),
    };

    // The kernel's walk, verbatim in effect.
    let mut count: u64 = 0;
    let mut recorded: Option<SymbolId> = None;
    let mut addr: u64 = 0;
    for &id in &candidates {
        let s = table.symbol(id);
        addr = s.addr;
        recorded = Some(id);
        count += 1;
        if (req.sympos != 0 && count == req.sympos) || (req.sympos == 0 && count > 1) {
            break;
        }
    }
    let address_recorded = recorded.is_some() && (hidden || relative || addr != 0);

    let (verdict, message) = if !address_recorded {
        (
            LookupVerdict::NotFound,
            Some(format!("symbol '{}' not found in symbol table", req.name)),
        )
    } else if count > 1 && req.sympos == 0 {
        let raw = if is_vmlinux {
            "(null)"
        } else {
            object.as_str()
        };
        (
            LookupVerdict::Ambiguous,
            Some(format!(
                "unresolvable ambiguity for symbol '{}' in object '{}'",
                req.name, raw
            )),
        )
    } else if req.sympos > 0 && count != req.sympos {
        (
            LookupVerdict::PositionNotFound,
            Some(format!(
                "symbol position {} for symbol '{}' in object '{}' not found",
                req.sympos, req.name, object
            )),
        )
    } else {
        (LookupVerdict::Found, None)
    };
    let found = verdict == LookupVerdict::Found;
    LookupOutcome {
        verdict,
        symbol: if found { recorded } else { None },
        address: if found && !hidden { Some(addr) } else { None },
        object,
        object_id,
        count,
        candidates,
        message,
    }
}

/// The kernel's walk without the extras: no allocation, the object already resolved to its id.
/// Returns the verdict and, when found, the symbol. For resolving many symbols of a patch
/// (`klpsym check`, benchmarks); [`find_object_symbol`] adds candidates and messages.
#[inline]
pub fn resolve_in_object(
    table: &SymbolTable,
    name: &str,
    object: ObjectId,
    sympos: u64,
) -> (LookupVerdict, Option<SymbolId>) {
    // Section-relative offsets (a module not placed) count as present even at 0: see the
    // module documentation.
    let present_at_zero = table.addresses_hidden() || table.object_info(object).unplaced;
    let mut count: u64 = 0;
    let mut last: Option<(SymbolId, u64)> = None;
    // Records only: a name is read once per probe of the index, never per match.
    let recs = table.records();
    for i in table.ids_by_name_in(name, object) {
        last = Some((SymbolId(i), recs[i as usize].addr));
        count += 1;
        if (sympos != 0 && count == sympos) || (sympos == 0 && count > 1) {
            break;
        }
    }
    match last {
        Some((_, addr)) if !present_at_zero && addr == 0 => (LookupVerdict::NotFound, None),
        None => (LookupVerdict::NotFound, None),
        Some(_) if count > 1 && sympos == 0 => (LookupVerdict::Ambiguous, None),
        Some(_) if sympos > 0 && count != sympos => (LookupVerdict::PositionNotFound, None),
        Some((id, _)) => (LookupVerdict::Found, Some(id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectKind, SymbolTableBuilder};

    fn table() -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        let v = ObjectId::VMLINUX;
        b.push(v, 0x10, b't', "init_once").unwrap();
        b.push(v, 0x20, b't', "unique").unwrap();
        b.push(v, 0x30, b't', "init_once").unwrap();
        b.push(v, 0x40, b't', "init_once").unwrap();
        b.push(v, 0, b'A', "at_zero").unwrap();
        let m = b.object("nf_tables", ObjectKind::Module);
        b.push(m, 0x900, b't', "init_once").unwrap();
        b.push(m, 0x910, b't', "helper").unwrap();
        b.push(m, 0x920, b't', "helper").unwrap();
        b.build()
    }

    fn look(t: &SymbolTable, name: &str, object: Option<&str>, sympos: u64) -> LookupOutcome {
        find_object_symbol(
            t,
            &LookupRequest {
                name,
                object,
                sympos,
            },
        )
    }

    #[test]
    fn unique_and_positions() {
        let t = table();
        let o = look(&t, "unique", None, 0);
        assert_eq!((o.verdict, o.address), (LookupVerdict::Found, Some(0x20)));
        // sympos 1 on a unique symbol is accepted
        assert_eq!(look(&t, "unique", None, 1).verdict, LookupVerdict::Found);
        let o = look(&t, "init_once", None, 2);
        assert_eq!(
            (o.verdict, o.address, o.count),
            (LookupVerdict::Found, Some(0x30), 2)
        );
        assert_eq!(o.candidates.len(), 3);
    }

    #[test]
    fn kernel_messages() {
        let t = table();
        let o = look(&t, "init_once", None, 0);
        assert_eq!(o.verdict, LookupVerdict::Ambiguous);
        assert_eq!(o.count, 2, "the walk stops at the second match");
        assert_eq!(
            o.message.as_deref(),
            Some("unresolvable ambiguity for symbol 'init_once' in object '(null)'")
        );
        let o = look(&t, "helper", Some("nf-tables"), 0);
        assert_eq!(
            o.message.as_deref(),
            Some("unresolvable ambiguity for symbol 'helper' in object 'nf_tables'")
        );
        let o = look(&t, "init_once", Some("vmlinux"), 4);
        assert_eq!(o.verdict, LookupVerdict::PositionNotFound);
        assert_eq!(
            o.message.as_deref(),
            Some("symbol position 4 for symbol 'init_once' in object 'vmlinux' not found")
        );
        let o = look(&t, "nope", None, 0);
        assert_eq!(
            o.message.as_deref(),
            Some("symbol 'nope' not found in symbol table")
        );
        // a real symbol at address 0 counts as missing
        assert_eq!(
            look(&t, "at_zero", None, 0).verdict,
            LookupVerdict::NotFound
        );
        // an object that is not loaded finds nothing
        assert_eq!(
            look(&t, "helper", Some("ext4"), 0).verdict,
            LookupVerdict::NotFound
        );
        // module lookups only see the module
        let o = look(&t, "init_once", Some("nf_tables.ko"), 0);
        assert_eq!((o.verdict, o.address), (LookupVerdict::Found, Some(0x900)));
    }

    #[test]
    fn the_fast_path_agrees_with_the_full_lookup() {
        let t = table();
        for name in ["init_once", "unique", "helper", "at_zero", "nope"] {
            for (obj, oid) in [(None, ObjectId::VMLINUX), (Some("nf_tables"), ObjectId(1))] {
                for sympos in 0..5 {
                    let full = look(&t, name, obj, sympos);
                    let fast = resolve_in_object(&t, name, oid, sympos);
                    assert_eq!((full.verdict, full.symbol), fast, "{name} {obj:?} {sympos}");
                }
            }
        }
    }

    /// Regression: `klpsym check klp_conv_module_before.ko --loaded dummy` (no placement)
    /// refused `numdummies`, at offset 0 of dummy's .bss, as "not found".
    #[test]
    fn unplaced_module_symbol_at_offset_zero_is_present() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x10, b't', "x").unwrap();
        let m = b.object("dummy", ObjectKind::Module);
        b.set_unplaced(m, true);
        b.push(m, 0, b'd', "numdummies").unwrap();
        b.push(m, 0, b't', "dummy_setup").unwrap();
        b.push(m, 0x40, b't', "dummy_setup").unwrap();
        let t = b.build();
        let o = look(&t, "numdummies", Some("dummy"), 0);
        assert_eq!((o.verdict, o.address), (LookupVerdict::Found, Some(0)));
        assert_eq!(look(&t, "dummy_setup", Some("dummy"), 1).address, Some(0));
        assert_eq!(
            look(&t, "dummy_setup", Some("dummy"), 0).verdict,
            LookupVerdict::Ambiguous
        );
        assert_eq!(
            resolve_in_object(&t, "numdummies", m, 0).0,
            LookupVerdict::Found
        );
        // the load-address rule still holds for placed objects
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x10, b't', "x").unwrap();
        let p = b.object("dummy", ObjectKind::Module);
        b.push(p, 0, b'd', "numdummies").unwrap();
        let t = b.build();
        assert_eq!(
            look(&t, "numdummies", Some("dummy"), 0).verdict,
            LookupVerdict::NotFound
        );
        assert_eq!(
            resolve_in_object(&t, "numdummies", p, 0).0,
            LookupVerdict::NotFound
        );
    }

    #[test]
    fn hidden_addresses_still_answer_names() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0, b't', "x").unwrap();
        b.push(ObjectId::VMLINUX, 0, b't', "x").unwrap();
        b.push(ObjectId::VMLINUX, 0, b't', "y").unwrap();
        let t = b.build();
        assert_eq!(look(&t, "x", None, 0).verdict, LookupVerdict::Ambiguous);
        let o = look(&t, "y", None, 0);
        assert_eq!((o.verdict, o.address), (LookupVerdict::Found, None));
        assert_eq!(look(&t, "x", None, 2).verdict, LookupVerdict::Found);
    }
}
