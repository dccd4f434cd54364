//! BTF (the target's struct layouts for the livepatch tables): klpsym_livepatch::btf.
//!
//! Invariants: no panic; the allocation budget holds; layouts read from BTF are consistent
//! (the parser checks that itself; asserted here too).
#![no_main]

use klpsym_fuzz::with_budget;
use klpsym_livepatch::btf::{find_structs, layouts_from_btf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = with_budget(data.len(), 0, || {
        find_structs(data, &["klp_patch", "klp_object", "klp_func", "missing"])
    });
    if let Ok(l) = with_budget(data.len(), 0, || layouts_from_btf(data)) {
        assert!(l.is_consistent());
    }
});
