//! The address index: the symbols sorted by address, the sizes inferred from that order, and
//! a floor search built for random addresses: a directory of 16 MiB chunks, each cut into
//! about one bucket per distinct address, over one 32-byte record per distinct address. A
//! lookup reads the directory (a few entries, in cache), two neighbouring bucket starts, and
//! the one or two records of its bucket: two cache misses at a random address, where a binary
//! search over 100,000 addresses takes four or more (on this project's VM each miss to memory
//! is 100-150 ns, so the misses are the cost).
//!
//! Symbols are ordered by address, ties by kernel order, so the first entry at an address is
//! the one the kernel's `get_symbol_pos()` picks (it walks back to the lowest index of an
//! address run). Sizes: the distance to the next higher address *of the same object*; the
//! last symbol of an object has no such neighbour and its size is unknown.

use crate::columns::{Columns, SIZE_UNKNOWN};
use crate::resched::{Cancelled, Resched};

#[derive(Debug)]
pub(crate) struct AddrIndex {
    /// Addresses, sorted; parallel to `ids`. Kept apart so the binary search touches only
    /// 8 bytes per probe.
    addrs: Vec<u64>,
    ids: Vec<u32>,
    /// Inferred size per symbol, in kernel order.
    sizes: Vec<u64>,
    /// One record per distinct address, sorted, for the first symbol (kernel order) at it:
    /// everything a symbolization needs in one 32-byte record (half a cache line, never
    /// straddling two), so a floor search ends on the line it answers from.
    recs: Vec<FloorRec>,
    /// Where in `recs` an address belongs.
    dir: Directory,
}

/// Address bits above which the chunk directory decides.
const CHUNK_SHIFT: u32 = 24;
/// The most buckets per chunk (1 << 20: 16-byte buckets; no two symbols are closer than that
/// often enough to need finer ones).
const MAX_BUCKET_BITS: u32 = 20;

/// The bucketed directory over `AddrIndex::recs`.
#[derive(Debug, Default)]
struct Directory {
    /// The 16 MiB chunks of address space that hold symbols, sorted by `CHUNK_SHIFT` key:
    /// a few entries for a kernel (percpu, vmlinux, modules), so their search stays in cache.
    keys: Vec<u64>,
    chunks: Vec<Chunk>,
    /// Per chunk, `1 << bits` buckets of equal address width plus an end: `starts[at + j]` is
    /// the first record at or above bucket `j`'s start. A floor search reads two neighbouring
    /// entries here and then the few records of one bucket: two cache misses where a binary
    /// search over all records takes four or more.
    starts: Vec<u32>,
}

/// One chunk of the directory.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    /// Its first record.
    first: u32,
    /// Where its buckets start in `starts`.
    at: u32,
    /// Bucket width: `1 << shift` bytes.
    shift: u32,
}

/// The first symbol at a distinct address, packed (32 bytes, aligned so one cache line holds
/// two whole records).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct FloorRec {
    pub(crate) addr: u64,
    pub(crate) id: u32,
    pub(crate) name_off: u32,
    pub(crate) name_len: u32,
    pub(crate) object: u32,
    /// Its size when below `u32::MAX`; otherwise ask `SymbolTable::size`.
    pub(crate) size: u32,
    pub(crate) kind: u8,
    /// Whether `name_off..name_off + name_len` passed [`crate::storage::Names::check`] when
    /// the index was built (the name can then be handed out without reading it).
    pub(crate) name_checked: bool,
}

impl AddrIndex {
    pub(crate) fn build(table: Columns<'_>, resched: &mut Resched) -> Result<AddrIndex, Cancelled> {
        let n = table.syms.len();
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(n);
        for (i, r) in table.syms.iter().enumerate() {
            resched.tick()?;
            // Section-relative addresses (offline modules) answer no address query.
            if !table.objects[r.object as usize].unplaced {
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
        // Filled inside the bounded loop below: no huge pages (a first touch would zero
        // 2 MiB in one kernel entry, a stretch no reschedule point can break).
        let mut recs = Vec::with_capacity(addrs.len());
        for (i, &a) in addrs.iter().enumerate() {
            resched.tick()?;
            if recs.last().map(|r: &FloorRec| r.addr) != Some(a) {
                let id = ids[i];
                let r = &table.syms[id as usize];
                let size = match sizes[id as usize] {
                    SIZE_UNKNOWN => table.source_size(id),
                    s => s,
                };
                recs.push(FloorRec {
                    addr: a,
                    id,
                    name_off: r.name_off,
                    name_len: r.name_len,
                    object: r.object,
                    size: u32::try_from(size).unwrap_or(u32::MAX),
                    kind: r.kind,
                    name_checked: table
                        .names
                        .check(r.name_off as usize..r.name_off as usize + r.name_len as usize),
                });
            }
        }
        let dir = buckets(&recs, resched)?;
        Ok(AddrIndex {
            addrs,
            ids,
            sizes,
            recs,
            dir,
        })
    }

    #[inline]
    pub(crate) fn size(&self, id: u32) -> u64 {
        self.sizes[id as usize]
    }

    /// The first symbol (kernel order) at the highest address <= `addr`, if any.
    #[cfg(test)]
    pub(crate) fn floor(&self, addr: u64) -> Option<u32> {
        self.floor_rec(addr).map(|f| f.id)
    }

    /// The record of the highest address <= `addr`.
    #[inline]
    pub(crate) fn floor_rec(&self, addr: u64) -> Option<&FloorRec> {
        let above = self.count_at_or_below(addr);
        above.checked_sub(1).map(|i| &self.recs[i])
    }

    /// How many records have an address <= `addr`.
    #[inline]
    fn count_at_or_below(&self, addr: u64) -> usize {
        let (s, e) = self.bucket(addr);
        s + self.recs[s..e].partition_point(|r| r.addr <= addr)
    }

    /// The records that may be the last one <= `addr`, `s..e`: every record before `s` is
    /// below `addr`, every one from `e` on above it. Reads the chunk directory (in cache) and
    /// two neighbouring bucket starts.
    #[inline]
    fn bucket(&self, addr: u64) -> (usize, usize) {
        let key = addr >> CHUNK_SHIFT;
        let dir = &self.dir;
        let ci = dir.keys.partition_point(|&k| k <= key);
        if ci == 0 || dir.keys[ci - 1] != key {
            // In no chunk: everything below the next chunk is below `addr`.
            let c = dir
                .chunks
                .get(ci)
                .map_or(self.recs.len(), |c| c.first as usize);
            return (c, c);
        }
        let c = dir.chunks[ci - 1];
        let j = c.at as usize + ((addr & ((1 << CHUNK_SHIFT) - 1)) >> c.shift) as usize;
        (dir.starts[j] as usize, dir.starts[j + 1] as usize)
    }

    /// Floors for many addresses at once: calls `found(i, addr, floor)` for every `addrs[i]`,
    /// in input order. The searches go a group of queries at a time, one step for the whole
    /// group before the next: the bucket bounds of all of them, then a prefetch of the lines
    /// each bucket's search will read first (its first, middle and last record; a kernel's
    /// symbols cluster, and at a random symbol the bucket holds about 16 records), then the
    /// searches. The loads of one step do not depend on each other, so the processor has the
    /// whole group's cache misses in flight at once instead of one query's at a time. (Sorting
    /// the queries and walking the index in order, as this once did, cost more than it saved;
    /// so did interleaving every probe of the group's binary searches, whose loop overhead
    /// outweighed the misses it overlapped: 105-116 ns an address against 58-60 ns this way
    /// and 68-84 ns without the prefetch, on the lab's 6.1 capture.)
    pub(crate) fn floor_many<'s>(
        &'s self,
        addrs: &[u64],
        resched: &mut Resched,
        mut found: impl FnMut(usize, u64, Option<&'s FloorRec>),
    ) -> Result<(), Cancelled> {
        const GROUP: usize = 32;
        let recs = &self.recs[..];
        for (g, group) in addrs.chunks(GROUP).enumerate() {
            let mut range = [(0usize, 0usize); GROUP];
            for (r, &a) in range.iter_mut().zip(group) {
                *r = self.bucket(a);
            }
            for &(s, e) in &range[..group.len()] {
                if s < e {
                    prefetch(&recs[s]);
                    prefetch(&recs[s + (e - s) / 2]);
                    prefetch(&recs[e - 1]);
                }
            }
            for (k, &a) in group.iter().enumerate() {
                resched.tick()?;
                let (s, e) = range[k];
                let count = s + recs[s..e].partition_point(|r| r.addr <= a);
                found(g * GROUP + k, a, count.checked_sub(1).map(|i| &recs[i]));
            }
        }
        Ok(())
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        use crate::bulk::free_with_points;
        free_with_points(self.addrs, resched)?;
        free_with_points(self.ids, resched)?;
        free_with_points(self.sizes, resched)?;
        free_with_points(self.recs, resched)?;
        free_with_points(self.dir.keys, resched)?;
        free_with_points(self.dir.chunks, resched)?;
        free_with_points(self.dir.starts, resched)
    }

    /// Symbols whose address equals `addr`, in kernel order.
    pub(crate) fn at(&self, addr: u64) -> &[u32] {
        let lo = self.addrs.partition_point(|&a| a < addr);
        let hi = self.addrs.partition_point(|&a| a <= addr);
        &self.ids[lo..hi]
    }
}

/// Asks for the cache line of `r` ahead of its use (x86-64 only; elsewhere nothing).
#[inline(always)]
fn prefetch(r: &FloorRec) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint about a valid reference's address: it reads nothing into
    // the program and cannot fault.
    #[allow(unsafe_code)]
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch((r as *const FloorRec).cast::<i8>(), _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// The chunk directory and bucket starts over sorted, distinct record addresses: each chunk
/// gets about one bucket per record (a power of two, at most `1 << MAX_BUCKET_BITS`).
fn buckets(recs: &[FloorRec], resched: &mut Resched) -> Result<Directory, Cancelled> {
    let mut d = Directory::default();
    let mut first = 0usize;
    while first < recs.len() {
        let key = recs[first].addr >> CHUNK_SHIFT;
        let mut end = first;
        while end < recs.len() && recs[end].addr >> CHUNK_SHIFT == key {
            resched.tick()?;
            end += 1;
        }
        let count = (end - first) as u64;
        let bits = (64 - count.saturating_sub(1).leading_zeros()).min(MAX_BUCKET_BITS);
        let shift = CHUNK_SHIFT - bits;
        d.keys.push(key);
        d.chunks.push(Chunk {
            first: first as u32,
            at: d.starts.len() as u32,
            shift,
        });
        // starts[j] = the first record whose bucket is j or later; the last entry is `end`.
        let mut r = first;
        for j in 0..=(1u64 << bits) {
            resched.tick()?;
            while r < end && (recs[r].addr & ((1 << CHUNK_SHIFT) - 1)) >> shift < j {
                r += 1;
            }
            d.starts.push(r as u32);
        }
        first = end;
    }
    Ok(d)
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
            out[i] = f.map(|r| r.id);
            seen += 1;
        })
        .unwrap();
        assert_eq!(seen, probes.len());
        for (p, o) in probes.iter().zip(&out) {
            assert_eq!(*o, idx.floor(*p), "{p:#x}");
        }
    }

    /// The floor by brute force: the first symbol (kernel order) at the highest address
    /// <= `a` among `syms`.
    fn brute_floor(syms: &[u64], a: u64) -> Option<u32> {
        let best = syms.iter().copied().filter(|&x| x <= a).max()?;
        syms.iter().position(|&x| x == best).map(|i| i as u32)
    }

    proptest::proptest! {
        /// Chunks far apart, dense runs, gaps, aliases, the ends of the address space: the
        /// bucketed search answers like a brute-force floor everywhere.
        #[test]
        fn floor_matches_brute_force(
            clusters in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::collection::vec(0u64..1 << 26, 1..200)),
                1..6,
            ),
            probes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..200),
        ) {
            use crate::{ObjectId, SymbolTableBuilder};
            let mut syms = Vec::new();
            for (base, offs) in &clusters {
                for &o in offs {
                    syms.push(base.saturating_add(o));
                }
            }
            let mut b = SymbolTableBuilder::new();
            for (i, &a) in syms.iter().enumerate() {
                b.push(ObjectId::VMLINUX, a, b't', &format!("s{i}")).unwrap();
            }
            let t = b.build();
            let idx = t.addr_index();
            let mut questions: Vec<u64> = probes.clone();
            for &a in &syms {
                questions.extend([a, a.wrapping_sub(1), a.wrapping_add(1), a ^ 0xfff]);
            }
            questions.extend([0, u64::MAX]);
            // The batch search (prefetching a group's buckets) answers as the single one.
            let mut batch = Vec::new();
            idx.floor_many(&questions, &mut Resched::none(), |i, a, f| {
                batch.push((i, a, f.map(|r| r.id)));
            })
            .unwrap();
            proptest::prop_assert_eq!(batch.len(), questions.len());
            for (i, &q) in questions.iter().enumerate() {
                proptest::prop_assert_eq!(idx.floor(q), brute_floor(&syms, q), "{:#x}", q);
                proptest::prop_assert_eq!(batch[i], (i, q, brute_floor(&syms, q)), "batch {:#x}", q);
            }
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
