//! Stamp records: what lets a warm run trust the identity an input was proven to have
//! without reading it again, by the input's stamp (what the file system says about it:
//! `file_stamp.rs`).
//!
//! A kernel entry is named by its input's identity ([`crate::input_identity`]: the hash of
//! every byte, or an ELF's build id), so an input is found in the cache only once that
//! identity is known: for a `-dbg` package, by hashing 0.8-1.2 GB. A stamp record
//! (`HASH.klps`, named by the stamp) keeps the identity an input was proven to have, with
//! the stamp it had and the time the proof began; a later run that finds the same stamp
//! takes the identity from the record and reads a few hundred bytes instead of the input.
//!
//! Why an unchanged stamp proves unchanged bytes: every write to a file sets its ctime
//! (which no program can set) to the current time, read from a clock that ticks in steps of
//! a few milliseconds (coarse; 1-2 s on some file systems). A write made after the proof
//! began therefore gives the file another ctime, unless it falls in the same tick as the
//! ctime the proof saw. So a record is trusted only when the input's ctime was at least
//! [`SETTLED`](crate::file_stamp::SETTLED) older than the moment its proof began: then no
//! write in the tick of that ctime can come after the proof. A record of an input changed
//! just before it was proven (a package downloaded a moment ago) is not trusted: the next
//! run hashes the input again, and records it again, settled by then. A file replaced by
//! another (rename, copy) has another inode, size or ctime; one truncated and rewritten in
//! place keeps its inode and can keep its size and mtime (`touch -r`), never its ctime.
//!
//! What a stamp cannot tell: bytes changed without the kernel seeing a write (a device
//! written under a mounted file system; a shared writable mapping whose pages stay dirty,
//! whose later stores set no time), a clock set back to the very nanosecond of a ctime, and
//! a file system whose clock is skewed by more than [`SETTLED`](crate::file_stamp::SETTLED)
//! from this machine's (a network file system's server sets its times). Proofs rest on the
//! first two never happening; with skew, a server clock ahead of this one only makes records
//! untrusted.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use klpsym_core::resched::Resched;
use xxhash_rust::xxh3::xxh3_128;

use crate::cache_dir::Cache;
use crate::entry::{put_str, split, take_str, u32_at, u64_at, CACHE_FORMAT};
use crate::file_stamp::{Proof, Stamp};

/// The first bytes of a stamp record.
const MAGIC: &[u8; 8] = b"KLPSYMS\0";
/// A stamp record's file name ends so.
pub(crate) const SUFFIX: &str = ".klps";

/// What a stamp record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) stamp: Stamp,
    pub(crate) identity: u128,
    pub(crate) began: SystemTime,
    /// The input (absolute, through its symbolic links), for `klpsym cache`.
    pub(crate) path: PathBuf,
}

impl Record {
    /// True when the record's input still has its stamp (for `klpsym cache`).
    pub(crate) fn live(&self) -> bool {
        Stamp::now(&self.path) == Some(self.stamp)
    }

    /// True when a run may take the identity from the record alone.
    pub(crate) fn trusted(&self) -> bool {
        self.stamp.settled_before(self.began)
    }
}

/// Where the record of `stamp` lives.
pub(crate) fn record_path(cache: &Cache, stamp: &Stamp) -> PathBuf {
    let mut k = b"input stamp\0".to_vec();
    k.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    stamp.put(&mut k);
    cache.dir.join(format!("{:032x}{SUFFIX}", xxh3_128(&k)))
}

/// The identity an input with stamp `stamp` was proven to have, when its record is whole,
/// of this format, of this stamp, and trusted (see the module's documentation).
pub(crate) fn trusted_identity(cache: &Cache, stamp: &Stamp) -> Option<u128> {
    let bytes = std::fs::read(record_path(cache, stamp)).ok()?;
    let r = decode(&bytes)?;
    (r.stamp == *stamp && r.trusted()).then_some(r.identity)
}

/// True when a record of this format names an input of `size` bytes. Entries are written
/// only for inputs whose identity was recorded, so an input of a size no record has (never
/// seen, in any copy) has no entry to find: it is not hashed before it is read, and its
/// hash is made while it is decoded, on another thread, as on a first run.
pub(crate) fn any_of_size(
    cache: &Cache,
    size: u64,
    rs: &mut Resched,
) -> Result<bool, klpsym_core::resched::Cancelled> {
    let Ok(rd) = std::fs::read_dir(&cache.dir) else {
        return Ok(false);
    };
    for e in rd.flatten() {
        rs.tick()?;
        if !is_record(&e.file_name().to_string_lossy()) {
            continue;
        }
        let r = std::fs::read(e.path()).ok().and_then(|b| decode(&b));
        if r.is_some_and(|r| r.stamp.size == size) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Records that the input at `path` has `identity`, proven by `proof`, when the input still
/// has the stamp the proof began with (bytes changed while they were read leave no record).
/// A record that cannot be written is not an error: the next run proves the input again.
pub(crate) fn record(cache: &Cache, path: &Path, proof: &Proof, identity: u128, rs: &mut Resched) {
    if Stamp::now(path) != Some(proof.stamp) || cache.ready().is_err() {
        return;
    }
    let r = Record {
        stamp: proof.stamp,
        identity,
        began: proof.began,
        path: named(path),
    };
    let bytes = encode(&r);
    let _ = rs.tick_step();
    let _ = crate::output::write_atomically_unsynced(&record_path(cache, &proof.stamp), |w| {
        std::io::Write::write_all(w, &bytes)
    });
}

/// Notes an input of the stamp of `meta` at `path` without proving its identity (identity 0,
/// a proof that began in 1970: never trusted), unless it has a record already: so that an
/// entry written for it by [`Cache::put`] is looked for (see [`any_of_size`]) by a run that
/// proves the input's identity.
pub(crate) fn note(cache: &Cache, path: &Path, meta: &std::fs::Metadata) {
    let stamp = Stamp::of(meta);
    let at = record_path(cache, &stamp);
    if at.exists() || cache.ready().is_err() {
        return;
    }
    let r = Record {
        stamp,
        identity: 0,
        began: SystemTime::UNIX_EPOCH,
        path: named(path),
    };
    let bytes = encode(&r);
    let _ = crate::output::write_atomically_unsynced(&at, |w| std::io::Write::write_all(w, &bytes));
}

/// The file at `path` as a record names it: through its symbolic links (a record is found by
/// the file's stamp, whatever link led to it, and its input must stay findable after the
/// link that led to it is gone), absolute.
fn named(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Magic, format, stamp, identity, when the proof began (seconds, nanoseconds), the input's
/// path, then the xxh3-128 of everything before it.
pub(crate) fn encode(r: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    r.stamp.put(&mut out);
    out.extend_from_slice(&r.identity.to_le_bytes());
    let since = r
        .began
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    out.extend_from_slice(&since.as_secs().to_le_bytes());
    out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
    put_str(&mut out, &r.path.to_string_lossy());
    let trailer = xxh3_128(&out);
    out.extend_from_slice(&trailer.to_le_bytes());
    out
}

/// A record's contents, when `bytes` are a whole record of this format.
pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
    let (body, trailer) = bytes.split_at(bytes.len().checked_sub(16)?);
    if trailer != xxh3_128(body).to_le_bytes() {
        return None;
    }
    let mut b = body;
    if split(&mut b, 8)? != MAGIC || u32_at(&mut b)? != CACHE_FORMAT {
        return None;
    }
    let stamp = Stamp::take(&mut b)?;
    let identity = u128::from_le_bytes(split(&mut b, 16)?.try_into().ok()?);
    let secs = u64_at(&mut b)?;
    let nanos = u32_at(&mut b)?;
    let began = SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos.min(999_999_999)))?;
    let path = PathBuf::from(take_str(&mut b)?);
    b.is_empty().then_some(Record {
        stamp,
        identity,
        began,
        path,
    })
}

/// True when `name` is a stamp record's file name.
pub(crate) fn is_record(name: &str) -> bool {
    name.ends_with(SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_stamp::SETTLED;

    fn stamp(ctime: i64) -> Stamp {
        Stamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: (4, 5),
            ctime: (ctime, 7),
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_record_is_trusted_only_when_its_input_had_settled() {
        let r = |ctime, began| Record {
            stamp: stamp(ctime),
            identity: 9,
            began: at(began),
            path: "/x".into(),
        };
        let settled = SETTLED.as_secs();
        assert!(r(1000, 1000 + settled + 1).trusted());
        // ctime 1000.000000007: SETTLED later to the second is not enough.
        assert!(!r(1000, 1000 + settled).trusted());
        assert!(!r(1000, 1000).trusted());
        // A ctime after the proof (a clock set back, a skewed server): not trusted.
        assert!(!r(2000, 1000).trusted());
        assert!(!r(-5, 1000).trusted());
    }

    #[test]
    fn a_record_survives_its_encoding_and_every_damage_is_refused() {
        let r = Record {
            stamp: stamp(1000),
            identity: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            began: at(5000) + Duration::from_nanos(123),
            path: "/var/cache/x.deb".into(),
        };
        let good = encode(&r);
        assert_eq!(decode(&good), Some(r));
        for n in 0..good.len() {
            assert_eq!(decode(&good[..n]), None, "cut at {n}");
            let mut b = good.clone();
            b[n] ^= 0x10;
            assert_eq!(decode(&b), None, "byte {n} flipped");
        }
    }

    #[test]
    fn another_stamp_or_format_has_another_record() {
        let c = Cache::new(PathBuf::from("/c"));
        let a = record_path(&c, &stamp(1000));
        assert_ne!(a, record_path(&c, &stamp(1001)));
        let mut s = stamp(1000);
        s.ctime.1 += 1;
        assert_ne!(a, record_path(&c, &s));
        assert!(is_record(&a.to_string_lossy()));
    }
}
