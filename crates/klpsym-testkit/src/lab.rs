//! The lab's inputs, handed over by scripts/test.sh as environment variables: shared by the
//! real-kernel tests of every crate.

use std::io::Write;
use std::path::PathBuf;

/// True when every skip is a failure (`KLPSYM_REQUIRE_LAB`, which CI sets).
pub fn required() -> bool {
    std::env::var_os("KLPSYM_REQUIRE_LAB").is_some_and(|v| !v.is_empty())
}

/// Says that a check was not judged, and why. Under `KLPSYM_REQUIRE_LAB` that is a failure
/// (it panics); otherwise it is counted: one line (`TEST<TAB>WHAT<TAB>WHY`) appended to the
/// file `KLPSYM_TEST_SKIP_LOG` names, which scripts/test.sh totals in its closing summary
/// (`N passed, N failed, N skipped`), so a run that judged nothing never reads as one that
/// judged everything.
pub fn skip(what: &str, why: &str) {
    assert!(
        !required(),
        "{what}: not judged: {why} (KLPSYM_REQUIRE_LAB is set: a skip is a failure)"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    eprintln!("skipped: {what}: {why}");
    if let Some(log) = std::env::var_os("KLPSYM_TEST_SKIP_LOG") {
        // One write per line, appended: tests run on many threads and in many binaries.
        let line = format!("{test}\t{what}\t{why}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!(
                "cannot record a skip in {}: {e}",
                PathBuf::from(log).display()
            );
        }
    }
}

/// The lab.env keys (and KLPSYM_TEST_* variables) that name what a guest recorded: the
/// livepatch oracle (its symbolize cases included) and the relocation oracle.
const ORACLE_KEYS: &[&str] = &[
    "LIVEPATCH_DIR",
    "RELOC_DIR",
    "KLPSYM_TEST_LIVEPATCH_DIR",
    "KLPSYM_TEST_KLP_BUILD_DIR",
];

/// Notes that the running test read an oracle's record: one line (the test's name) appended
/// to `KLPSYM_TEST_ORACLE_READS`, when set. scripts/check-emptied-oracle.sh runs the suite
/// with every oracle emptied and holds each test named here to failing.
fn note_oracle_read(key: &str) {
    if !ORACLE_KEYS.contains(&key) {
        return;
    }
    let Some(log) = std::env::var_os("KLPSYM_TEST_ORACLE_READS") else {
        return;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(format!("{test}\n").as_bytes()));
    if let Err(e) = written {
        panic!(
            "cannot note an oracle read in {}: {e}",
            PathBuf::from(log).display()
        );
    }
}

/// The lab input `var` (a path), or `None` after recording the skip (see [`skip`]); under
/// `KLPSYM_REQUIRE_LAB` (CI) a missing input fails instead.
pub fn lab(var: &str) -> Option<PathBuf> {
    note_oracle_read(var);
    match std::env::var_os(var) {
        Some(v) => Some(PathBuf::from(v)),
        None => {
            skip(var, "not set: no real kernel (run scripts/test.sh)");
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
        note_oracle_read(key);
        self.vars
            .get(key)
            .unwrap_or_else(|| panic!("{}: lab.env has no {key}", self.name))
    }

    /// The value `key` of this kernel when present and not empty (lab.env leaves a key empty
    /// when the kernel has no such input: no -dbg vmlinux or livepatch oracle on arm64).
    pub fn get(&self, key: &str) -> Option<&str> {
        note_oracle_read(key);
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The kernel's name in the lab, as a case's `load_on=` and `built_for=` name it: its
    /// suite, or SUITE/FLAVOUR for a flavour other than the architecture's own (a lab.env
    /// written before it said so has SUITE= alone).
    pub fn id(&self) -> &str {
        self.get("KERNEL_ID").unwrap_or_else(|| self.value("SUITE"))
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
/// with the reason (an arm64 kernel without CONFIG_LIVEPATCH has no livepatch judgement: that
/// is the kernel's answer, not a skip). A matrix where no kernel ran the oracle is a skip.
pub fn livepatch_kernels() -> Vec<LabKernel> {
    let all = lab_kernels();
    let any = !all.is_empty();
    let out: Vec<LabKernel> = all
        .into_iter()
        .filter(|k| match k.livepatch_skipped() {
            Some(why) => {
                eprintln!("{}: no livepatch judgement: {why}", k.name);
                false
            }
            None => true,
        })
        .collect();
    if any && out.is_empty() {
        skip(
            "the livepatch oracle",
            "no kernel of the matrix ran it (every one lacks CONFIG_LIVEPATCH)",
        );
    }
    out
}

/// Every kernel of the lab matrix (KLPSYM_TEST_LAB_KERNELS: lab.env files separated by
/// `:`), or an empty list after saying the test skipped (a failure under KLPSYM_REQUIRE_LAB).
pub fn lab_kernels() -> Vec<LabKernel> {
    let Some(list) = lab("KLPSYM_TEST_LAB_KERNELS") else {
        return Vec::new();
    };
    read_kernels("KLPSYM_TEST_LAB_KERNELS", list.into_os_string())
}

/// The other halves of the lab's flavour pairs (KLPSYM_TEST_LAB_FLAVOURS: lab.env files of
/// kernels of another flavour, e.g. trixie's -cloud-amd64, separated by `:`): each has a
/// -dbg vmlinux and the livepatch cases that name it, not the whole matrix's inputs, so only
/// the tests of flavour pairs read them. An empty list after saying the test skipped.
pub fn flavour_kernels() -> Vec<LabKernel> {
    let Some(list) = lab("KLPSYM_TEST_LAB_FLAVOURS") else {
        return Vec::new();
    };
    read_kernels("KLPSYM_TEST_LAB_FLAVOURS", list.into_os_string())
}

fn read_kernels(var: &str, list: std::ffi::OsString) -> Vec<LabKernel> {
    let list = list.into_string().expect("UTF-8 paths");
    if !list.split(':').any(|s| !s.is_empty()) {
        skip(var, "names no kernel");
    }
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

/// The ELF bytes of a module file of a lab package: `.ko` as is, `.ko.xz`, `.ko.zst` and
/// `.ko.gz` decompressed by the reference decoders (xz2, zstd, flate2), not by klpsym's own,
/// so a test reading them judges klpsym's decoding too. Panics naming the file on failure.
pub fn module_bytes(path: &std::path::Path) -> Vec<u8> {
    use std::io::Read;
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.to_string_lossy();
    let mut out = Vec::new();
    let decoded = if name.ends_with(".ko.xz") {
        xz2::read::XzDecoder::new(raw.as_slice()).read_to_end(&mut out)
    } else if name.ends_with(".ko.zst") {
        zstd::stream::read::Decoder::new(raw.as_slice()).and_then(|mut d| d.read_to_end(&mut out))
    } else if name.ends_with(".ko.gz") {
        flate2::read::GzDecoder::new(raw.as_slice()).read_to_end(&mut out)
    } else {
        return raw;
    };
    decoded.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    out
}

/// True for a module file as kbuild installs it: `.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`.
pub fn is_module_file(path: &std::path::Path) -> bool {
    let name = path.to_string_lossy();
    [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .any(|s| name.ends_with(s))
}
