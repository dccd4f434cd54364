//! What the integration tests share: the lab's inputs, handed over by scripts/test.sh.

use std::path::{Path, PathBuf};
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

/// The `livepatch:` lines of a check report's predicted kernel log, in order (informational
/// lines included: enabling, transition, applying to a loading module).
#[allow(dead_code)]
pub fn livepatch_lines(report: &serde_json::Value) -> Vec<String> {
    report["kernel_log"]
        .as_array()
        .map(|log| {
            log.iter()
                .filter_map(|l| l["line"].as_str())
                .filter(|l| l.starts_with("livepatch: "))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The primary lab kernel's files the CLI tests read (the first kernel of the matrix).
#[allow(dead_code)]
pub struct Lab {
    /// Its vmlinuz.
    pub vmlinuz: String,
    /// Its module tree.
    pub modules: String,
}

#[allow(dead_code)]
impl Lab {
    /// Its livepatch oracle folder, asked for only where a test reads it (so that the
    /// emptied-oracle run, scripts/test.sh --emptied-oracle, holds to failing exactly the
    /// tests that read the oracle's records or its built cases).
    pub fn lp(&self) -> PathBuf {
        lab("KLPSYM_TEST_LIVEPATCH_DIR").unwrap_or_else(|| {
            panic!("the lab has no livepatch oracle folder (KLPSYM_TEST_LIVEPATCH_DIR)")
        })
    }
}

/// The primary kernel's files, or `None` after recording the skip.
#[allow(dead_code)]
pub fn the_lab() -> Option<Lab> {
    Some(Lab {
        vmlinuz: lab("KLPSYM_TEST_VMLINUZ")?.display().to_string(),
        modules: lab("KLPSYM_TEST_MODULES_DIR")?.display().to_string(),
    })
}

/// The module the oracle loaded for `case`.
#[allow(dead_code)]
pub fn ko(l: &Lab, case: &str, patch: &str) -> String {
    l.lp()
        .join(case)
        .join(format!("{patch}.ko"))
        .display()
        .to_string()
}

/// `path`, or the file the package ships for it: Debian compresses modules from 6.12 on
/// (`dummy.ko.xz`), and a `.ko` path in a test or doc example names either.
#[allow(dead_code)]
pub fn as_shipped(path: &Path) -> PathBuf {
    for suffix in ["", ".xz", ".zst", ".gz"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        if p.is_file() {
            return p;
        }
    }
    path.to_path_buf()
}

/// dummy.ko of the kernel package, compressed or not as the package ships it.
#[allow(dead_code)]
pub fn dummy_ko(l: &Lab) -> String {
    as_shipped(&Path::new(&l.modules).join("kernel/drivers/net/dummy.ko"))
        .display()
        .to_string()
}

/// The first lab kernel's `NAME=` value from its lab.env.
#[allow(dead_code)]
pub fn primary(name: &str) -> String {
    lab_kernels()
        .first()
        .map(|k| k.value(name).to_string())
        .unwrap_or_default()
}
