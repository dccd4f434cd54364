//! What the integration tests share: the lab's inputs, handed over by scripts/test.sh.

use std::process::{Command, Output};

#[allow(unused_imports)]
pub use klpsym_testkit::lab::{lab, lab_kernels, livepatch_kernels, LabKernel};

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
