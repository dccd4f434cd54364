//! The address index: a sorted array of (address, symbol) for binary search, and the sizes
//! inferred from it.
//!
//! Symbols are ordered by address, ties by kernel order, so the first entry at an address is
//! the one the kernel's `get_symbol_pos()` picks (it walks back to the lowest index of an
//! address run). Sizes: the distance to the next higher address *of the same object*; the
//! last symbol of an object has no such neighbour and its size is unknown.

use crate::resched::{Cancelled, Resched};
use crate::table::{SymbolTable, SIZE_UNKNOWN};

#[derive(Debug)]
pub(crate) struct AddrIndex {
    /// Addresses, sorted; parallel to `ids`. Kept apart so the binary search touches only
    /// 8 bytes per probe.
    addrs: Vec<u64>,
    ids: Vec<u32>,
    /// Inferred size per symbol, in kernel order.
    sizes: Vec<u64>,
    /// Distinct addresses, sorted, with the first symbol (kernel order) at each: what a floor
    /// search needs, one probe sequence, no walk back over aliases.
    uaddrs: Vec<u64>,
    /// Parallel to `uaddrs`: everything a symbolization needs about the first symbol at each
    /// address, in one record, so a lookup touches one line here instead of the symbol
    /// record, the size array and the id array (three cache misses at random addresses).
    ufloor: Vec<FloorRec>,
    /// Every `SAMPLE`-th distinct address: small enough to stay in cache, so a lookup costs a
    /// search in here plus one search within a block of `SAMPLE` neighbours.
    samples: Vec<u64>,
}

const SAMPLE: usize = 32;

/// The first symbol at a distinct address, packed (24 bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloorRec {
    pub(crate) id: u32,
    pub(crate) name_off: u32,
    pub(crate) name_len: u32,
    pub(crate) object: u32,
    /// Its size when below `u32::MAX`; otherwise ask [`SymbolTable::size`].
    pub(crate) size: u32,
    pub(crate) kind: u8,
}

impl AddrIndex {
    pub(crate) fn build(
        table: &SymbolTable,
        resched: &mut Resched,
    ) -> Result<AddrIndex, Cancelled> {
        let n = table.syms.len();
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(n);
        for (i, r) in table.syms.iter().enumerate() {
            resched.tick()?;
            // Section-relative addresses (offline modules) answer no address query.
            if !table.objects[r.object as usize].relative {
                order.push((r.addr, i as u32));
            }
        }
        // Kernel order is mostly address order already (vmlinux is sorted; each module is a
        // handful of runs), so the stable sort's run detection makes this close to linear.
        // It is chunked so reschedule points are reached during big sorts.
        crate::bulk::sort_by_u64_key_with_points(&mut order, |p| p.0, resched)?;
        let mut sizes = crate::bulk::filled_vec(n, SIZE_UNKNOWN, resched)?;
        // Per object: the symbols at the address currently pending (aliases), waiting for the
        // next higher address of that object.
        let mut pending: Vec<(u64, Vec<u32>)> = vec![(0, Vec::new()); table.objects.len()];
        for &(addr, id) in &order {
            resched.tick()?;
            let obj = table.syms[id as usize].object as usize;
            let (paddr, list) = &mut pending[obj];
            if !list.is_empty() && *paddr != addr {
                for &p in list.iter() {
                    sizes[p as usize] = addr - *paddr;
                }
                list.clear();
            }
            *paddr = addr;
            list.push(id);
        }
        let mut addrs = Vec::with_capacity(order.len());
        let mut ids = Vec::with_capacity(order.len());
        for &(a, i) in &order {
            resched.tick()?;
            addrs.push(a);
            ids.push(i);
        }
        crate::bulk::free_with_points(order, resched)?;
        let mut uaddrs = Vec::with_capacity(addrs.len());
        let mut ufloor = Vec::with_capacity(addrs.len());
        for (i, &a) in addrs.iter().enumerate() {
            resched.tick()?;
            if uaddrs.last() != Some(&a) {
                let id = ids[i];
                let r = &table.syms[id as usize];
                let size = match sizes[id as usize] {
                    SIZE_UNKNOWN => table.source_size(crate::SymbolId(id)),
                    s => s,
                };
                uaddrs.push(a);
                ufloor.push(FloorRec {
                    id,
                    name_off: r.name_off,
                    name_len: r.name_len,
                    object: r.object,
                    size: u32::try_from(size).unwrap_or(u32::MAX),
                    kind: r.kind,
                });
            }
        }
        let samples = uaddrs.iter().step_by(SAMPLE).copied().collect();
        Ok(AddrIndex {
            addrs,
            ids,
            sizes,
            uaddrs,
            ufloor,
            samples,
        })
    }

    #[inline]
    pub(crate) fn size(&self, id: u32) -> u64 {
        self.sizes[id as usize]
    }

    /// The first symbol (kernel order) at the highest address <= `addr`, if any.
    #[cfg(test)]
    pub(crate) fn floor(&self, addr: u64) -> Option<u32> {
        self.floor_rec(addr).map(|(_, f)| f.id)
    }

    /// The floor's address and record.
    #[inline]
    pub(crate) fn floor_rec(&self, addr: u64) -> Option<(u64, &FloorRec)> {
        self.floor_pos(addr)
            .map(|i| (self.uaddrs[i], &self.ufloor[i]))
    }

    /// Position in `uaddrs` of the highest address <= `addr`.
    #[inline]
    fn floor_pos(&self, addr: u64) -> Option<usize> {
        let block = self.samples.partition_point(|&a| a <= addr);
        if block == 0 {
            return None;
        }
        let lo = (block - 1) * SAMPLE;
        let hi = (lo + SAMPLE).min(self.uaddrs.len());
        let within = self.uaddrs[lo..hi].partition_point(|&a| a <= addr);
        Some(lo + within - 1)
    }

    /// Floors for many addresses at once: calls `found(i, addr, floor)` for every
    /// `addrs[i]`, in address order (not input order). Sorts the queries and walks the index
    /// once, so the index is read in order instead of at random.
    pub(crate) fn floor_many<'s>(
        &'s self,
        addrs: &[u64],
        resched: &mut Resched,
        mut found: impl FnMut(usize, u64, Option<(u64, &'s FloorRec)>),
    ) -> Result<(), Cancelled> {
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(addrs.len());
        for (i, &a) in addrs.iter().enumerate() {
            resched.tick()?;
            order.push((a, i as u32));
        }
        crate::bulk::sort_by_u64_key_with_points(&mut order, |p| p.0, resched)?;
        let mut pos = 0usize;
        for &(a, i) in &order {
            resched.tick()?;
            // Gallop forward from the last position.
            let mut step = 1;
            while pos + step < self.uaddrs.len() && self.uaddrs[pos + step] <= a {
                pos += step;
                step *= 2;
            }
            while step > 1 {
                step /= 2;
                if pos + step < self.uaddrs.len() && self.uaddrs[pos + step] <= a {
                    pos += step;
                }
            }
            let floor = self
                .uaddrs
                .get(pos)
                .filter(|&&u| u <= a)
                .map(|&u| (u, &self.ufloor[pos]));
            found(i as usize, a, floor);
        }
        crate::bulk::free_with_points(order, resched)
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        use crate::bulk::free_with_points;
        free_with_points(self.addrs, resched)?;
        free_with_points(self.ids, resched)?;
        free_with_points(self.sizes, resched)?;
        free_with_points(self.uaddrs, resched)?;
        free_with_points(self.ufloor, resched)?;
        free_with_points(self.samples, resched)
    }

    /// Symbols whose address equals `addr`, in kernel order.
    pub(crate) fn at(&self, addr: u64) -> &[u32] {
        let lo = self.addrs.partition_point(|&a| a < addr);
        let hi = self.addrs.partition_point(|&a| a <= addr);
        &self.ids[lo..hi]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_many_matches_floor() {
        use crate::{ObjectId, SymbolTableBuilder};
        let mut b = SymbolTableBuilder::new();
        for i in 0..1000u64 {
            b.push(
                ObjectId::VMLINUX,
                0x1000 + (i / 3) * 16,
                b't',
                &format!("s{i}"),
            )
            .unwrap();
        }
        let t = b.build();
        let idx = t.addr_index();
        let probes: Vec<u64> = (0..5000u64).map(|i| (i * 7919) % 0x2000).collect();
        let mut out = vec![None; probes.len()];
        let mut seen = 0;
        idx.floor_many(&probes, &mut Resched::none(), |i, a, f| {
            assert_eq!(a, probes[i]);
            out[i] = f.map(|(_, r)| r.id);
            seen += 1;
        })
        .unwrap();
        assert_eq!(seen, probes.len());
        for (p, o) in probes.iter().zip(&out) {
            assert_eq!(*o, idx.floor(*p), "{p:#x}");
        }
    }

    #[test]
    fn floor_picks_first_alias() {
        use crate::{ObjectId, SymbolTableBuilder};
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x100, b'T', "a").unwrap();
        b.push(ObjectId::VMLINUX, 0x100, b'T', "b").unwrap();
        b.push(ObjectId::VMLINUX, 0x200, b'T', "c").unwrap();
        let t = b.build();
        let idx = t.addr_index();
        assert_eq!(idx.floor(0xff), None);
        assert_eq!(idx.floor(0x100), Some(0));
        assert_eq!(idx.floor(0x1ff), Some(0));
        assert_eq!(idx.floor(0x200), Some(2));
        assert_eq!(idx.at(0x100), &[0, 1]);
    }
}
