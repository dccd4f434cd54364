//! The running kernel's livepatch state: `/sys/kernel/livepatch/<patch>/<object>/<func,N>`,
//! with `enabled` and `transition` per patch.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::LoadError;

/// Where the kernel shows its livepatches.
pub const LIVEPATCH_SYSFS: &str = "/sys/kernel/livepatch";

/// One loaded livepatch as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsPatch {
    /// The patch module's name.
    pub name: String,
    /// `enabled` (None when unreadable).
    pub enabled: Option<bool>,
    /// `transition` (None when unreadable).
    pub transition: Option<bool>,
    /// Its objects (`vmlinux`, module names), sorted, each with its function entries
    /// (`name,N` where N is old_sympos with 0 shown as 1), sorted.
    pub objects: Vec<(String, Vec<String>)>,
}

fn flag(p: &Path) -> Option<bool> {
    fs::read_to_string(p).ok().map(|s| s.trim() == "1")
}

fn subdirs(p: &Path) -> Result<Vec<String>, LoadError> {
    let mut v: Vec<String> = fs::read_dir(p)
        .map_err(|source| LoadError::Io {
            path: p.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

/// Reads the livepatch tree under `dir` (normally [`LIVEPATCH_SYSFS`]). A missing folder is
/// an error that says what it means (no CONFIG_LIVEPATCH, or sysfs not mounted).
pub fn read_livepatch_sysfs(dir: &Path) -> Result<Vec<SysfsPatch>, LoadError> {
    if !dir.is_dir() {
        return Err(LoadError::Unrecognized {
            path: dir.to_path_buf(),
            what: "not found — is CONFIG_LIVEPATCH enabled, and sysfs mounted?".into(),
        });
    }
    let mut out = Vec::new();
    for p in subdirs(dir)? {
        let pdir: PathBuf = dir.join(&p);
        let mut objects = Vec::new();
        for o in subdirs(&pdir)? {
            let funcs = subdirs(&pdir.join(&o))?;
            objects.push((o, funcs));
        }
        out.push(SysfsPatch {
            enabled: flag(&pdir.join("enabled")),
            transition: flag(&pdir.join("transition")),
            name: p,
            objects,
        });
    }
    Ok(out)
}
