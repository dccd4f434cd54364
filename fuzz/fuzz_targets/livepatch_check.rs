//! `check` end to end on arbitrary module bytes: LivepatchModule::parse, then check against a
//! small built-in kernel (klpsym_fuzz::TARGET_KALLSYMS).
//!
//! Invariants: no panic; parse and check stay within the allocation budget; the report
//! formats.
#![no_main]

use klpsym_fuzz::{is_exported, target_table, with_budget};
use klpsym_livepatch::{check, Arch, KernelRules, LivepatchModule, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let kernel = target_table();
    let Ok(module) = with_budget(data.len(), 0, || LivepatchModule::parse(data)) else {
        return;
    };
    let exported: &dyn Fn(&str) -> bool = &is_exported;
    for (major, minor) in [(6, 1), (5, 10)] {
        let target = Target::new(kernel, KernelRules::for_version(major, minor), Arch::X86_64)
            .with_exports(exported)
            .with_section_base(1, 0xffff_ffff_c010_0000);
        let report = with_budget(data.len(), 0, || check(&module, &target));
        let _ = format!("{report:?}");
    }
});
