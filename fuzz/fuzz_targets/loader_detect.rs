//! The loader's content sniffing and decoding (klpsym_io::detect, then klpsym_io::load
//! on a file holding the input, which dispatches to every parser by content).
//!
//! Invariants: no panic; the allocation budget holds; an input over `max_input_size` is refused.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use klpsym_core::resched::Resched;
use klpsym_fuzz::with_budget;
use klpsym_io::{detect, load, LoadOptions};
use libfuzzer_sys::fuzz_target;

/// One scratch file per fuzzing process (the loader reads paths, not bytes).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::var_os("KLPSYM_FUZZ_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        dir.join(format!("klpsym-fuzz-loader-{}.bin", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = detect(data);
    let path = scratch();
    std::fs::write(path, data).expect("write the scratch file");
    let opts = LoadOptions {
        max_input_size: 1 << 20,
        max_decompressed_size: 64 << 20,
        kallsyms_all: None,
        package_modules: true,
        debug_packages: true,
        package_module_names: None,
        cache: None,
        export_facts: true,
    };
    // Images may decompress up to max_decompressed_size: that much on top of the budget.
    let _ = with_budget(data.len(), 3 * (64 << 20), || {
        load(path, &opts, &mut Resched::none())
    });
    if data.len() > 64 {
        let small = LoadOptions {
            max_input_size: 64,
            ..opts
        };
        assert!(
            load(path, &small, &mut Resched::none()).is_err(),
            "an input over max_input_size was accepted"
        );
    }
});
