//! What every cache entry (a kernel's table, a module tree's listing, a Module.symvers'
//! index, a stamp record) is made of: the cache's format, length-prefixed fields, a trailer
//! that is the body's hash, read through a read-only map; and the identities that prove an
//! input unchanged (a content hash, or an ELF's build id).

use std::fs::File;
use std::path::Path;

use klpsym_core::resched::{Cancelled, Resched};

use crate::error::LoadError;

/// The cache's format, part of every entry's key and written in every entry: an entry is
/// read by any build of klpsym (the command, the Python extension, a library program, of any
/// version) whose format is the same, and ignored by the others.
///
/// **Bump it whenever what an entry holds could change for the same input**: the layout of
/// any entry (`cache.rs`, `parts_cache.rs`, `tree_cache.rs`, `symvers_cache.rs`,
/// `stamp.rs`, the debug sections of `debug_lines.rs`), the encodings they embed
/// (klpsym-core's table and name index, klpsym-sources' export map and Module.symvers
/// index, `LineIndex`), or what any decoder makes of an input (klpsym-image's kallsyms,
/// banner and export decoding, klpsym-elf's vmlinux and DWARF readers, klpsym-package's
/// member choice, klpsym-sources' parsers, `SourceFacts` and its notes). An entry written
/// by a build with older decoders would otherwise be answered as if this build had read
/// the input. (Before format 11 the key held the executable's size and mtime instead, so
/// every build wrote its own entries.) 12: a -dbg vmlinux's data symbols name their files,
/// assembler units' paths relative to the tree (#48).
pub const CACHE_FORMAT: u32 = 12;

pub(crate) fn split<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (h, t) = b.split_at(n);
    *b = t;
    Some(h)
}

pub(crate) fn u32_at(b: &mut &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(split(b, 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &mut &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(split(b, 8)?.try_into().ok()?))
}

/// An entry's body (all but its 16-byte trailer) when the trailer is the body's xxh3-128.
pub(crate) fn verified_body<'a>(
    all: &'a [u8],
    rs: &mut Resched,
) -> Result<Option<&'a [u8]>, Cancelled> {
    let Some(body_len) = all.len().checked_sub(16) else {
        return Ok(None);
    };
    let (body, trailer) = all.split_at(body_len);
    let Ok(trailer) = <[u8; 16]>::try_from(trailer) else {
        return Ok(None);
    };
    Ok((u128::from_le_bytes(trailer) == hash_in_steps(body, rs)?).then_some(body))
}

/// The entry file at `entry`, memory-mapped; `None` when it cannot be opened or mapped.
pub(crate) fn map_entry(entry: &Path) -> Option<klpsym_core::Backing> {
    let f = File::open(entry).ok()?;
    // SAFETY: the map is read-only and klpsym never writes an entry in place (entries are
    // written to a temporary file and renamed over), so the mapped bytes do not change
    // under the map; every reader bounds-checks and hash-verifies what it reads.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    Some(std::sync::Arc::new(map))
}

/// A private temporary file (unlinked: gone with the process) for a spilled or copied
/// vmlinux of hundreds of megabytes: in the cache folder when there is one, on the disk the
/// cache is on, else in the temporary folder (`TMPDIR`, `/tmp`), which may be memory (tmpfs,
/// Debian's default since 13), where the file would count as the process's own.
pub(crate) fn private_temp_file(cache: Option<&crate::Cache>) -> std::io::Result<File> {
    match cache.filter(|c| c.dir.is_dir()) {
        Some(c) => tempfile::tempfile_in(&c.dir).or_else(|_| tempfile::tempfile()),
        None => tempfile::tempfile(),
    }
}

/// A private temporary file klpsym wrote (a package's spilled member), mapped read-only. The
/// file is unlinked ([`private_temp_file`]), so nothing but this process can change it.
pub(crate) fn map_private(f: &File) -> std::io::Result<klpsym_core::Backing> {
    // SAFETY: the map is read-only, and the file is an unlinked temporary file this process
    // created and finished writing before mapping it: no one else can open it, and klpsym
    // never writes it again, so the mapped bytes do not change under the map.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(f) }?;
    Ok(std::sync::Arc::new(map))
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub(crate) fn take_str<'a>(b: &mut &'a [u8]) -> Option<&'a str> {
    let n = u32_at(b)? as usize;
    std::str::from_utf8(split(b, n)?).ok()
}

/// Inputs are hashed in chunks of this size, so that both cores can hash one file: the
/// content hash is the xxh3-128 of the input's length and its chunks' xxh3-128 hashes.
pub(crate) const HASH_CHUNK: u64 = 1 << 20;

pub(crate) fn combine(len: u64, chunks: &[u128]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&len.to_le_bytes());
    for c in chunks {
        h.update(&c.to_le_bytes());
    }
    h.digest128()
}

/// The identity the cache records for an input's bytes: for an ELF file with a GNU build id
/// (a vmlinux, stripped or with debug symbols), the build id and the file's length; for
/// anything else the content hash of every byte ([`content_hash`]).
///
/// The build id is the linker's hash of what it linked: another build of the kernel has
/// another one. Proving a vmlinux unchanged by it reads a few kilobytes instead of hashing
/// 66-500 MB. What it cannot catch: bytes changed after linking that leave the build id and
/// the length alone, rewritten within one timestamp tick (the fast key catches every later
/// rewrite, by its change time).
pub fn input_identity(bytes: &[u8], rs: &mut Resched) -> Result<u128, Cancelled> {
    match build_id_identity_of(bytes) {
        Some(id) => Ok(id),
        None => content_hash(bytes, rs),
    }
}

/// [`input_identity`] of `bytes` when they are an ELF file with a build id, read from its
/// headers and notes only (so `bytes` may be a sparse read, its code left zero); `None`
/// otherwise.
pub(crate) fn build_id_identity_of(bytes: &[u8]) -> Option<u128> {
    let mut read = |off: u64, len: usize| {
        let off = usize::try_from(off).ok()?;
        bytes.get(off..off.checked_add(len)?).map(<[u8]>::to_vec)
    };
    klpsym_elf::build_id_from_notes(&mut read).map(|id| build_id_identity(bytes.len() as u64, &id))
}

/// [`input_identity`] of the file at `path` when it is an ELF file with a build id (read with
/// a few small reads); `None` when it is not one (its identity is then its content hash).
pub(crate) fn file_build_id_identity(file: &File, len: u64) -> Option<u128> {
    use std::os::unix::fs::FileExt;
    let mut read = |off: u64, n: usize| {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, off).ok()?;
        Some(buf)
    };
    klpsym_elf::build_id_from_notes(&mut read).map(|id| build_id_identity(len, &id))
}

fn build_id_identity(len: u64, id: &[u8]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(b"klpsym: ELF build id\0");
    h.update(&len.to_le_bytes());
    h.update(id);
    h.digest128()
}

/// The xxh3-128 of `bytes`, 64 KiB per step with a reschedule point between steps (a whole
/// 66 MB vmlinux in one call would be a 7 ms stretch).
pub(crate) fn hash_in_steps(bytes: &[u8], rs: &mut Resched) -> Result<u128, Cancelled> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for chunk in bytes.chunks(64 << 10) {
        rs.tick_step()?;
        h.update(chunk);
    }
    Ok(h.digest128())
}

/// The hash the cache records for an input's bytes: the xxh3-128 of its length and of its
/// 1 MiB chunks' xxh3-128 hashes (so two threads can hash one file).
pub fn content_hash(bytes: &[u8], rs: &mut Resched) -> Result<u128, Cancelled> {
    let mut chunks = Vec::with_capacity(bytes.len().div_ceil(HASH_CHUNK as usize));
    for c in bytes.chunks(HASH_CHUNK as usize) {
        chunks.push(hash_in_steps(c, rs)?);
    }
    Ok(combine(bytes.len() as u64, &chunks))
}

/// The identity of the file at `path` ([`input_identity`] of its bytes), read from the file:
/// its build id when it is an ELF file with one (a few small reads), else its content hash,
/// its 1 MiB chunks shared out between this thread and a helper (when the system gives
/// one), never held whole. `None` when the file's length changed while it was read;
/// [`LoadError::TooLarge`] when it is longer than `limit`.
pub(crate) fn prove_identity(
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> Result<Option<u128>, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    if len > limit {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size: len,
            limit,
        });
    }
    if let Some(id) = file_build_id_identity(&file, len) {
        return Ok(Some(id));
    }
    let chunks = Chunks {
        path,
        file,
        len,
        next: std::sync::atomic::AtomicUsize::new(0),
        done: std::sync::Mutex::new(vec![None; len.div_ceil(HASH_CHUNK) as usize]),
    };
    let mut helper = rs.sibling();
    std::thread::scope(|s| {
        let helping = std::thread::Builder::new()
            .spawn_scoped(s, || chunks.work(&mut helper))
            .ok();
        let mine = chunks.work(rs);
        let theirs = helping.map_or(Ok(()), |h| {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        });
        mine.and(theirs)
    })?;
    if chunks.file.metadata().map_err(io_err)?.len() != len {
        return Ok(None);
    }
    let done = chunks.done.into_inner().unwrap_or_else(|p| p.into_inner());
    let all: Option<Vec<u128>> = done.into_iter().collect();
    Ok(all.map(|all| combine(len, &all)))
}

/// A file's chunks, hashed by whichever thread takes each.
struct Chunks<'a> {
    path: &'a Path,
    file: File,
    len: u64,
    /// The next chunk to take.
    next: std::sync::atomic::AtomicUsize,
    done: std::sync::Mutex<Vec<Option<u128>>>,
}

impl Chunks<'_> {
    /// Takes chunks until none is left, 64 KiB per read with a reschedule point between.
    fn work(&self, rs: &mut Resched) -> Result<(), LoadError> {
        use std::os::unix::fs::FileExt;
        let io_err = |source| LoadError::Io {
            path: self.path.to_path_buf(),
            source,
        };
        let jobs = self.len.div_ceil(HASH_CHUNK) as usize;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let job = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if job >= jobs {
                return Ok(());
            }
            let start = job as u64 * HASH_CHUNK;
            let end = (start + HASH_CHUNK).min(self.len);
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            let mut at = start;
            while at < end {
                rs.tick_step()?;
                let want = ((end - at) as usize).min(buf.len());
                let n = match self.file.read_at(&mut buf[..want], at) {
                    // Shorter than it was: the length check after the work says so.
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(e)),
                };
                h.update(&buf[..n]);
                at += n as u64;
            }
            self.done.lock().unwrap_or_else(|p| p.into_inner())[job] = Some(h.digest128());
        }
    }
}
