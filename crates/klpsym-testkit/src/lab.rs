//! The lab's inputs, handed over by scripts/test.sh as environment variables: shared by the
//! real-kernel tests of every crate.

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

/// One kernel of the lab matrix: the KEY=VALUE file lab/lab-kernel.sh wrote for it.
#[derive(Debug)]
pub struct LabKernel {
    /// `RELEASE (SUITE)`, for messages.
    pub name: String,
    vars: std::collections::BTreeMap<String, String>,
}

impl LabKernel {
    /// The path (or value) `key` of this kernel; panics naming the kernel when absent.
    pub fn path(&self, key: &str) -> PathBuf {
        PathBuf::from(self.value(key))
    }

    /// The value `key` of this kernel.
    pub fn value(&self, key: &str) -> &str {
        self.vars
            .get(key)
            .unwrap_or_else(|| panic!("{}: lab.env has no {key}", self.name))
    }

    /// The value `key` of this kernel when present and not empty (lab.env leaves a key empty
    /// when the kernel has no such input: no -dbg vmlinux or livepatch oracle on arm64).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Why this kernel has no livepatch results (`LIVEPATCH_SKIPPED`), when it has none.
    pub fn livepatch_skipped(&self) -> Option<&str> {
        self.get("LIVEPATCH_SKIPPED")
    }

    /// `major.minor` of the kernel release.
    pub fn version(&self) -> (u32, u32) {
        let mut it = self.value("RELEASE").split(|c: char| !c.is_ascii_digit());
        let major = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let minor = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        (major, minor)
    }
}

/// The kernels of the matrix that ran the livepatch oracle; the others are named on stderr
/// with the reason (skipping is explicit).
pub fn livepatch_kernels() -> Vec<LabKernel> {
    lab_kernels()
        .into_iter()
        .filter(|k| match k.livepatch_skipped() {
            Some(why) => {
                eprintln!("{}: no livepatch judgement: {why}", k.name);
                false
            }
            None => true,
        })
        .collect()
}

/// Every kernel of the lab matrix (KLPSYM_TEST_LAB_KERNELS: lab.env files separated by
/// `:`), or an empty list after saying the test skipped (a failure under KLPSYM_REQUIRE_LAB).
pub fn lab_kernels() -> Vec<LabKernel> {
    let Some(list) = lab("KLPSYM_TEST_LAB_KERNELS") else {
        return Vec::new();
    };
    let list = list.into_os_string().into_string().expect("UTF-8 paths");
    assert!(
        list.split(':').any(|s| !s.is_empty()) || std::env::var_os("KLPSYM_REQUIRE_LAB").is_none(),
        "KLPSYM_TEST_LAB_KERNELS names no kernel (KLPSYM_REQUIRE_LAB is set)"
    );
    list.split(':')
        .filter(|s| !s.is_empty())
        .map(|file| {
            let text = std::fs::read_to_string(file)
                .unwrap_or_else(|e| panic!("cannot read lab kernel file {file}: {e}"));
            let vars: std::collections::BTreeMap<String, String> = text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let name = format!(
                "{} ({})",
                vars.get("RELEASE").map_or("?", String::as_str),
                vars.get("SUITE").map_or("?", String::as_str)
            );
            LabKernel { name, vars }
        })
        .collect()
}
