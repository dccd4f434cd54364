//! A Module.symvers kept between runs as its index: the records and hash slots of its
//! [`ExportMap`], read in place over the file's own bytes.
//!
//! A module tree's `build/Module.symvers` (26,772 lines, 1.9 MB on Debian 6.12) decides the
//! CRC and namespace checks, so a `check` reads it on every run; building its table was 4-9 ms
//! of a 45 ms warm check (one record per line and a hash table, all fresh memory). The file
//! must still be read and hashed (1.9 MB) to prove the index is over these bytes; what an
//! entry saves is the parse and the table.
//!
//! An entry is named by the file's stamp (device, inode, size, mtime, ctime) and the cache's
//! format ([`CACHE_FORMAT`]), and records the content hash ([`content_hash`]) of the bytes its index was made over; a
//! file whose bytes hash otherwise is parsed again, whatever its stamp says. The entry holds
//! no text, so it is smaller than the file (about 40 bytes a line against 70); one that would
//! not be (a file of a few lines) is not kept. A compressed Module.symvers is never kept:
//! the index would have to hold the text it was made over.
//!
//! Layout: magic, format, klpsym version, key, content hash, the file's path, size and stamp
//! (for `klpsym cache`), the index ([`ExportMap::encode_index`]), and the xxh3-128 of everything
//! before it. A truncated, corrupt or foreign entry is ignored and rebuilt, never trusted.

use std::path::Path;
use std::sync::Arc;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::Backing;

use crate::cache_dir::Cache;
use crate::entry::{
    content_hash, hash_in_steps, map_entry, put_str, split, take_str, u32_at, u64_at,
    verified_body, CACHE_FORMAT,
};
use crate::error::LoadError;
use crate::file_stamp::Stamp;
use crate::options::LoadOptions;
use crate::read::read_bounded;
use crate::symvers::{parse_symvers, read_symvers, symvers_text};
use klpsym_sources::{ExportMap, Exports};

/// The first bytes of a Module.symvers entry.
const MAGIC: &[u8; 8] = b"KLPSYMV\0";

/// Reads a Module.symvers as [`read_symvers`] does, through the cache of `opts` when it has
/// one: a warm run reads the file and checks its hash, and the table is the entry's.
pub fn read_symvers_cached(
    path: &Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Exports, LoadError> {
    match &opts.cache {
        Some(c) if Cache::applies_to(path) => Ok(read(c, path, opts.max_input_size, rs)?.0),
        _ => read_symvers(path, opts.max_input_size, rs),
    }
}

/// Where a read's table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A cache entry made over the same bytes.
    Entry,
    /// The file, parsed.
    Parsed,
}

/// The exports of `path`, from its entry in `cache` when one was made over the same bytes,
/// else parsed (and kept when the entry can be smaller than the file).
pub(crate) fn read(
    cache: &Cache,
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> Result<(Exports, Origin), LoadError> {
    let Ok(meta) = std::fs::metadata(path) else {
        // Reports why it cannot be read.
        return Ok((read_symvers(path, limit, rs)?, Origin::Parsed));
    };
    let raw = read_bounded(path, limit, rs)?;
    if klpsym_image::sniff_compression(&raw).is_some() {
        return Ok((parse_symvers(&raw, path, rs)?, Origin::Parsed));
    }
    // A folder that is not ours is neither read nor written: no hash, no index to encode.
    let present = cache.dir.exists();
    if present && !cache.private() {
        return Ok((symvers_text(raw, path, rs)?, Origin::Parsed));
    }
    let stamp = Stamp::of(&meta);
    let key = key_of(&stamp);
    let entry = cache.entry_path(&key);
    let content = content_hash(&raw, rs)?;
    let text = Arc::new(raw);
    if present {
        let backing: Backing = text.clone();
        if let Some(symbols) = open(&entry, &key, content, &backing, rs)? {
            let source = path.display().to_string();
            return Ok((Exports { source, symbols }, Origin::Entry));
        }
    }
    // The only reference left: the bytes are taken back, not copied.
    let raw = Arc::try_unwrap(text).unwrap_or_else(|t| (*t).clone());
    let size = raw.len() as u64;
    let exports = symvers_text(raw, path, rs)?;
    if let Some(bytes) = encode(&key, content, &exports, size, &stamp, rs)? {
        // The cache is an optimisation: an entry that cannot be written is parsed next time.
        let _ = cache.write_entry(&key, &bytes, rs);
    }
    Ok((exports, Origin::Parsed))
}

/// The key of a Module.symvers' entry: its kind, the cache's format and the file's stamp.
fn key_of(stamp: &Stamp) -> Vec<u8> {
    let mut k = b"Module.symvers\0".to_vec();
    k.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    stamp.put(&mut k);
    k
}

/// The entry for `exports` (parsed from `size` bytes of plain text hashing to `content`);
/// `None` when its index does not encode or the entry would not be smaller than the file.
fn encode(
    key: &[u8],
    content: u128,
    exports: &Exports,
    size: u64,
    stamp: &Stamp,
    rs: &mut Resched,
) -> Result<Option<Vec<u8>>, Cancelled> {
    rs.tick_step()?;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    put_str(&mut out, env!("CARGO_PKG_VERSION"));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&content.to_le_bytes());
    // Absolute, so `klpsym cache --prune` finds the file from any folder.
    let source =
        std::path::absolute(&exports.source).unwrap_or_else(|_| exports.source.clone().into());
    put_str(&mut out, &source.to_string_lossy());
    out.extend_from_slice(&size.to_le_bytes());
    stamp.put(&mut out);
    let mut index = Vec::new();
    if !exports.symbols.encode_index(&mut index, rs)? {
        return Ok(None);
    }
    out.extend_from_slice(&(index.len() as u64).to_le_bytes());
    out.extend_from_slice(&index);
    let trailer = hash_in_steps(&out, rs)?;
    out.extend_from_slice(&trailer.to_le_bytes());
    Ok(((out.len() as u64) < size).then_some(out))
}

/// An entry's parts, when it is whole and of this format.
struct Parsed<'a> {
    key: &'a [u8],
    content: u128,
    source: &'a str,
    source_bytes: u64,
    /// The file's stamp when the entry was made.
    stamp: Stamp,
    /// Where the index lies in the entry.
    index: std::ops::Range<usize>,
}

fn parse<'a>(all: &'a [u8], rs: &mut Resched) -> Result<Option<Parsed<'a>>, Cancelled> {
    if !all.starts_with(MAGIC) {
        return Ok(None);
    }
    Ok(verified_body(all, rs)?.and_then(parse_body))
}

fn parse_body(body: &[u8]) -> Option<Parsed<'_>> {
    let mut b = body;
    if split(&mut b, 8)? != MAGIC || u32_at(&mut b)? != CACHE_FORMAT {
        return None;
    }
    // The version that wrote it: any version of this format reads it.
    take_str(&mut b)?;
    let klen = u32_at(&mut b)? as usize;
    let key = split(&mut b, klen)?;
    let content = u128::from_le_bytes(split(&mut b, 16)?.try_into().ok()?);
    let source = take_str(&mut b)?;
    let source_bytes = u64_at(&mut b)?;
    let stamp = Stamp::take(&mut b)?;
    let ilen = usize::try_from(u64_at(&mut b)?).ok()?;
    let start = body.len() - b.len();
    (b.len() == ilen).then_some(Parsed {
        key,
        content,
        source,
        source_bytes,
        stamp,
        index: start..start + ilen,
    })
}

/// The index in the entry at `entry`, over `text`, when the entry is whole, of this build and
/// key, and was made over bytes hashing to `content`.
fn open(
    entry: &Path,
    key: &[u8],
    content: u128,
    text: &Backing,
    rs: &mut Resched,
) -> Result<Option<ExportMap>, Cancelled> {
    let Some(backing) = map_entry(entry) else {
        return Ok(None);
    };
    let Some(p) = parse((*backing).as_ref(), rs)? else {
        return Ok(None);
    };
    if p.key != key || p.content != content {
        return Ok(None);
    }
    Ok(ExportMap::view_index(text, &backing, p.index.clone()))
}

/// The file an entry was made from, its size, and whether it still has the stamp it had
/// then, when `bytes` are an entry of this format (for `klpsym cache`; the trailer is not
/// checked: a damaged entry is found when it is used).
pub(crate) fn describe(bytes: &[u8]) -> Option<(String, u64, bool)> {
    let p = parse_body(&bytes[..bytes.len().checked_sub(16)?])?;
    let live = Stamp::now(Path::new(p.source)) == Some(p.stamp);
    Some((p.source.to_string(), p.source_bytes, live))
}

/// True when `bytes` start like an entry of this cache (of any format).
pub(crate) fn is_entry(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Module.symvers of `n` lines (every tenth in a namespace, every seventh a later line
    /// replacing an earlier one's CRC) with CRCs from `seed`.
    fn symvers(n: usize, seed: u32) -> String {
        let mut s = String::new();
        for i in 0..n {
            let name = if i % 7 == 6 { i - 3 } else { i };
            let ns = if i % 10 == 0 { "\tNS_X" } else { "" };
            let module = if i % 3 == 0 { "vmlinux" } else { "drivers/x/y" };
            s += &format!(
                "0x{:08x}\tsym_{name}\t{module}\tEXPORT_SYMBOL_GPL{ns}\n",
                (i as u32).wrapping_mul(2_654_435_761) ^ seed
            );
        }
        s
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        cache: Cache,
        file: std::path::PathBuf,
    }

    fn fixture(text: &[u8]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("cache"));
        let file = dir.path().join("Module.symvers");
        std::fs::write(&file, text).unwrap();
        Fixture {
            _dir: dir,
            cache,
            file,
        }
    }

    fn read_it(f: &Fixture) -> (Exports, Origin) {
        read(&f.cache, &f.file, 1 << 30, &mut Resched::none()).unwrap()
    }

    fn parsed(f: &Fixture) -> Exports {
        read_symvers(&f.file, 1 << 30, &mut Resched::none()).unwrap()
    }

    fn entries(c: &Cache) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&c.dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default()
    }

    /// The first read parses and keeps an entry smaller than the file; the next reads it and
    /// answers exactly as the parse does (every name, replaced lines, absent names, order).
    #[test]
    fn a_warm_read_answers_as_the_parse() {
        let f = fixture(symvers(3000, 1).as_bytes());
        let (cold, from) = read_it(&f);
        assert_eq!(from, Origin::Parsed);
        let [entry] = &entries(&f.cache)[..] else {
            panic!("one entry: {:?}", entries(&f.cache));
        };
        let size = std::fs::metadata(entry).unwrap().len();
        assert!(size < std::fs::metadata(&f.file).unwrap().len(), "{size}");
        let (warm, from) = read_it(&f);
        assert_eq!(from, Origin::Entry);
        let want = parsed(&f);
        assert_eq!(warm.source, want.source);
        assert!(warm.symbols.iter().eq(want.symbols.iter()));
        assert!(cold.symbols.iter().eq(want.symbols.iter()));
        for i in 0..3100 {
            let n = format!("sym_{i}");
            assert_eq!(warm.symbols.get(&n), want.symbols.get(&n), "{n}");
        }
        assert_eq!(
            describe(&std::fs::read(entry).unwrap()),
            Some((
                f.file.display().to_string(),
                symvers(3000, 1).len() as u64,
                true
            ))
        );
    }

    /// The stamp alone is never trusted: an entry under the key of a file whose bytes
    /// changed (as a file system with coarse times could leave it: same stamp, other bytes
    /// of the same length) is not used.
    #[test]
    fn an_entry_over_other_bytes_is_not_used() {
        let f = fixture(symvers(500, 1).as_bytes());
        let before = parsed(&f);
        let content = content_hash(symvers(500, 1).as_bytes(), &mut Resched::none()).unwrap();
        std::fs::write(&f.file, symvers(500, 2)).unwrap();
        let stamp = Stamp::of(&std::fs::metadata(&f.file).unwrap());
        let key = key_of(&stamp);
        let rs = &mut Resched::none();
        let forged = encode(&key, content, &before, u64::MAX, &stamp, rs)
            .unwrap()
            .unwrap();
        f.cache.write_entry(&key, &forged, rs).unwrap();
        let (got, from) = read_it(&f);
        assert_eq!(from, Origin::Parsed);
        assert!(got.symbols.iter().eq(parsed(&f).symbols.iter()));
        assert!(!got.symbols.iter().eq(before.symbols.iter()));
        assert_eq!(read_it(&f).1, Origin::Entry);
    }

    /// Every truncation and a flip of every byte of an entry: ignored (never a panic, never
    /// a wrong answer), the file parsed and the entry written again.
    #[test]
    fn a_damaged_entry_is_ignored_and_rebuilt() {
        let f = fixture(symvers(40, 3).as_bytes());
        read_it(&f);
        let [entry] = &entries(&f.cache)[..] else {
            panic!()
        };
        let good = std::fs::read(entry).unwrap();
        let want = parsed(&f);
        let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x41;
            damaged.push(b);
        }
        for b in damaged {
            std::fs::write(entry, &b).unwrap();
            let (got, from) = read_it(&f);
            assert_eq!(from, Origin::Parsed);
            assert!(got.symbols.iter().eq(want.symbols.iter()));
            assert_eq!(std::fs::read(entry).unwrap(), good);
        }
    }

    /// No entry for a file of a few lines (it would not be smaller), for a compressed one,
    /// or for one with a bad line (whose error is the parse's).
    #[test]
    fn files_an_entry_cannot_serve_are_parsed_every_time() {
        let tiny = fixture(b"0x00000001\tprintk\tvmlinux\tEXPORT_SYMBOL\n");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, symvers(2000, 4).as_bytes()).unwrap();
        let compressed = fixture(&gz.finish().unwrap());
        for f in [&tiny, &compressed] {
            for _ in 0..2 {
                let (got, from) = read_it(f);
                assert_eq!(from, Origin::Parsed);
                assert!(got.symbols.iter().eq(parsed(f).symbols.iter()));
            }
            assert!(entries(&f.cache).is_empty());
        }
        let mut text = symvers(2000, 5);
        text += "0x1\tonly_two\n";
        let bad = fixture(text.as_bytes());
        let err = read(&bad.cache, &bad.file, 1 << 30, &mut Resched::none()).unwrap_err();
        let want = read_symvers(&bad.file, 1 << 30, &mut Resched::none()).unwrap_err();
        assert_eq!(err.to_string(), want.to_string());
        assert!(err.to_string().contains("line 2001"), "{err}");
        assert!(entries(&bad.cache).is_empty());
    }
}
