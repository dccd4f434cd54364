//! Which symbol of one table is "the same definition" as a symbol of another table of the
//! same build (an image's kallsyms and the `-dbg` vmlinux it was linked from): the n-th
//! definition of a name in vmlinux of one is the n-th in the other, both counted in kallsyms
//! order — and only where both list the name equally often (a table that lists a name more
//! or less often than the other pairs none of its definitions: positions would shift).
//!
//! The rule holds because both tables list vmlinux in kallsyms order (the lab checks that a
//! `-dbg` vmlinux reproduces the booted kernel's `/proc/kallsyms` byte for byte).

use crate::object::ObjectId;
use crate::resched::{Cancelled, Resched};
use crate::table::{SymbolId, SymbolTable};

/// For each symbol of `here` (indexed by its id), the same definition in `there`, or `None`
/// (not a vmlinux symbol, or a name the two list a different number of times). One pass over
/// `here`, a tick per symbol, each answered through both tables' name indexes (built first
/// when missing, with points): a symbol's rank among `here`'s definitions of its name, and
/// the definition of that rank in `there`. (Three hash maps over both tables did the same in
/// one pass each, but grew and were dropped in single stretches of milliseconds.)
pub fn pair_definitions(
    here: &SymbolTable,
    there: &SymbolTable,
    resched: &mut Resched,
) -> Result<Vec<Option<SymbolId>>, Cancelled> {
    here.build_name_index(resched)?;
    there.build_name_index(resched)?;
    let mut out = Vec::with_capacity(here.len());
    for s in here.iter() {
        resched.tick()?;
        if s.object != ObjectId::VMLINUX {
            out.push(None);
            continue;
        }
        let (mut rank, mut total) = (0usize, 0usize);
        for i in here.ids_by_name_in(s.name, ObjectId::VMLINUX) {
            rank += usize::from(i < s.id.0);
            total += 1;
        }
        let (mut count, mut nth) = (0usize, None);
        for i in there.ids_by_name_in(s.name, ObjectId::VMLINUX) {
            if count == rank {
                nth = Some(SymbolId(i));
            }
            count += 1;
        }
        // A name defined hundreds of times (`__func__.0`) costs that many steps per symbol:
        // counted as such, so the stride learned on unique names does not run past them.
        resched.tick_n(u32::try_from(total + count).unwrap_or(u32::MAX))?;
        out.push(if count == total { nth } else { None });
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
