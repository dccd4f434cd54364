//! The name index: every name to its symbols in kernel order, in O(1) expected time.
//!
//! One hash table maps a name to the first symbol carrying it; a `next` array chains the
//! remaining symbols of that name in kernel order. No allocation per symbol or per name, and a
//! lookup returns an iterator over the chain, which is exactly the order in which the kernel's
//! `klp_find_object_symbol()` would meet the matches.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::resched::{Cancelled, Resched};
use crate::table::SymbolTable;

const END: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct NameIndex {
    heads: HashTable<u32>,
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
        let mut heads: HashTable<u32> = HashTable::with_capacity(n);
        let mut next = vec![END; n];
        // The tail of each chain, indexed by the chain's head, so appends are O(1).
        let mut tail = vec![END; n];
        for i in 0..n as u32 {
            resched.tick()?;
            let name = table.name_bytes(i);
            let h = hasher.hash_one(name);
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
        Ok(NameIndex {
            heads,
            next,
            hasher,
        })
    }

    /// Symbol indices named `name`, in kernel order.
    pub(crate) fn matches<'a>(&'a self, table: &'a SymbolTable, name: &[u8]) -> Chain<'a> {
        let h = self.hasher.hash_one(name);
        let head = self
            .heads
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
        self.heads.len()
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
