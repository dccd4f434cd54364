//! Reading files: bounded in size, in steps with reschedule points between them, and
//! decompressed when they come compressed. Every file klpsym reads goes through here.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use klpsym_core::resched::Resched;

use crate::error::LoadError;

/// Reads a whole file, refusing more than `limit` bytes, reaching reschedule points between
/// bounded reads. Every file klpsym reads goes through here.
pub fn read_bounded(path: &Path, limit: u64, resched: &mut Resched) -> Result<Vec<u8>, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io_err)?;
    let meta = f.metadata().map_err(io_err)?;
    // Opening is a point too: a caller loading many files gets one between any two of them.
    resched
        .tick_step()
        .map_err(|c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c)))?;
    if meta.is_dir() {
        return Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "is a directory; expected a file".into(),
        });
    }
    // /proc files report size 0; regular files are read in one go.
    let size = meta.len();
    if size > limit {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
        });
    }
    // No huge pages: each read below would first touch one, zeroing 2 MiB in one kernel
    // entry (350 µs here), a stretch no reschedule point can break.
    let mut buf = Vec::with_capacity(if size > 0 { size as usize + 1 } else { 8 << 20 });
    // Read in bounded steps so a reschedule point comes between them: 16 KiB of a regular
    // file (a copy from the page cache into 4 fresh pages, each first touch a page fault of a
    // few µs here; read_to_end fills spare capacity without zeroing it first), or one read(2)
    // of a /proc file, which formats at most a page of lines per call.
    let step: u64 = 16 << 10;
    loop {
        let before = buf.len();
        if size > 0 {
            (&mut f).take(step).read_to_end(&mut buf).map_err(io_err)?;
        } else {
            buf.reserve(step as usize);
            // The kernel formats a /proc file one page per read(2) at most.
            let mut chunk = [0u8; 4 << 10];
            let got = loop {
                match f.read(&mut chunk) {
                    Ok(g) => break g,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(e)),
                }
            };
            buf.extend_from_slice(&chunk[..got]);
        }
        if buf.len() as u64 > limit {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                size: buf.len() as u64,
                limit,
            });
        }
        resched
            .tick_step()
            .map_err(|c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c)))?;
        if buf.len() == before {
            break;
        }
    }
    Ok(buf)
}

/// `raw` itself, or its decompressed bytes (at most `limit`) when it starts with gzip's or
/// XZ's magic (/proc/config.gz; RPM's symvers.gz or symvers.xz), read in steps.
pub fn decompressed<'a>(
    raw: &'a [u8],
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> Result<std::borrow::Cow<'a, [u8]>, LoadError> {
    let Some(c) = klpsym_image::sniff_compression(raw) else {
        return Ok(std::borrow::Cow::Borrowed(raw));
    };
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut d = klpsym_image::StreamDecoder::new(Some(c), raw, limit, rs).map_err(io)?;
    let mut v = Vec::new();
    d.read_to_end(&mut v).map_err(io)?;
    Ok(std::borrow::Cow::Owned(v))
}

/// A user's file read in place: mapped read-only and guarded (`map.rs`), or, when no guard
/// can be had, copied to a private temporary file and mapped (the only copy klpsym makes of
/// an input). What was read from it is trusted only after [`InPlaceFile::unchanged`].
pub(crate) struct InPlaceFile {
    /// The bytes.
    pub(crate) bytes: klpsym_core::Backing,
    guard: Option<std::sync::Arc<crate::map::InPlace>>,
    /// The file, open, and its stamp when it was mapped.
    file: std::fs::File,
    stamp: crate::file_stamp::Stamp,
}

impl std::fmt::Debug for InPlaceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlaceFile")
            .field("bytes", &(*self.bytes).as_ref().len())
            .field("guard", &self.guard)
            .field("stamp", &self.stamp)
            .finish()
    }
}

impl InPlaceFile {
    /// An error unless the file kept its stamp since it was mapped and no read fell past a
    /// cut (what was read then was the file's bytes, unless they were rewritten within the
    /// timestamp tick of its last change before it was mapped: see `stamp.rs`).
    pub(crate) fn unchanged(&self, path: &Path) -> Result<(), LoadError> {
        let now = self
            .file
            .metadata()
            .ok()
            .map(|m| crate::file_stamp::Stamp::of(&m));
        if now == Some(self.stamp) && !self.guard.as_ref().is_some_and(|g| g.damaged()) {
            return Ok(());
        }
        Err(LoadError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(
                "the file changed while it was read (written or cut short): read it again",
            ),
        })
    }
}

/// The file at `path` read in place ([`InPlaceFile`]): a vmlinux with debug info (400-630
/// MB) is mapped, only the pages of the sections read are touched, and nothing is copied.
pub(crate) fn in_place(
    path: &Path,
    opts: &crate::LoadOptions,
    resched: &mut Resched,
) -> Result<InPlaceFile, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    let stamp = crate::file_stamp::Stamp::of(&file.metadata().map_err(io_err)?);
    resched.tick_step()?;
    if let Some(m) = crate::map::map_in_place(&file, path).map_err(io_err)? {
        let guard = std::sync::Arc::new(m);
        return Ok(InPlaceFile {
            bytes: guard.clone(),
            guard: Some(guard),
            file,
            stamp,
        });
    }
    let bytes = private_copy(&file, path, opts, resched)?;
    Ok(InPlaceFile {
        bytes,
        guard: None,
        file,
        stamp,
    })
}

/// The file `src` copied into a private temporary file (unlinked; `copy_file_range`, so the
/// bytes need not pass through this process) and mapped read-only, in steps of 1 MiB (a few
/// hundred microseconds from the page cache) with a reschedule point between them: only when
/// no guarded map can be had (32 alive at once).
fn private_copy(
    src: &std::fs::File,
    path: &Path,
    opts: &crate::LoadOptions,
    resched: &mut Resched,
) -> Result<klpsym_core::Backing, LoadError> {
    use std::io::{Seek, SeekFrom};
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut src = src;
    src.seek(SeekFrom::Start(0)).map_err(io_err)?;
    let len = src.metadata().map_err(io_err)?.len();
    let mut dst = crate::entry::private_temp_file(opts.cache.as_ref()).map_err(io_err)?;
    let mut done = 0u64;
    while done < len {
        resched.tick_step()?;
        let step = (len - done).min(1 << 20);
        let n =
            std::io::copy(&mut std::io::Read::take(&mut src, step), &mut dst).map_err(io_err)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    dst.seek(SeekFrom::Start(0)).map_err(io_err)?;
    crate::entry::map_private(&dst).map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_style_files_without_a_size() {
        // /proc/self/maps reports size 0 like /proc/kallsyms; reading must still get it all.
        let p = Path::new("/proc/self/maps");
        if p.exists() {
            let b = read_bounded(p, 1 << 30, &mut Resched::none()).unwrap();
            assert!(!b.is_empty());
        }
    }
}
