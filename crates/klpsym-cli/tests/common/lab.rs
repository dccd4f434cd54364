//! The lab's inputs, handed over by scripts/test.sh as environment variables: shared by the
//! real-kernel tests of every crate (they include this file by path).

use std::path::PathBuf;

/// The lab input `var` (a path), or `None` after saying the test skipped; with
/// KLPSYM_REQUIRE_LAB set (CI) a missing input fails instead.
pub fn lab(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(v) => Some(PathBuf::from(v)),
        None => {
            assert!(
                std::env::var_os("KLPSYM_REQUIRE_LAB").is_none(),
                "{var} is required (KLPSYM_REQUIRE_LAB is set)"
            );
            eprintln!("skipped: {var} is not set (run scripts/test.sh)");
            None
        }
    }
}
