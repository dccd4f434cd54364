//! Address to symbol, as the kernel prints it with `%pS`: `name+0xoff/0xsize [module]`.
//!
//! The symbol is the first one (kernel order) at the highest address not above the query,
//! as `get_symbol_pos()` picks it. Unlike a plain floor search, an address past the end of
//! that symbol's extent (beyond the next symbol of its object, or beyond the last symbol of an
//! object whose size nobody knows) is reported as outside, not blamed on the symbol.

use std::fmt;

use crate::addr_index::FloorRec;
use crate::object::{ObjectId, ObjectKind};
use crate::resched::{Cancelled, Resched};
use crate::table::{Symbol, SymbolId, SymbolTable, SIZE_UNKNOWN};

/// An address that falls inside a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbolized<'t> {
    /// The symbol.
    pub symbol: Symbol<'t>,
    /// `addr - symbol.addr`.
    pub offset: u64,
    /// The symbol's size, or [`SIZE_UNKNOWN`].
    pub size: u64,
    /// The module or pseudo-object name printed in brackets; `None` for vmlinux.
    pub module: Option<&'t str>,
}

impl fmt::Display for Symbolized<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{:#x}", self.symbol.name, self.offset)?;
        if self.size != SIZE_UNKNOWN {
            write!(f, "/{:#x}", self.size)?;
        }
        if let Some(m) = self.module {
            write!(f, " [{m}]")?;
        }
        Ok(())
    }
}

/// The answer for one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolizeOutcome<'t> {
    /// Inside a symbol.
    Found(Symbolized<'t>),
    /// Below every symbol.
    BeforeFirst,
    /// Past the end of the symbol below it: `nearest` is that symbol, `size` its extent.
    Outside {
        /// The symbol at the highest address below the query.
        nearest: Symbol<'t>,
        /// Its size (or [`SIZE_UNKNOWN`]).
        size: u64,
    },
    /// The table's addresses are hidden (kptr_restrict): no address can be answered.
    AddressesHidden,
    /// Inside the extent of vmlinux's last symbols but not a kernel address as the kernel's
    /// `is_ksym_addr()` sees it (at or past `_end`, below `_stext`): `%pS` prints the number.
    /// Produced by callers that know the kernel's bounds (`klpsym::Kernel::symbolize`); the
    /// table alone never says it.
    OutsideKernel {
        /// The symbol at the highest address not above the query.
        nearest: Symbol<'t>,
    },
}

impl SymbolTable {
    /// Symbolizes `addr` like `%pS`. No allocation.
    pub fn symbolize(&self, addr: u64) -> SymbolizeOutcome<'_> {
        if self.addresses_hidden() {
            return SymbolizeOutcome::AddressesHidden;
        }
        let floor = self.addr_index().floor_rec(addr);
        self.outcome_for(addr, floor)
    }

    /// Symbolizes many addresses at once into `out` (same order as `addrs`).
    pub fn symbolize_batch<'t>(&'t self, addrs: &[u64], out: &mut Vec<SymbolizeOutcome<'t>>) {
        let never = self.symbolize_batch_with(addrs, out, &mut Resched::none());
        debug_assert!(
            never.is_ok(),
            "a driver without a cancel flag never cancels"
        );
    }

    /// [`symbolize_batch`](Self::symbolize_batch) with reschedule points through `resched`
    /// (filling `out` and every address tick).
    pub fn symbolize_batch_with<'t>(
        &'t self,
        addrs: &[u64],
        out: &mut Vec<SymbolizeOutcome<'t>>,
        resched: &mut Resched,
    ) -> Result<(), Cancelled> {
        out.clear();
        if self.addresses_hidden() {
            *out =
                crate::bulk::filled_vec(addrs.len(), SymbolizeOutcome::AddressesHidden, resched)?;
            return Ok(());
        }
        // Filled in order inside the bounded loop below: never with huge pages, whose first
        // touch zeroes 2 MiB in one kernel entry (350 µs here), a stretch no point can break.
        out.reserve(addrs.len());
        self.addr_index().floor_many(addrs, resched, |_, a, floor| {
            out.push(self.outcome_for(a, floor));
        })
    }

    #[inline]
    fn outcome_for(&self, addr: u64, floor: Option<&FloorRec>) -> SymbolizeOutcome<'_> {
        let Some(f) = floor else {
            return SymbolizeOutcome::BeforeFirst;
        };
        // Built from the packed record: the symbol record itself is not touched.
        let start = f.addr;
        let symbol = Symbol {
            id: SymbolId(f.id),
            addr: start,
            kind: f.kind as char,
            name: self.floor_name(f),
            object: ObjectId(f.object),
        };
        let size = if f.size != u32::MAX {
            u64::from(f.size)
        } else {
            self.size(symbol.id)
        };
        let offset = addr - start;
        let inside = if size == SIZE_UNKNOWN {
            offset == 0
        } else {
            offset < size
        };
        if !inside {
            return SymbolizeOutcome::Outside {
                nearest: symbol,
                size,
            };
        }
        let info = self.object_info(symbol.object);
        let module = match info.kind {
            ObjectKind::Vmlinux => None,
            ObjectKind::Module | ObjectKind::Pseudo => Some(info.name.as_str()),
        };
        SymbolizeOutcome::Found(Symbolized {
            symbol,
            offset,
            size,
            module,
        })
    }

    /// Every symbol starting exactly at `addr` (aliases), in kernel order.
    pub fn at_address(&self, addr: u64) -> impl Iterator<Item = Symbol<'_>> + '_ {
        self.addr_index()
            .at(addr)
            .iter()
            .map(move |&i| self.symbol(SymbolId(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectId, SymbolTableBuilder};

    fn table() -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        let v = ObjectId::VMLINUX;
        b.push(v, 0x1000, b'T', "_text").unwrap();
        b.push(v, 0x1000, b'T', "startup").unwrap();
        b.push(v, 0x1100, b'T', "func").unwrap();
        b.push(v, 0x1200, b'T', "_etext").unwrap();
        let m = b.object("ext4", ObjectKind::Module);
        b.push(m, 0x9000, b't', "ext4_a").unwrap();
        b.push(m, 0x9040, b't', "ext4_b").unwrap();
        b.build()
    }

    #[test]
    fn prints_like_percent_ps() {
        let t = table();
        let SymbolizeOutcome::Found(s) = t.symbolize(0x1010) else {
            panic!()
        };
        assert_eq!(s.to_string(), "_text+0x10/0x100");
        let SymbolizeOutcome::Found(s) = t.symbolize(0x9040) else {
            panic!()
        };
        assert_eq!(s.to_string(), "ext4_b+0x0 [ext4]");
        // past the last symbol of a module whose size is unknown: outside
        assert!(matches!(
            t.symbolize(0x9044),
            SymbolizeOutcome::Outside { .. }
        ));
        let SymbolizeOutcome::Found(s) = t.symbolize(0x9000) else {
            panic!()
        };
        assert_eq!(s.to_string(), "ext4_a+0x0/0x40 [ext4]");
        let SymbolizeOutcome::Found(s) = t.symbolize(0x1200) else {
            panic!()
        };
        assert_eq!(s.to_string(), "_etext+0x0");
    }

    /// A symbol's end is its start plus its size, exclusive: the byte one past a sized symbol
    /// (a module's last function, with its ELF size) is outside it, as the kernel's
    /// `offset < size` check in kallsyms_lookup_size_offset() makes it.
    #[test]
    fn the_byte_past_a_sized_symbol_is_outside() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x1000, b'T', "_text").unwrap();
        let m = b.object("fat", ObjectKind::Module);
        b.push(m, 0x9000, b't', "fat_a").unwrap();
        b.push(m, 0x9040, b't', "fat_last").unwrap();
        b.set_last_size(0x20);
        let t = b.build();
        let SymbolizeOutcome::Found(s) = t.symbolize(0x905f) else {
            panic!("{:?}", t.symbolize(0x905f))
        };
        assert_eq!(s.to_string(), "fat_last+0x1f/0x20 [fat]");
        match t.symbolize(0x9060) {
            SymbolizeOutcome::Outside { nearest, size } => {
                assert_eq!(nearest.name, "fat_last");
                assert_eq!(size, 0x20);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn outside_is_not_blamed_on_the_previous_symbol() {
        let t = table();
        assert_eq!(t.symbolize(0xfff), SymbolizeOutcome::BeforeFirst);
        match t.symbolize(0x1201) {
            SymbolizeOutcome::Outside { nearest, size } => {
                assert_eq!(nearest.name, "_etext");
                assert_eq!(size, SIZE_UNKNOWN);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            t.symbolize(0x5000),
            SymbolizeOutcome::Outside { .. }
        ));
        assert_eq!(
            t.at_address(0x1000).map(|s| s.name).collect::<Vec<_>>(),
            ["_text", "startup"]
        );
    }
}
