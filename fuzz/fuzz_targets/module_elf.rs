//! Kernel modules (.ko) to the lines they add to /proc/kallsyms (klpsym_elf::module_kallsyms).
//!
//! Invariants: no panic; the allocation budget holds; the configuration options only filter:
//! whether a module parses does not depend on them, and without CONFIG_KALLSYMS_ALL it shows no
//! more symbols than with it.
#![no_main]

use klpsym_elf::{module_kallsyms, module_kallsyms_with, ModuleOptions};
use klpsym_fuzz::with_budget;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let all = with_budget(data.len(), 0, || module_kallsyms(data));
    let text_only = with_budget(data.len(), 0, || {
        module_kallsyms_with(
            data,
            ModuleOptions {
                kallsyms_all: false,
                module_unload: true,
            },
            &mut klpsym_core::resched::Resched::none(),
        )
    });
    match (all, text_only) {
        (Ok(a), Ok(t)) => {
            assert!(t.entries.len() <= a.entries.len());
            assert_eq!(a.name, t.name);
        }
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
            panic!("CONFIG_KALLSYMS_ALL changed whether the module parses: {e}")
        }
        (Err(_), Err(_)) => {}
    }
});
