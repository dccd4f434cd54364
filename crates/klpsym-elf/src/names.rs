//! A name -> item index for whole symbol tables that is built and freed in steps.
//!
//! A `HashMap<&str, _>` over tens of thousands of names is one allocation of megabytes:
//! growing it rehashes everything at once, and dropping it unmaps every page in one `munmap`.
//! This table is one `Vec<u32>` of item numbers (the names stay in the caller's table), sized
//! once, zeroed in steps and freed in steps.

use std::hash::BuildHasher;
use std::hash::RandomState;

use klpsym_resched::resched::{Cancelled, Resched};

/// Open addressing with linear probing over `slots` (a power of two, at most half full):
/// 0 is an empty slot, `id + 1` holds item `id`. Names are hashed with the standard library's
/// randomly keyed hasher, so crafted inputs cannot make the probes long.
#[derive(Debug)]
pub(crate) struct NameTable {
    slots: Vec<u32>,
    hasher: RandomState,
}

impl NameTable {
    /// A table for up to `n` items.
    pub fn with_capacity(n: usize, resched: &mut Resched) -> Result<Self, Cancelled> {
        let size = n.saturating_mul(2).max(16).next_power_of_two();
        Ok(NameTable {
            slots: klpsym_resched::bulk::filled_vec(size, 0, resched)?,
            hasher: RandomState::new(),
        })
    }

    fn start(&self, name: &str) -> usize {
        self.hasher.hash_one(name) as usize & (self.slots.len() - 1)
    }

    /// Adds item `id` under `name`, unless an item of that name is in already (the first one
    /// stays, like `HashMap::entry().or_insert()`). `name_of` gives the name of an item in the
    /// table. More items than the capacity given are not added (callers count first).
    pub fn insert_first<'n>(&mut self, id: u32, name: &str, name_of: impl Fn(u32) -> &'n str) {
        let mask = self.slots.len() - 1;
        let mut i = self.start(name);
        // At most half full: an empty slot comes.
        for _ in 0..self.slots.len() {
            match self.slots[i] {
                0 => {
                    self.slots[i] = id.saturating_add(1);
                    return;
                }
                s if name_of(s - 1) == name => return,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The item named `name`.
    pub fn get<'n>(&self, name: &str, name_of: impl Fn(u32) -> &'n str) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.start(name);
        for _ in 0..self.slots.len() {
            match self.slots[i] {
                0 => return None,
                s if name_of(s - 1) == name => return Some(s - 1),
                _ => i = (i + 1) & mask,
            }
        }
        None
    }

    /// Frees the table in steps.
    pub fn free_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        klpsym_resched::bulk::free_with_points(self.slots, resched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_item_of_a_name_wins_and_lookups_agree_with_a_hash_map() {
        let names: Vec<String> = (0..5000).map(|i| format!("sym_{}", i % 1700)).collect();
        let name_of = |i: u32| names[i as usize].as_str();
        let mut r = Resched::none();
        let mut t = NameTable::with_capacity(names.len(), &mut r).unwrap();
        let mut want = std::collections::HashMap::new();
        for (i, n) in names.iter().enumerate() {
            t.insert_first(i as u32, n, name_of);
            want.entry(n.as_str()).or_insert(i as u32);
        }
        for n in &names {
            assert_eq!(t.get(n, name_of), want.get(n.as_str()).copied(), "{n}");
        }
        assert_eq!(t.get("absent", name_of), None);
        assert_eq!(t.get("", name_of), None);
        t.free_with_points(&mut r).unwrap();
        // An empty table answers too.
        let t = NameTable::with_capacity(0, &mut r).unwrap();
        assert_eq!(t.get("x", name_of), None);
    }
}
