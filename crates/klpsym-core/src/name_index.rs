//! The name index: every name to its symbols in kernel order, in O(1) expected time.
//!
//! An open-addressing table of `u32` slots (a power of two, at most two thirds full, probed
//! linearly from the low bits of the name's hash) holds the first symbol of each distinct
//! name; a `next` array chains the remaining symbols of that name in kernel order. No
//! allocation per symbol or per name, and a lookup returns an iterator over the chain, which
//! is exactly the order in which the kernel's `klp_find_object_symbol()` would meet the
//! matches.
//!
//! A slot holds the symbol's index in its low bits and a tag of the name's hash (other bits
//! than those that chose the slot) in the bits the index does not need (14 for 160,000
//! symbols): a probe reads a symbol's record and name only when the tag matches, about once
//! in 16,000 occupied slots by chance. Without tags every occupied slot probed cost a random
//! record read, 0.86 wasted per lookup at the table's load of 0.6, a dependent cache miss
//! each.
//!
//! Both are flat arrays of integers and the hash is a fixed function (FxHash), so a cache
//! entry stores them and a later run of the same build reads them where they lie
//! ([`NameIndex::view`]) instead of building them (10-20 ms for a distribution kernel).
//! Read from an entry, nothing in them is trusted: a slot or link out of range ends the
//! search, a chain only ever moves forward (kernel order) and a probe visits each slot at
//! most once, so a damaged index gives a wrong answer, never a panic or an endless loop
//! (entries are hash-verified before use anyway).

use std::hash::Hasher;

use crate::columns::Columns;
use crate::resched::{Cancelled, Resched};
use crate::storage::{Backing, Words};

const END: u32 = u32::MAX;

#[inline]
fn hash(name: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(name);
    h.finish()
}

/// Slots for `n` symbols: a power of two, at least one and a half times `n`.
fn slots_for(n: usize) -> usize {
    (n + n / 2 + 1).next_power_of_two().max(8)
}

/// How a slot splits into a tag and a symbol index, for a table of `n` symbols: the index
/// takes the bits that hold `n` (so its all-ones value, which `END` has, is never a symbol),
/// the tag the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotBits {
    index_bits: u32,
}

impl SlotBits {
    fn for_symbols(n: usize) -> SlotBits {
        SlotBits {
            index_bits: (usize::BITS - n.leading_zeros()).clamp(1, 32),
        }
    }

    #[inline]
    fn index_mask(self) -> u32 {
        if self.index_bits >= 32 {
            u32::MAX
        } else {
            (1 << self.index_bits) - 1
        }
    }

    /// The tag of a name's hash: its top bits (the slot comes from the low ones).
    #[inline]
    fn tag(self, h: u64) -> u32 {
        match 32 - self.index_bits {
            0 => 0,
            t => (h >> (64 - t)) as u32,
        }
    }

    #[inline]
    fn pack(self, tag: u32, index: u32) -> u32 {
        if self.index_bits >= 32 {
            index
        } else {
            (tag << self.index_bits) | index
        }
    }

    #[inline]
    fn tag_of(self, slot: u32) -> u32 {
        if self.index_bits >= 32 {
            0
        } else {
            slot >> self.index_bits
        }
    }
}

/// The fourth header word of an encoded index: a mark of this slot format and the index
/// bits. An encoding without it (slots of bare indices) is not read.
const TAGGED: u32 = 0x7a67_0000;

#[derive(Debug)]
pub(crate) struct NameIndex {
    /// Per slot, the first symbol of a name with its tag, or `END`.
    slots: Words,
    /// Per symbol, the next symbol of the same name in kernel order, or `END`.
    next: Words,
    /// Number of distinct names.
    distinct: u32,
    bits: SlotBits,
}

impl NameIndex {
    pub(crate) fn build(table: Columns<'_>, resched: &mut Resched) -> Result<NameIndex, Cancelled> {
        let n = table.syms.len();
        let bits = SlotBits::for_symbols(n);
        let imask = bits.index_mask();
        let mut slots = crate::bulk::filled_vec(slots_for(n), END, resched)?;
        let mask = slots.len() - 1;
        let mut next = crate::bulk::filled_vec(n, END, resched)?;
        // The tail of each chain, indexed by the chain's head, so appends are O(1).
        let mut tail = crate::bulk::filled_vec(n, END, resched)?;
        let mut distinct = 0u32;
        for i in 0..n as u32 {
            resched.tick()?;
            let name = table.name_bytes(i);
            let h = hash(name);
            let tag = bits.tag(h);
            let mut p = h as usize & mask;
            loop {
                let slot = slots[p];
                if slot == END {
                    slots[p] = bits.pack(tag, i);
                    tail[i as usize] = i;
                    distinct += 1;
                    break;
                }
                let head = slot & imask;
                if bits.tag_of(slot) == tag && table.name_bytes(head) == name {
                    let t = tail[head as usize];
                    next[t as usize] = i;
                    tail[head as usize] = i;
                    break;
                }
                p = (p + 1) & mask;
            }
        }
        crate::bulk::free_with_points(tail, resched)?;
        Ok(NameIndex {
            slots: Words::Owned(slots),
            next: Words::Owned(next),
            distinct,
            bits,
        })
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.slots.free_with(resched)?;
        self.next.free_with(resched)
    }

    /// Symbol indices named `name`, in kernel order.
    #[inline]
    pub(crate) fn matches<'a>(&'a self, table: Columns<'_>, name: &[u8]) -> Chain<'a> {
        let slots: &[u32] = &self.slots;
        let mut head = END;
        if !slots.is_empty() {
            let (bits, imask) = (self.bits, self.bits.index_mask());
            let (names, recs) = (table.names.bytes(), table.syms);
            let mask = slots.len() - 1;
            let h = hash(name);
            let tag = bits.tag(h);
            let mut p = h as usize & mask;
            for _ in 0..slots.len() {
                let slot = slots[p];
                if slot == END {
                    break;
                }
                if bits.tag_of(slot) == tag {
                    let i = slot & imask;
                    // A record out of range ends the search (an index read from an entry).
                    let Some(r) = recs.get(i as usize) else { break };
                    let at = r.name_off as usize;
                    if names.get(at..at + r.name_len as usize) == Some(name) {
                        head = i;
                        break;
                    }
                }
                p = (p + 1) & mask;
            }
        }
        Chain {
            next: &self.next,
            cur: head,
        }
    }

    /// Name compares a lookup of `name` makes (tests: the tags must spare the records).
    #[cfg(test)]
    fn compares(&self, table: Columns<'_>, name: &[u8]) -> usize {
        let slots: &[u32] = &self.slots;
        let mask = slots.len() - 1;
        let h = hash(name);
        let mut p = h as usize & mask;
        let mut n = 0;
        loop {
            let slot = slots[p];
            if slot == END {
                return n;
            }
            if self.bits.tag_of(slot) == self.bits.tag(h) {
                n += 1;
                if table.name_bytes(slot & self.bits.index_mask()) == name {
                    return n;
                }
            }
            p = (p + 1) & mask;
        }
    }

    /// Number of distinct names.
    pub(crate) fn distinct(&self) -> usize {
        self.distinct as usize
    }

    /// Appends the index to `out`: a header (slot count, symbol count, distinct names, the
    /// slot format), then the slots and the links as little-endian `u32`s. `out` should be
    /// 8-aligned where it starts for [`NameIndex::view`] to read it in place.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, resched: &mut Resched) -> Result<(), Cancelled> {
        for v in [
            self.slots.len() as u32,
            self.next.len() as u32,
            self.distinct,
            TAGGED | self.bits.index_bits,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for words in [&self.slots, &self.next] {
            for chunk in words.chunks(1 << 14) {
                resched.tick_step()?;
                for w in chunk {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        Ok(())
    }

    /// The index [`NameIndex::encode`] wrote at `range` of `backing`, read in place, for a
    /// table of `symbols` symbols; `None` when it is not one (wrong size, not a power of two,
    /// not aligned, big-endian host).
    pub(crate) fn view(
        backing: &Backing,
        range: std::ops::Range<usize>,
        symbols: usize,
    ) -> Option<NameIndex> {
        let bytes = (**backing).as_ref().get(range.clone())?;
        let word = |i: usize| -> Option<usize> {
            Some(u32::from_le_bytes(bytes.get(i * 4..i * 4 + 4)?.try_into().ok()?) as usize)
        };
        let (slots, n, distinct, format) = (word(0)?, word(1)?, word(2)?, word(3)? as u32);
        let bits = SlotBits::for_symbols(n);
        if !slots.is_power_of_two()
            || n != symbols
            || distinct > n
            || slots <= distinct
            || format != TAGGED | bits.index_bits
        {
            return None;
        }
        let start = range.start + 16;
        let mid = start.checked_add(slots.checked_mul(4)?)?;
        let end = mid.checked_add(n.checked_mul(4)?)?;
        if end != range.end {
            return None;
        }
        Some(NameIndex {
            slots: Words::view(backing, start..mid)?,
            next: Words::view(backing, mid..end)?,
            distinct: distinct as u32,
            bits,
        })
    }
}

/// Iterator over one name's symbols.
#[derive(Debug)]
pub(crate) struct Chain<'a> {
    next: &'a [u32],
    cur: u32,
}

impl Iterator for Chain<'_> {
    type Item = u32;
    #[inline]
    fn next(&mut self) -> Option<u32> {
        if self.cur == END {
            return None;
        }
        let c = self.cur;
        // Kernel order: a link that does not move forward, or leaves the table (`next` has
        // one link per symbol), ends the chain.
        self.cur = match self.next.get(c as usize) {
            Some(&n) if n > c && (n as usize) < self.next.len() => n,
            _ => END,
        };
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use crate::{ObjectId, SymbolTableBuilder};

    #[test]
    fn chains_keep_kernel_order() {
        let mut b = SymbolTableBuilder::new();
        for (i, n) in ["a", "b", "a", "c", "a", "b"].iter().enumerate() {
            b.push(ObjectId::VMLINUX, i as u64 * 16 + 16, b't', n)
                .unwrap();
        }
        let t = b.build();
        let idx = t.name_index();
        assert_eq!(idx.distinct(), 3);
        assert_eq!(
            idx.matches(t.columns(), b"a").collect::<Vec<_>>(),
            vec![0, 2, 4]
        );
        assert_eq!(
            idx.matches(t.columns(), b"b").collect::<Vec<_>>(),
            vec![1, 5]
        );
        assert_eq!(idx.matches(t.columns(), b"zz").count(), 0);
    }

    /// The tags spare the records: over a table at the index's usual load, a lookup compares
    /// names about once (it compared 1.86 times without tags, one record read each).
    #[test]
    fn a_lookup_compares_about_one_name() {
        let mut b = SymbolTableBuilder::new();
        let n = 100_000u64;
        for i in 0..n {
            b.push(ObjectId::VMLINUX, 0x1000 + i * 16, b't', &format!("fn_{i}"))
                .unwrap();
        }
        let t = b.build();
        let idx = t.name_index();
        let mut compares = 0;
        for i in (0..n).step_by(7) {
            let name = format!("fn_{i}");
            compares += idx.compares(t.columns(), name.as_bytes());
            assert_eq!(
                idx.matches(t.columns(), name.as_bytes()).next(),
                Some(i as u32)
            );
        }
        let lookups = n.div_ceil(7) as f64;
        assert!(
            (compares as f64) / lookups < 1.01,
            "{compares} compares for {lookups} lookups"
        );
        // Names that are missing compare nothing, almost always.
        let missing: usize = (0..5000)
            .map(|i| idx.compares(t.columns(), format!("absent_{i}").as_bytes()))
            .sum();
        assert!(missing < 5, "{missing} compares for 5000 missing names");
    }

    /// Tables of every size keep `END` out of the symbol indices.
    #[test]
    fn slot_bits_never_make_end_a_symbol() {
        for n in [0usize, 1, 2, 3, 7, 8, 255, 256, 1 << 20, (1 << 31) + 5] {
            let b = super::SlotBits::for_symbols(n);
            assert!((b.index_mask() as u64) >= n as u64, "{n}");
            let packed = b.pack(
                b.tag(u64::MAX),
                b.index_mask().min(n.saturating_sub(1) as u32),
            );
            if n > 0 {
                assert_ne!(packed & b.index_mask(), super::END & b.index_mask(), "{n}");
            }
        }
    }
}
