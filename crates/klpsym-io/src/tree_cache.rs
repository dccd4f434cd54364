//! Module tree listings kept between runs: which module files lie under a folder, proven
//! unchanged by one `stat` per directory instead of reading every directory again.
//!
//! A distribution kernel's /lib/modules/VERSION holds about 900 directories and 4,000-6,000
//! modules; walking it was the biggest single cost of a warm `check` (~25 ms, half of it the
//! kernel's getdents). A listing entry keeps the tree the walk made (each module's name and
//! file, in name order, and the names found twice) and every directory it read with its
//! stamp ([`DirStamp`]: device, inode, mtime and ctime, taken before the directory was read). Adding, removing or renaming an entry in a directory
//! changes its mtime and ctime, and replacing the directory changes its inode, so when every
//! directory still has its stamp the tree holds the files the walk found. Any difference, or
//! an entry that is truncated, corrupt or of another format, means a walk and a new entry.
//!
//! What a stamp cannot tell: a directory changed within the timestamp tick of the stat that
//! recorded it keeps both times (file system times are coarse, a few milliseconds). A listing
//! is therefore kept only when every directory's ctime (which no program can set) is older
//! than the walk by [`SETTLED`]: a tree changed just before a walk is walked again next time.
//! File contents are never part of a listing: a module file is read when it is used.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use klpsym_core::resched::{Cancelled, Resched};
use xxhash_rust::xxh3::xxh3_128;

use crate::cache_dir::Cache;
use crate::entry::{split, u32_at, u64_at, CACHE_FORMAT};
use crate::error::LoadError;
/// How much older than the walk every directory must be for its listing to be kept (the
/// stamp records' margin: see `stamp.rs`).
use crate::file_stamp::SETTLED;
use crate::modules::{walk, DirStamp, ModuleFile, ModuleTree};

/// The first bytes of a listing entry (a kernel's entry starts otherwise).
const MAGIC: &[u8; 8] = b"KLPSYMT\0";

/// The module tree of folder `dir`: its listing when every directory is unchanged, else a walk
/// (whose listing is kept for next time when the tree has settled).
pub(crate) fn open(cache: &Cache, dir: &Path, rs: &mut Resched) -> Result<ModuleTree, LoadError> {
    open_at(cache, dir, rs, SystemTime::now)
}

/// [`open`], reading the time the walk starts from `clock`.
fn open_at(
    cache: &Cache,
    dir: &Path,
    rs: &mut Resched,
    clock: fn() -> SystemTime,
) -> Result<ModuleTree, LoadError> {
    let key = key_of(dir);
    let entry = cache.entry_path(&key);
    if cache.private() {
        if let Some(tree) = read(&entry, &key, dir, rs)? {
            return Ok(tree);
        }
    }
    let started = clock();
    let mut stamps = Vec::new();
    let files = walk(dir, rs, Some(&mut stamps))?;
    let tree = ModuleTree::from_sorted_paths(dir, files, rs)?;
    // Every ctime at least SETTLED before the walk (a ctime before 1970 is not trusted).
    let settled = stamps.iter().all(|(_, s)| {
        let ctime = Duration::new(s.ctime.0.try_into().unwrap_or(u64::MAX), s.ctime.1 as u32);
        ctime
            .checked_add(SETTLED)
            .and_then(|d| SystemTime::UNIX_EPOCH.checked_add(d))
            .is_some_and(|t| t <= started)
    });
    if settled {
        let bytes = encode(&tree, &key, &stamps, rs)?;
        // The cache is an optimisation: a listing that cannot be written is walked next time.
        let _ = cache.write_entry(&key, &bytes, rs);
    }
    Ok(tree)
}

/// The key of `dir`'s listing: the cache's format, and the folder's absolute path.
fn key_of(dir: &Path) -> Vec<u8> {
    let mut k = b"module tree\0".to_vec();
    k.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    k.extend_from_slice(abs.as_os_str().as_bytes());
    k
}

/// The tree from the entry at `entry`, when it is whole, of this format and key, and every
/// directory it lists still has its stamp; `None` otherwise.
fn read(
    entry: &Path,
    key: &[u8],
    dir: &Path,
    rs: &mut Resched,
) -> Result<Option<ModuleTree>, LoadError> {
    let Ok(bytes) = std::fs::read(entry) else {
        return Ok(None);
    };
    let Some(listing) = decode(&bytes, Some(key), rs)? else {
        return Ok(None);
    };
    if !unchanged(&listing, dir, rs)? {
        return Ok(None);
    }
    let mut by_name = Vec::with_capacity(listing.modules.len());
    let dir_len = dir.as_os_str().len();
    for (name, rel) in listing.modules {
        rs.tick()?;
        // One allocation per path (a join grows the root's copy).
        let mut path = PathBuf::with_capacity(dir_len + 1 + rel.len());
        path.push(dir);
        path.push(OsStr::from_bytes(rel));
        by_name.push((name.to_string(), ModuleFile::Path(path)));
    }
    Ok(Some(ModuleTree {
        root: dir.to_path_buf(),
        // In name order already: built in one pass.
        by_name: by_name.into_iter().collect(),
        duplicates: listing.duplicates.iter().map(|d| d.to_string()).collect(),
        listing: Some(entry.to_path_buf()),
    }))
}

/// True when every directory `listing` read under `dir` still has its stamp.
fn unchanged(listing: &Listing<'_>, dir: &Path, rs: &mut Resched) -> Result<bool, Cancelled> {
    // Each directory stat'ed from the root's descriptor: a few path components, not the
    // root's whole path again.
    let Ok(root) = rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return Ok(false);
    };
    for &(rel, stamp) in &listing.dirs {
        rs.tick()?;
        // The root as the walk read it (through a symbolic link), the rest as entries.
        let st = if rel.is_empty() {
            rustix::fs::fstat(&root)
        } else {
            let rel = OsStr::from_bytes(rel);
            rustix::fs::statat(&root, rel, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        };
        if st.ok().and_then(|st| DirStamp::of(&st)) != Some(stamp) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a listing entry holds, borrowed from its bytes: a warm run allocates only what the
/// tree keeps (a name and a path per module), never a path per directory it checks.
#[derive(Debug, PartialEq, Eq)]
struct Listing<'a> {
    /// The folder walked, as it was named.
    root: &'a [u8],
    /// Every directory read, relative to the root ("" for the root), with its stamp.
    dirs: Vec<(&'a [u8], DirStamp)>,
    /// Each module's name and file (relative to the root), in name order.
    modules: Vec<(&'a str, &'a [u8])>,
    /// Names found more than once.
    duplicates: Vec<&'a str>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn take_bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = u32_at(b)? as usize;
    split(b, n)
}

/// The entry: magic, format, version, key, root, the directories (path, device, inode,
/// mtime, ctime), the modules (name, file), the names found twice, then the xxh3-128 of
/// everything before it.
fn encode(
    tree: &ModuleTree,
    key: &[u8],
    stamps: &[(PathBuf, DirStamp)],
    rs: &mut Resched,
) -> Result<Vec<u8>, Cancelled> {
    // Absolute: `klpsym cache` and `--prune` judge the folder from any folder.
    let abs = std::path::absolute(&tree.root).unwrap_or_else(|_| tree.root.clone());
    let dir = &abs;
    let mut out = Vec::with_capacity(64 + stamps.len() * 80 + tree.by_name.len() * 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    // The version that wrote it: any version of this format reads it.
    put_bytes(&mut out, env!("CARGO_PKG_VERSION").as_bytes());
    put_bytes(&mut out, key);
    put_bytes(&mut out, dir.as_os_str().as_bytes());
    out.extend_from_slice(&(stamps.len() as u32).to_le_bytes());
    for (rel, s) in stamps {
        rs.tick()?;
        put_bytes(&mut out, rel.as_os_str().as_bytes());
        for v in [s.dev, s.ino, s.mtime.0 as u64, s.mtime.1 as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [s.ctime.0 as u64, s.ctime.1 as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out.extend_from_slice(&(tree.by_name.len() as u32).to_le_bytes());
    for (name, file) in &tree.by_name {
        rs.tick()?;
        let f = file.label();
        put_bytes(&mut out, name.as_bytes());
        put_bytes(
            &mut out,
            f.strip_prefix(dir).unwrap_or(f).as_os_str().as_bytes(),
        );
    }
    out.extend_from_slice(&(tree.duplicates.len() as u32).to_le_bytes());
    for d in &tree.duplicates {
        rs.tick()?;
        put_bytes(&mut out, d.as_bytes());
    }
    let trailer = xxh3_128(&out);
    out.extend_from_slice(&trailer.to_le_bytes());
    Ok(out)
}

/// The listing in `bytes`, when they are a whole entry of this format and version (and of
/// `key`, when given).
fn decode<'a>(
    bytes: &'a [u8],
    key: Option<&[u8]>,
    rs: &mut Resched,
) -> Result<Option<Listing<'a>>, Cancelled> {
    let Some((body, trailer)) = bytes.len().checked_sub(16).map(|n| bytes.split_at(n)) else {
        return Ok(None);
    };
    if trailer != xxh3_128(body).to_le_bytes() {
        return Ok(None);
    }
    let mut b = body;
    let header = |b: &mut &'a [u8]| -> Option<&'a [u8]> {
        (split(b, 8)? == MAGIC).then_some(())?;
        (u32_at(b)? == CACHE_FORMAT).then_some(())?;
        take_bytes(b)?;
        let k = take_bytes(b)?;
        key.is_none_or(|key| key == k).then_some(())?;
        take_bytes(b)
    };
    let Some(root) = header(&mut b) else {
        return Ok(None);
    };
    let Some(n) = u32_at(&mut b) else {
        return Ok(None);
    };
    let mut dirs = Vec::with_capacity((n as usize).min(b.len() / 52));
    for _ in 0..n {
        rs.tick()?;
        let stamp = |b: &mut &'a [u8]| -> Option<(&'a [u8], DirStamp)> {
            let rel = take_bytes(b)?;
            let mut v = [0u64; 6];
            for x in &mut v {
                *x = u64_at(b)?;
            }
            let s = DirStamp {
                dev: v[0],
                ino: v[1],
                mtime: (v[2] as i64, v[3] as i64),
                ctime: (v[4] as i64, v[5] as i64),
            };
            Some((rel, s))
        };
        match stamp(&mut b) {
            Some(d) => dirs.push(d),
            None => return Ok(None),
        }
    }
    let name = |b: &mut &'a [u8]| std::str::from_utf8(take_bytes(b)?).ok();
    let Some(n) = u32_at(&mut b) else {
        return Ok(None);
    };
    let mut modules = Vec::with_capacity((n as usize).min(b.len() / 8));
    for _ in 0..n {
        rs.tick()?;
        let module = |b: &mut &'a [u8]| Some((name(b)?, take_bytes(b)?));
        match module(&mut b) {
            // In strictly increasing name order, as the tree keeps them.
            Some(m) if modules.last().is_none_or(|&(last, _)| last < m.0) => modules.push(m),
            _ => return Ok(None),
        }
    }
    let Some(n) = u32_at(&mut b) else {
        return Ok(None);
    };
    let mut duplicates = Vec::new();
    for _ in 0..n {
        rs.tick()?;
        match name(&mut b) {
            Some(d) => duplicates.push(d),
            None => return Ok(None),
        }
    }
    // The root is always the first directory; nothing may follow the names.
    if !b.is_empty() || dirs.first().is_none_or(|(r, _)| !r.is_empty()) {
        return Ok(None);
    }
    Ok(Some(Listing {
        root,
        dirs,
        modules,
        duplicates,
    }))
}

/// The folder a listing entry's bytes describe, and whether every directory it read is
/// unchanged, when they are a whole listing of this format (for `klpsym cache`).
pub(crate) fn describe(
    bytes: &[u8],
    rs: &mut Resched,
) -> Result<Option<(PathBuf, bool)>, Cancelled> {
    let Some(l) = decode(bytes, None, rs)? else {
        return Ok(None);
    };
    let root = PathBuf::from(OsStr::from_bytes(l.root));
    let live = unchanged(&l, &root, rs)?;
    Ok(Some((root, live)))
}

/// True when `bytes` start like an entry of this cache (of any format).
pub(crate) fn is_entry(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk that pretends to start an hour from now: the trees made here are settled.
    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    fn tree_view(t: &ModuleTree) -> (Vec<PathBuf>, Vec<String>) {
        let files = t.files().map(|f| f.label().to_path_buf()).collect();
        (files, t.duplicates.clone())
    }

    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        cache: Cache,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("modules");
        for (p, body) in [
            ("kernel/fs/ext4/ext4.ko", "x"),
            ("kernel/lib/crc-itu-t.ko.xz", "x"),
            ("kernel/lib/notes.txt", "x"),
            ("extra/ext4.ko", "dup"),
            ("updates/deep/er/zz.ko.zst", "x"),
        ] {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let cache = Cache::new(tmp.path().join("cache"));
        Fixture {
            _tmp: tmp,
            root,
            cache,
        }
    }

    fn open_later(f: &Fixture) -> ModuleTree {
        open_at(&f.cache, &f.root, &mut Resched::none(), later).unwrap()
    }

    /// Waits until the file system's clock has moved past `dir`'s ctime, so that a change
    /// made next gives it another one (times are coarse: a change in the same tick keeps it).
    fn next_tick(dir: &Path) {
        let ctime = |p: &Path| {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(p).unwrap();
            (m.ctime(), m.ctime_nsec())
        };
        let was = ctime(dir);
        let probe = dir.parent().unwrap().join(".tick");
        for _ in 0..1000 {
            std::fs::write(&probe, b"").unwrap();
            if ctime(&probe) > was {
                std::fs::remove_file(&probe).unwrap();
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("the file system's clock did not move");
    }

    #[test]
    fn a_listing_is_read_back_as_the_walk_found_it() {
        let f = fixture();
        let walked = ModuleTree::scan(&f.root).unwrap();
        let first = open_later(&f);
        assert!(first.listing.is_none(), "no entry yet");
        let second = open_later(&f);
        assert!(
            second.listing.is_some(),
            "the listing was kept and read back"
        );
        assert_eq!(tree_view(&second), tree_view(&walked));
        assert_eq!(tree_view(&first), tree_view(&walked));
        assert_eq!(second.duplicates, ["ext4"]);
        assert_eq!(
            second.file("ext4").unwrap().label(),
            f.root.join("extra/ext4.ko")
        );
        // `klpsym cache` sees which folder it is.
        let bytes = std::fs::read(second.listing.as_ref().unwrap()).unwrap();
        assert_eq!(
            describe(&bytes, &mut Resched::none()).unwrap(),
            Some((f.root.clone(), true))
        );
    }

    #[test]
    fn a_change_anywhere_in_the_tree_is_walked_again() {
        type Change = fn(&Path);
        let changes: [(&str, &str, Change); 5] = [
            ("a module added deep down", "updates/deep/er", |r| {
                std::fs::write(r.join("updates/deep/er/new.ko"), b"x").unwrap()
            }),
            ("a module removed", "kernel/lib", |r| {
                std::fs::remove_file(r.join("kernel/lib/crc-itu-t.ko.xz")).unwrap()
            }),
            ("a module renamed", "kernel/fs/ext4", |r| {
                std::fs::rename(
                    r.join("kernel/fs/ext4/ext4.ko"),
                    r.join("kernel/fs/ext4/ext5.ko"),
                )
                .unwrap()
            }),
            ("a directory replaced", "updates", |r| {
                std::fs::remove_dir_all(r.join("updates/deep")).unwrap();
                std::fs::create_dir_all(r.join("updates/deep/er")).unwrap();
            }),
            ("a directory added", "kernel", |r| {
                std::fs::create_dir_all(r.join("kernel/net")).unwrap();
                std::fs::write(r.join("kernel/net/tcp_x.ko"), b"x").unwrap();
            }),
        ];
        for (what, dir, change) in changes {
            let f = fixture();
            open_later(&f);
            assert!(open_later(&f).listing.is_some(), "{what}: primed");
            next_tick(&f.root.join(dir));
            change(&f.root);
            let t = open_later(&f);
            assert!(t.listing.is_none(), "{what}: the old listing was trusted");
            assert_eq!(
                tree_view(&t),
                tree_view(&ModuleTree::scan(&f.root).unwrap()),
                "{what}"
            );
            let again = open_later(&f);
            assert!(again.listing.is_some(), "{what}: the new listing was kept");
            assert_eq!(tree_view(&again), tree_view(&t), "{what}");
        }
    }

    #[test]
    fn a_damaged_listing_is_ignored_and_rebuilt() {
        let f = fixture();
        open_later(&f);
        let entry = open_later(&f).listing.unwrap();
        let good = std::fs::read(&entry).unwrap();
        let walked = tree_view(&ModuleTree::scan(&f.root).unwrap());
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 1;
        let mut other_format = good.clone();
        other_format[8] ^= 0xff;
        for (what, bytes) in [
            ("truncated", good[..good.len() - 1].to_vec()),
            ("a flipped byte", flipped),
            ("another format", other_format),
            ("empty", Vec::new()),
        ] {
            std::fs::write(&entry, &bytes).unwrap();
            let t = open_later(&f);
            assert!(t.listing.is_none(), "{what}: trusted");
            assert_eq!(tree_view(&t), walked, "{what}");
            assert_eq!(std::fs::read(&entry).unwrap(), good, "{what}: not rebuilt");
        }
    }

    #[test]
    fn a_tree_changed_just_before_the_walk_is_not_kept() {
        let f = fixture();
        // Made a moment ago: its directories' ctimes are within the settling time.
        let t = open(&f.cache, &f.root, &mut Resched::none()).unwrap();
        assert_eq!(t.len(), 3);
        assert!(!f.cache.entry_path(&key_of(&f.root)).exists());
    }

    #[test]
    fn every_truncation_of_an_entry_is_refused() {
        let f = fixture();
        open_later(&f);
        let entry = open_later(&f).listing.unwrap();
        let good = std::fs::read(&entry).unwrap();
        let mut rs = Resched::none();
        assert!(decode(&good, None, &mut rs).unwrap().is_some());
        for n in 0..good.len() {
            assert!(decode(&good[..n], None, &mut rs).unwrap().is_none(), "{n}");
        }
    }
}
