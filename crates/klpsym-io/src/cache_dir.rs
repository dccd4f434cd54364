//! Where the cache's entries live: the folder, how big it may grow, and what makes it fit
//! to use (private to this user). What is kept there, and how, is the other cache files'
//! (`cache.rs` and `cache_put.rs` for kernels, `parts_cache.rs`, `tree_cache.rs`,
//! `symvers_cache.rs`, `copies_index.rs`, the stamp records of `stamp.rs`); the folder is
//! what all of them, and the readers that spill into it, stand on.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_128;

/// Entry file suffix.
pub const SUFFIX: &str = ".klpc";

/// The size the cache is kept under unless told otherwise ([`Cache::max_bytes`]): 4 GiB
/// holds the lab's whole set (eight kernels' images, five `-dbg` packages with their debug
/// sections, module trees, Module.symvers: about 2.5 GB) with room to spare; one `-dbg`
/// kernel takes 0.25-0.35 GB, an image's entry 6-10 MB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;

/// Where entries live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// The cache folder.
    pub dir: PathBuf,
    /// The size the folder is kept under: after writing an entry, entries are removed,
    /// those whose input is gone or changed first, then the least recently used, until all
    /// files of the folder (entries, debug sections, stamp records) take no more than this.
    /// The entry just written is kept even when it alone is larger. `u64::MAX`: no bound.
    pub max_bytes: u64,
}

impl Cache {
    /// A cache in `dir`, kept under [`DEFAULT_MAX_BYTES`].
    pub fn new(dir: PathBuf) -> Cache {
        Cache {
            dir,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// `$XDG_CACHE_HOME/klpsym`, else `$HOME/.cache/klpsym`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("klpsym"))
    }

    /// True for inputs worth caching: regular files outside /proc and /sys.
    pub fn applies_to(path: &Path) -> bool {
        !(path.starts_with("/proc") || path.starts_with("/sys"))
            && std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }

    /// True when the folder is ours alone: owned by this process's user and writable by no
    /// one else. Entries carry no signature; a folder others can write (a shared /tmp
    /// directory) could hold forged ones, so such a folder is not used at all.
    pub(crate) fn private(&self) -> bool {
        let Ok(me) = std::fs::metadata("/proc/self") else {
            return false;
        };
        std::fs::metadata(&self.dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == me.uid() && m.mode() & 0o022 == 0)
    }

    pub(crate) fn entry_path(&self, key: &[u8]) -> PathBuf {
        self.dir.join(format!("{:032x}{SUFFIX}", xxh3_128(key)))
    }

    /// Creates the folder when it is missing (readable by this user alone); refuses a folder
    /// that is not private.
    pub(crate) fn ready(&self) -> Result<(), String> {
        if !self.dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
                .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        }
        if !self.private() {
            return Err(format!(
                "{}: not used as a cache: it must be owned by this user and writable by no one else",
                self.dir.display()
            ));
        }
        Ok(())
    }
}
