//! `convert` end to end on arbitrary module bytes, against a small built-in kernel.
//!
//! Invariants: no panic; conversion stays within the allocation budget; a converted module
//! parses again, converting it again changes nothing more (every symbol it had to convert now
//! is a klp symbol), and `check` runs on it.
#![no_main]

use klpsym_fuzz::{is_exported, target_table, with_budget};
use klpsym_livepatch::{check, convert, Arch, KernelRules, LivepatchModule, Pin, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let target = Target::new(target_table(), KernelRules::for_version(6, 1), Arch::X86_64);
    let pins = [Pin {
        file: None,
        object: None,
        name: "m_show".into(),
        position: 2,
    }];
    let Ok((out, report)) = with_budget(data.len(), 0, || {
        convert(data, &target, &pins, &is_exported)
    }) else {
        return;
    };
    let module = LivepatchModule::parse(&out).expect("a converted module parses again");
    let _ = check(&module, &target);
    let (again, second) =
        convert(&out, &target, &pins, &is_exported).expect("a converted module converts again");
    assert!(
        second.conversions.is_empty(),
        "second conversion converted {:?} (first: {:?})",
        second.conversions,
        report.conversions
    );
    assert!(again == out, "second conversion changed the bytes");
});
