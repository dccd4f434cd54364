//! Which symbol of one table is "the same definition" as a symbol of another table of the
//! same build (an image's kallsyms and the `-dbg` vmlinux it was linked from): the n-th
//! definition of a name in vmlinux of one is the n-th in the other, both counted in kallsyms
//! order — and only where both list the name equally often (a table that lists a name more
//! or less often than the other pairs none of its definitions: positions would shift).
//!
//! The rule holds because both tables list vmlinux in kallsyms order (the lab checks that a
//! `-dbg` vmlinux reproduces the booted kernel's `/proc/kallsyms` byte for byte).

use rustc_hash::FxHashMap;

use crate::object::ObjectId;
use crate::resched::{Cancelled, Resched};
use crate::table::{SymbolId, SymbolTable};

/// For each symbol of `here` (indexed by its id), the same definition in `there`, or `None`
/// (not a vmlinux symbol, or a name the two list a different number of times). One pass over
/// each table, a tick per symbol.
pub fn pair_definitions(
    here: &SymbolTable,
    there: &SymbolTable,
    resched: &mut Resched,
) -> Result<Vec<Option<SymbolId>>, Cancelled> {
    let mut defs: FxHashMap<&[u8], Vec<SymbolId>> = FxHashMap::default();
    for s in there.iter() {
        resched.tick()?;
        if s.object == ObjectId::VMLINUX {
            defs.entry(s.name.as_bytes()).or_default().push(s.id);
        }
    }
    // How often `here` lists each name, counted once.
    let mut total: FxHashMap<&[u8], u32> = FxHashMap::default();
    for s in here.iter() {
        resched.tick()?;
        if s.object == ObjectId::VMLINUX {
            *total.entry(s.name.as_bytes()).or_default() += 1;
        }
    }
    let mut seen: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut out = Vec::with_capacity(here.len());
    for s in here.iter() {
        resched.tick()?;
        if s.object != ObjectId::VMLINUX {
            out.push(None);
            continue;
        }
        let name = s.name.as_bytes();
        let n = seen.entry(name).or_default();
        let paired = defs
            .get(name)
            .filter(|v| Some(&(v.len() as u32)) == total.get(name))
            .map(|v| v[*n as usize]);
        out.push(paired);
        *n += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectKind, SymbolTableBuilder};

    fn table(syms: &[(u64, &str)], module: &[&str]) -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        for &(a, n) in syms {
            b.push(ObjectId::VMLINUX, a, b't', n).unwrap();
        }
        let m = b.object("m", ObjectKind::Module);
        for (i, n) in module.iter().enumerate() {
            b.push(m, 0x1000 + i as u64, b't', n).unwrap();
        }
        b.build()
    }

    #[test]
    fn nth_pairs_with_nth_only_where_both_count_alike() {
        let here = table(
            &[(1, "a"), (2, "dup"), (3, "dup"), (4, "odd"), (5, "b")],
            &["a"],
        );
        let there = table(
            &[
                (10, "dup"),
                (11, "a"),
                (12, "odd"),
                (13, "dup"),
                (14, "odd"),
                (15, "b"),
            ],
            &[],
        );
        let p = pair_definitions(&here, &there, &mut Resched::none()).unwrap();
        let addr = |o: Option<SymbolId>| o.map(|id| there.symbol(id).addr);
        assert_eq!(addr(p[0]), Some(11)); // a
        assert_eq!(addr(p[1]), Some(10)); // the first dup with the first
        assert_eq!(addr(p[2]), Some(13)); // the second with the second
        assert_eq!(p[3], None); // odd: listed once here, twice there
        assert_eq!(addr(p[4]), Some(15)); // b
        assert_eq!(p[5], None); // a module symbol: only vmlinux pairs
    }
}
