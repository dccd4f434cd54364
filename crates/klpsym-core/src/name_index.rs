//! The name index: every name to its symbols in kernel order, in O(1) expected time.
//!
//! An open-addressing table of `u32` slots (a power of two, at most two thirds full, probed
//! linearly from the low bits of the name's hash) holds the first symbol of each distinct
//! name; a `next` array chains the remaining symbols of that name in kernel order. No
//! allocation per symbol or per name, and a lookup returns an iterator over the chain, which
//! is exactly the order in which the kernel's `klp_find_object_symbol()` would meet the
//! matches.
//!
//! Both are flat arrays of integers and the hash is a fixed function (FxHash), so a cache
//! entry stores them and a later run of the same build reads them where they lie
//! ([`NameIndex::view`]) instead of building them (10-20 ms for a distribution kernel).
//! Read from an entry, nothing in them is trusted: a slot or link out of range ends the
//! search, a chain only ever moves forward (kernel order) and a probe visits each slot at
//! most once, so a damaged index gives a wrong answer, never a panic or an endless loop
//! (entries are hash-verified before use anyway).

use std::hash::Hasher;

use crate::resched::{Cancelled, Resched};
use crate::storage::{Backing, Words};
use crate::table::SymbolTable;

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

#[derive(Debug)]
pub(crate) struct NameIndex {
    /// Per slot, the first symbol of a name, or `END`.
    slots: Words,
    /// Per symbol, the next symbol of the same name in kernel order, or `END`.
    next: Words,
    /// Number of distinct names.
    distinct: u32,
}

impl NameIndex {
    pub(crate) fn build(
        table: &SymbolTable,
        resched: &mut Resched,
    ) -> Result<NameIndex, Cancelled> {
        let n = table.syms.len();
        let mut slots = crate::bulk::filled_vec(slots_for(n), END, resched)?;
        let mask = slots.len() - 1;
        let mut next = crate::bulk::filled_vec(n, END, resched)?;
        // The tail of each chain, indexed by the chain's head, so appends are O(1).
        let mut tail = crate::bulk::filled_vec(n, END, resched)?;
        let mut distinct = 0u32;
        for i in 0..n as u32 {
            resched.tick()?;
            let name = table.name_bytes(i);
            let mut p = hash(name) as usize & mask;
            loop {
                let head = slots[p];
                if head == END {
                    slots[p] = i;
                    tail[i as usize] = i;
                    distinct += 1;
                    break;
                }
                if table.name_bytes(head) == name {
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
        })
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.slots.free_with(resched)?;
        self.next.free_with(resched)
    }

    /// Symbol indices named `name`, in kernel order.
    pub(crate) fn matches<'a>(&'a self, table: &'a SymbolTable, name: &[u8]) -> Chain<'a> {
        let slots: &[u32] = &self.slots;
        let mut head = END;
        if !slots.is_empty() {
            let mask = slots.len() - 1;
            let mut p = hash(name) as usize & mask;
            for _ in 0..slots.len() {
                let h = slots[p];
                if h == END || h as usize >= table.syms.len() {
                    break;
                }
                if table.name_bytes(h) == name {
                    head = h;
                    break;
                }
                p = (p + 1) & mask;
            }
        }
        Chain {
            next: &self.next,
            cur: head,
        }
    }

    /// Number of distinct names.
    pub(crate) fn distinct(&self) -> usize {
        self.distinct as usize
    }

    /// Appends the index to `out`: a header (slot count, symbol count, distinct names, 0), then
    /// the slots and the links as little-endian `u32`s. `out` should be 8-aligned where it
    /// starts for [`NameIndex::view`] to read it in place.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, resched: &mut Resched) -> Result<(), Cancelled> {
        for v in [self.slots.len(), self.next.len(), self.distinct as usize, 0] {
            out.extend_from_slice(&(v as u32).to_le_bytes());
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
        let (slots, n, distinct) = (word(0)?, word(1)?, word(2)?);
        if !slots.is_power_of_two() || n != symbols || distinct > n || slots <= distinct {
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
        assert_eq!(idx.matches(&t, b"a").collect::<Vec<_>>(), vec![0, 2, 4]);
        assert_eq!(idx.matches(&t, b"b").collect::<Vec<_>>(), vec![1, 5]);
        assert_eq!(idx.matches(&t, b"zz").count(), 0);
    }
}
