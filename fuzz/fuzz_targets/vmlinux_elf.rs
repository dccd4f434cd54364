//! vmlinux ELF with .symtab to the kallsyms view (klpsym_elf::vmlinux_kallsyms).
//!
//! Invariants: no panic; the allocation budget holds; CONFIG_KALLSYMS_ALL only ever adds
//! symbols (the text-range filter drops, never invents).
#![no_main]

use klpsym_elf::vmlinux_kallsyms;
use klpsym_fuzz::with_budget;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let run = |all| with_budget(data.len(), 0, || vmlinux_kallsyms(data, all));
    let detected = run(None);
    let all = run(Some(true));
    let text_only = run(Some(false));
    if let (Ok(all), Ok(text_only)) = (&all, &text_only) {
        assert!(
            text_only.entries.len() <= all.entries.len(),
            "KALLSYMS_ALL=n kept more symbols ({}) than =y ({})",
            text_only.entries.len(),
            all.entries.len()
        );
    }
    if let Ok(d) = detected {
        let n = d.entries.len();
        assert!(
            all.is_ok() && text_only.is_ok(),
            "detection succeeded, a forced setting failed"
        );
        assert!(n == all.unwrap().entries.len() || n == text_only.unwrap().entries.len());
    }
});
