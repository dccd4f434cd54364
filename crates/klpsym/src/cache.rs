//! The cache of decoded tables: what it holds, and pruning it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use klpsym_io::{Cache, EntryInfo};

use crate::error::{Error, ErrorKind, Result};

/// What the cache holds after a listing (and a pruning, when asked).
#[derive(Debug, Serialize)]
pub struct CacheListing {
    /// The cache folder.
    pub dir: String,
    /// The entries kept.
    pub entries: Vec<EntryInfo>,
    /// Their total size.
    pub bytes: u64,
    /// The entry files removed.
    pub removed: Vec<String>,
}

/// True when the entry's input still exists with the size it had, or for a module tree's
/// listing, when the folder still exists (an entry checks identity and content on use; this
/// is only what pruning can tell cheaply).
pub fn input_present(e: &EntryInfo) -> bool {
    match (&e.source, e.source_bytes) {
        (Some(s), Some(n)) => std::fs::metadata(s).is_ok_and(|m| m.len() == n),
        (Some(s), None) if e.kind == "module tree" => Path::new(s).is_dir(),
        // Named by its build's id: no input to be gone (age alone prunes it).
        (None, None) if e.kind == "module debug file" => true,
        _ => false,
    }
}

/// Lists the cache at `dir` (default: the user's), removing, when `prune` is `Some(DAYS)`,
/// entries whose input is gone or changed, entries of other klpsym versions, and entries not
/// written for DAYS days (`Some(0)`: every entry).
pub fn cache_listing(dir: Option<PathBuf>, prune: Option<u64>) -> Result<CacheListing> {
    let dir = dir.or_else(Cache::default_dir).ok_or_else(|| {
        Error::new(
            ErrorKind::Usage,
            "no cache folder: name one, or set XDG_CACHE_HOME or HOME",
        )
    })?;
    let cache = Cache { dir: dir.clone() };
    let mut rs = klpsym_core::Resched::none();
    let entries = cache
        .list(&mut rs)
        .map_err(|e| Error::from(e).context(dir.display()))?;
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for e in entries {
        let stale = match prune {
            None => false,
            Some(days) => {
                !e.current || !input_present(&e) || e.age_secs >= days.saturating_mul(86_400)
            }
        };
        if stale {
            std::fs::remove_file(&e.file)
                .map_err(|err| Error::from(err).context(e.file.display()))?;
            // A kernel entry's debug sections go with it.
            let mut sidecar = e.file.clone().into_os_string();
            sidecar.push(".dwarf");
            match std::fs::remove_file(&sidecar) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::from(err).context(Path::new(&sidecar).display()));
                }
                _ => {}
            }
            removed.push(e.file.display().to_string());
        } else {
            kept.push(e);
        }
    }
    let bytes = kept.iter().map(|e| e.bytes).sum();
    Ok(CacheListing {
        dir: dir.display().to_string(),
        entries: kept,
        bytes,
        removed,
    })
}
