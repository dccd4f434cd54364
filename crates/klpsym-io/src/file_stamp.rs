//! What the file system says about an input (device, inode, size, mtime, ctime), and the
//! start of a proof of its identity: taken before its first byte is read, so that a change
//! made while it was read shows. Why an unchanged stamp proves unchanged bytes, and when it
//! does not, is told in `stamp.rs`, which keeps the records of proven identities.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::entry::u64_at;

/// How much older than its proof an input's ctime must be for its record to be trusted:
/// above every file system's timestamp tick (FAT's 2 s is the coarsest kept by Linux).
pub(crate) const SETTLED: Duration = Duration::from_secs(3);

/// What the file system says about an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime: (i64, i64),
    pub(crate) ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of the file at `path` now (through symbolic links).
    pub(crate) fn now(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }

    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        for v in [
            self.dev,
            self.ino,
            self.size,
            self.mtime.0 as u64,
            self.mtime.1 as u64,
            self.ctime.0 as u64,
            self.ctime.1 as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    pub(crate) fn take(b: &mut &[u8]) -> Option<Stamp> {
        let mut v = [0u64; 7];
        for x in &mut v {
            *x = u64_at(b)?;
        }
        Some(Stamp {
            dev: v[0],
            ino: v[1],
            size: v[2],
            mtime: (v[3] as i64, v[4] as i64),
            ctime: (v[5] as i64, v[6] as i64),
        })
    }

    /// True when the ctime is at least [`SETTLED`] before `t` (a ctime before 1970 never is).
    pub(crate) fn settled_before(&self, t: SystemTime) -> bool {
        let Ok(secs) = u64::try_from(self.ctime.0) else {
            return false;
        };
        let ctime = Duration::new(secs, self.ctime.1.clamp(0, 999_999_999) as u32);
        ctime
            .checked_add(SETTLED)
            .and_then(|d| SystemTime::UNIX_EPOCH.checked_add(d))
            .is_some_and(|c| c <= t)
    }
}

/// The start of a proof of an input's identity: its stamp, taken before its first byte is
/// read, and the time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proof {
    pub(crate) stamp: Stamp,
    pub(crate) began: SystemTime,
}

impl Proof {
    /// Begins a proof of the input whose metadata (taken now) is `meta`.
    pub(crate) fn begin(meta: &std::fs::Metadata) -> Proof {
        Proof {
            stamp: Stamp::of(meta),
            began: SystemTime::now(),
        }
    }
}
