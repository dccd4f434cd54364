//! The cache of decoded tables: what it holds, and pruning it.

use std::path::PathBuf;
use std::time::Duration;

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
    /// The size of every file of the folder together: the entries, their debug sections,
    /// the stamp records (a few hundred bytes an input) and temporary files.
    pub bytes: u64,
    /// The size the cache keeps itself under when a run writes to it (see
    /// [`crate::Options::cache_max_bytes`]).
    pub max_bytes: u64,
    /// The entry files removed.
    pub removed: Vec<String>,
}

/// What [`cache_listing_with`] removes before listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachePrune {
    /// Remove entries whose input is gone or changed, entries of another format, and
    /// entries not written or used for this many days (`Some(0)`: every entry).
    pub days: Option<u64>,
    /// Then remove entries, stale ones first and the least recently used next, until the
    /// folder takes at most this many bytes.
    pub max_bytes: Option<u64>,
}

/// True when an input of the entry is still there as it was (see [`EntryInfo::live`]).
pub fn input_present(e: &EntryInfo) -> bool {
    e.live
}

/// Lists the cache at `dir` (default: the user's), removing, when `prune` is `Some(DAYS)`,
/// entries whose input is gone or changed, entries of another format, and entries not
/// written or used for DAYS days (`Some(0)`: every entry).
pub fn cache_listing(dir: Option<PathBuf>, prune: Option<u64>) -> Result<CacheListing> {
    cache_listing_with(
        dir,
        &CachePrune {
            days: prune,
            max_bytes: None,
        },
    )
}

/// Lists the cache at `dir` (default: the user's) after removing what `prune` says.
pub fn cache_listing_with(dir: Option<PathBuf>, prune: &CachePrune) -> Result<CacheListing> {
    let dir = dir.or_else(Cache::default_dir).ok_or_else(|| {
        Error::new(
            ErrorKind::Usage,
            "no cache folder: name one, or set XDG_CACHE_HOME or HOME",
        )
    })?;
    let cache = Cache::new(dir.clone());
    let mut rs = klpsym_core::Resched::none();
    let how = klpsym_io::Prune {
        stale: prune.days.is_some(),
        older_than: prune
            .days
            .map(|d| Duration::from_secs(d.saturating_mul(86_400))),
        max_bytes: prune.max_bytes,
    };
    let removed = if how == klpsym_io::Prune::default() {
        Vec::new()
    } else {
        cache
            .prune(&how, &mut rs)
            .map_err(|e| Error::from(e).context(dir.display()))?
    };
    let listing = cache
        .listing(&mut rs)
        .map_err(|e| Error::from(e).context(dir.display()))?;
    Ok(CacheListing {
        dir: dir.display().to_string(),
        entries: listing.entries,
        bytes: listing.bytes,
        max_bytes: cache.max_bytes,
        removed: removed.iter().map(|p| p.display().to_string()).collect(),
    })
}
