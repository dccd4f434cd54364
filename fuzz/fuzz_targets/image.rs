//! Kernel images to kallsyms, in klpsym_image's two steps: decompress_image under a 64 MiB
//! limit, then find_kallsyms on the result.
//!
//! Invariants: no panic; decompression never returns more than the limit (a bomb is an
//! error); each step stays within the allocation budget of its own input (the image for the
//! first, plus room for the limit; the decompressed kernel for the second); every decoded entry
//! prints as a /proc/kallsyms line.
#![no_main]

use klpsym_fuzz::with_budget;
use klpsym_image::{decompress_image, find_kallsyms};
use libfuzzer_sys::fuzz_target;

/// Small enough that a decompression bomb is refused well under libFuzzer's RSS limit.
const LIMIT: usize = 64 << 20;

fuzz_target!(|data: &[u8]| {
    // The output buffer may reach LIMIT (and briefly a copy while it shrinks to fit).
    let Ok(d) = with_budget(data.len(), 2 * LIMIT, || decompress_image(data, LIMIT)) else {
        return;
    };
    assert!(d.data.len() <= LIMIT, "decompressed past the limit");
    let Ok(syms) = with_budget(d.data.len(), 0, || find_kallsyms(&d.data)) else {
        return;
    };
    let text = syms.to_proc_kallsyms();
    assert_eq!(text.lines().count(), syms.entries.len());
});
