//! A table's encoding as the index cache keeps it (klpsym_core::SymbolTable::decode and
//! decode_in_place, which reads a mapped entry's names and records where they lie).
//!
//! Invariants: no panic; reading in place (at an aligned and at an unaligned offset) accepts
//! exactly what a copy accepts and gives the same table; every accepted table dumps, answers
//! name and size queries (by its indexes and by walks alike), and encodes back to bytes that
//! decode to the same table.
#![no_main]

use std::sync::Arc;

use klpsym_core::resched::Resched;
use klpsym_core::{Backing, SymbolTable};
use klpsym_fuzz::dump;
use libfuzzer_sys::fuzz_target;

/// `bytes` at offset `at` of a buffer whose start is 8-aligned.
fn backing(bytes: &[u8], at: usize) -> Backing {
    struct Aligned(Vec<u64>, usize, usize);
    impl AsRef<[u8]> for Aligned {
        fn as_ref(&self) -> &[u8] {
            &bytemuck::cast_slice::<u64, u8>(&self.0)[..self.1 + self.2]
        }
    }
    let mut words = vec![0u64; (at + bytes.len()).div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[at..at + bytes.len()].copy_from_slice(bytes);
    Arc::new(Aligned(words, at, bytes.len()))
}

fn view(t: &SymbolTable) -> (Vec<u8>, Vec<u64>, usize) {
    let sizes = t.iter().map(|s| t.size(s.id)).collect();
    let first = t.iter().next().map(|s| s.name.to_string()).unwrap_or_default();
    (dump(t), sizes, t.by_name(&first).count())
}

fuzz_target!(|data: &[u8]| {
    let copy = SymbolTable::decode(data, &mut Resched::none());
    for at in [0usize, 3] {
        let b = backing(data, at);
        let mapped = SymbolTable::decode_in_place(&b, at, &mut Resched::none());
        match (&copy, &mapped) {
            (Ok((c, cu)), Ok((m, mu))) => {
                assert_eq!(cu, mu, "bytes used differ at offset {at}");
                assert!(view(c) == view(m), "tables differ at offset {at}");
            }
            (Err(_), Err(_)) => {}
            _ => panic!(
                "copy {} but in place at {at} {}",
                copy.is_ok(),
                mapped.is_ok()
            ),
        }
    }
    let Ok((t, _)) = copy else {
        return;
    };
    // Walks (a one-shot query's way) answer as the indexes do.
    let b = backing(data, 0);
    let (mut walked, _) = SymbolTable::decode_in_place(&b, 0, &mut Resched::none())
        .expect("accepted above");
    walked.scan_until_indexed(Resched::none());
    assert!(view(&walked) == view(&t), "walks answer otherwise");
    let mut out = Vec::new();
    t.encode(&mut out, &mut Resched::none()).expect("no cancel flag");
    let (again, used) = SymbolTable::decode(&out, &mut Resched::none()).expect("re-encoding decodes");
    assert_eq!(used, out.len());
    assert!(view(&again) == view(&t), "re-encoding changed the table");
});
