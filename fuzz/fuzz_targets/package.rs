//! Distribution packages (.deb: ar + tar; RPM: headers + cpio), every compression the
//! payloads use: klpsym_package::read_package.
//!
//! Invariants: no panic; the allocation budget holds (members are bounded at 64 KiB and the
//! archive stream at 16 times that, so decompression bombs stop at the limit); every kept
//! member is within the limit and is of the kind its path names.
#![no_main]

use klpsym_core::resched::Resched;
use klpsym_fuzz::with_budget;
use klpsym_package::{classify, read_package, Want};
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 64 << 10;

fuzz_target!(|data: &[u8]| {
    let r = with_budget(data.len(), 0, || {
        read_package(data, Want::all(), LIMIT, &mut Resched::none())
    });
    if let Ok(p) = r {
        for m in &p.members {
            assert!(m.data.len() as u64 <= LIMIT);
            assert_eq!(classify(&m.path).map(|c| c.0), Some(m.kind), "{}", m.path);
        }
    }
});
