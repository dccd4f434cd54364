//! What the integration tests share: the lab's inputs, handed over by scripts/test.sh.

use std::path::PathBuf;
use std::process::{Command, Output};

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

/// Runs the klpsym binary.
#[allow(dead_code)]
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .output()
        .unwrap()
}

/// Bytes as text (lossy).
#[allow(dead_code)]
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The JSON a run printed.
#[allow(dead_code)]
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)))
}
