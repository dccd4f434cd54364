//! The name index: every name to its symbols in kernel order, in O(1) expected time.
//!
//! One hash table maps a name to the first symbol carrying it; a `next` array chains the
//! remaining symbols of that name in kernel order. No allocation per symbol or per name, and a
//! lookup returns an iterator over the chain, which is exactly the order in which the kernel's
//! `klp_find_object_symbol()` would meet the matches.
//!
//! The hash table is split into [`SHARDS`] tables chosen by middle bits of the hash (the
//! table itself uses the low bits for the bucket and the top 7 for its tag), so building never
//! allocates and clears one table of hundreds of KiB in a single stretch: shards are created
//! one at a time with a reschedule point between them.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::resched::{Cancelled, Resched};
use crate::table::SymbolTable;

const END: u32 = u32::MAX;

/// Number of hash-table shards (a power of two).
const SHARDS: usize = 64;

#[inline]
fn shard(h: u64) -> usize {
    (h >> 32) as usize & (SHARDS - 1)
}

#[derive(Debug)]
pub(crate) struct NameIndex {
    heads: Vec<HashTable<u32>>,
    next: Vec<u32>,
    hasher: DefaultHashBuilder,
}

impl NameIndex {
    pub(crate) fn build(
        table: &SymbolTable,
        resched: &mut Resched,
    ) -> Result<NameIndex, Cancelled> {
        let n = table.syms.len();
        let hasher = DefaultHashBuilder::default();
        // Room for the expected share plus a margin; a shard that fills up grows alone.
        let per_shard = n / SHARDS + n / (SHARDS * 8) + 16;
        let mut heads: Vec<HashTable<u32>> = Vec::with_capacity(SHARDS);
        for _ in 0..SHARDS {
            heads.push(HashTable::with_capacity(per_shard));
            resched.tick_step()?;
        }
        let mut next = crate::bulk::filled_vec(n, END, resched)?;
        // The tail of each chain, indexed by the chain's head, so appends are O(1).
        let mut tail = crate::bulk::filled_vec(n, END, resched)?;
        for i in 0..n as u32 {
            resched.tick()?;
            let name = table.name_bytes(i);
            let h = hasher.hash_one(name);
            let heads = &mut heads[shard(h)];
            match heads.find(h, |&j| table.name_bytes(j) == name) {
                Some(&head) => {
                    let t = tail[head as usize];
                    next[t as usize] = i;
                    tail[head as usize] = i;
                }
                None => {
                    heads.insert_unique(h, i, |&j| hasher.hash_one(table.name_bytes(j)));
                    tail[i as usize] = i;
                }
            }
        }
        crate::bulk::free_with_points(tail, resched)?;
        Ok(NameIndex {
            heads,
            next,
            hasher,
        })
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        crate::bulk::free_with_points(self.heads, resched)?;
        crate::bulk::free_with_points(self.next, resched)
    }

    /// Symbol indices named `name`, in kernel order.
    pub(crate) fn matches<'a>(&'a self, table: &'a SymbolTable, name: &[u8]) -> Chain<'a> {
        let h = self.hasher.hash_one(name);
        let head = self.heads[shard(h)]
            .find(h, |&j| table.name_bytes(j) == name)
            .copied()
            .unwrap_or(END);
        Chain {
            next: &self.next,
            cur: head,
        }
    }

    /// Number of distinct names.
    pub(crate) fn distinct(&self) -> usize {
        self.heads.iter().map(HashTable::len).sum()
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
        self.cur = self.next[c as usize];
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
