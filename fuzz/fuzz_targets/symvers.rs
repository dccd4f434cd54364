//! Module.symvers (plain, gzip or XZ): klpsym_loader::parse_symvers and the export map it
//! builds.
//!
//! Invariants: no panic; the allocation budget holds; every symbol the map lists is found by
//! its name with the same entry, and the map holds as many as it lists.
#![no_main]

use std::path::Path;

use klpsym_core::resched::Resched;
use klpsym_fuzz::with_budget;
use klpsym_loader::parse_symvers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let r = with_budget(data.len(), 0, || {
        parse_symvers(data, Path::new("Module.symvers"), &mut Resched::none())
    });
    if let Ok(e) = r {
        let mut n = 0;
        for (name, x) in e.symbols.iter() {
            assert_eq!(e.symbols.get(name), Some(x), "{name}");
            n += 1;
        }
        assert_eq!(n, e.symbols.len());
    }
});
