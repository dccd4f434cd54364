//! Module.symvers (plain, gzip or XZ): klpsym_io::parse_symvers and the export map it
//! builds.
//!
//! Invariants: no panic; the allocation budget holds; every symbol the map lists is found by
//! its name with the same entry, and the map holds as many as it lists; for plain text, the
//! map's index without its text (what the cache keeps) read over the input answers the same.
#![no_main]

use std::path::Path;

use klpsym_core::resched::Resched;
use klpsym_fuzz::with_budget;
use klpsym_io::{parse_symvers, ExportMap};
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
        let mut index = Vec::new();
        if klpsym_image::sniff_compression(data).is_none() && e.symbols.encode_index(&mut index, &mut Resched::none()).expect("no cancel flag") {
            let n = index.len();
            let text: klpsym_core::Backing = std::sync::Arc::new(data.to_vec());
            let index: klpsym_core::Backing = std::sync::Arc::new(index);
            let v = ExportMap::view_index(&text, &index, 0..n).expect("an index over its text");
            assert!(v.iter().eq(e.symbols.iter()));
            for (name, x) in e.symbols.iter() {
                assert_eq!(v.get(name), Some(x), "{name}");
            }
        }
    }
});
