//! Writing outputs safely: a temporary file in the destination's directory, renamed into place
//! only when everything was written. A failure leaves nothing behind and the old file intact.

use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes `path` through `fill`, atomically. The temporary file lives in the same directory so
/// the final rename never crosses a file system.
pub fn write_atomically<F>(path: &Path, fill: F) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_atomically_with(path, None, fill)
}

/// [`write_atomically`], giving the file `permissions` before it is renamed into place (a
/// converted module keeps its input's mode; the temporary file is created 0600).
pub fn write_atomically_with<F>(
    path: &Path,
    permissions: Option<std::fs::Permissions>,
    fill: F,
) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_atomically_as(path, permissions, true, fill)
}

/// [`write_atomically`] without waiting for the file to reach the disk, for a file that is
/// only a hint checked when it is read (a cache's stamp record: lost or torn by a crash, it
/// is ignored and made again). Waiting would cost a journal commit per file, behind the
/// hundreds of megabytes a cold run has just written.
pub(crate) fn write_atomically_unsynced<F>(path: &Path, fill: F) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_atomically_as(path, None, false, fill)
}

fn write_atomically_as<F>(
    path: &Path,
    permissions: Option<std::fs::Permissions>,
    sync: bool,
    fill: F,
) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let ctx = |e: io::Error, what: &str| {
        io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
    };
    let tmp = tempfile::Builder::new()
        .prefix(".klpsym-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| ctx(e, "cannot create a temporary file beside it"))?;
    {
        let mut w = BufWriter::new(tmp.as_file());
        fill(&mut w).map_err(|e| ctx(e, "writing"))?;
        w.flush().map_err(|e| ctx(e, "writing"))?;
    }
    if let Some(p) = permissions {
        tmp.as_file()
            .set_permissions(p)
            .map_err(|e| ctx(e, "setting the file mode"))?;
    }
    if sync {
        tmp.as_file().sync_all().map_err(|e| ctx(e, "syncing"))?;
    }
    tmp.persist(path)
        .map_err(|e| ctx(e.error, "renaming into place"))?;
    Ok(())
}

/// How a module file is compressed, from its name: `.ko.xz`, `.ko.zst`, `.ko.gz` as kbuild's
/// `modules_install` writes them (CONFIG_MODULE_COMPRESS_*), else plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleCompression {
    /// A plain `.ko`.
    None,
    /// `.ko.gz`.
    Gzip,
    /// `.ko.xz`.
    Xz,
    /// `.ko.zst`.
    Zstd,
}

impl ModuleCompression {
    /// The compression a module written to `path` gets, from its suffix.
    pub fn for_path(path: &Path) -> ModuleCompression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("xz") => ModuleCompression::Xz,
            Some("zst") => ModuleCompression::Zstd,
            Some("gz") => ModuleCompression::Gzip,
            _ => ModuleCompression::None,
        }
    }
}

/// Writes a module's bytes to `w`, compressed as kbuild compresses modules so every kernel
/// that decompresses modules reads it (scripts/Makefile.modinst: `xz --check=crc32
/// --lzma2=dict=1MiB`, since the kernel's XZ decoder checks CRC32 and the 1 MiB dictionary
/// bounds its memory; `zstd`; `gzip -n`). `write` writes the (plain) bytes in steps into the
/// encoder, so the caller keeps its reschedule points.
pub fn write_module<F>(w: &mut dyn Write, c: ModuleCompression, write: F) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    match c {
        ModuleCompression::None => write(w),
        ModuleCompression::Gzip => {
            let mut e = flate2::GzBuilder::new().write(w, flate2::Compression::best());
            write(&mut e)?;
            e.finish()?;
            Ok(())
        }
        ModuleCompression::Xz => {
            let mut opts = xz2::stream::LzmaOptions::new_preset(6).map_err(io::Error::other)?;
            opts.dict_size(1 << 20);
            let mut filters = xz2::stream::Filters::new();
            filters.lzma2(&opts);
            let stream =
                xz2::stream::Stream::new_stream_encoder(&filters, xz2::stream::Check::Crc32)
                    .map_err(io::Error::other)?;
            let mut e = xz2::write::XzEncoder::new_stream(w, stream);
            write(&mut e)?;
            e.finish()?;
            Ok(())
        }
        ModuleCompression::Zstd => {
            let mut e = zstd::stream::write::Encoder::new(w, 0)?;
            write(&mut e)?;
            e.finish()?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_compressed_by_their_suffix_and_read_back() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for (name, c) in [
            ("a.ko", ModuleCompression::None),
            ("a.ko.gz", ModuleCompression::Gzip),
            ("a.ko.xz", ModuleCompression::Xz),
            ("a.ko.zst", ModuleCompression::Zstd),
        ] {
            assert_eq!(ModuleCompression::for_path(Path::new(name)), c);
            let mut out = Vec::new();
            write_module(&mut out, c, |w| w.write_all(&data)).unwrap();
            let back = crate::decompressed(
                &out,
                Path::new(name),
                1 << 30,
                &mut klpsym_core::Resched::none(),
            )
            .unwrap();
            assert_eq!(back.as_ref(), data.as_slice(), "{name}");
            if c != ModuleCompression::None {
                assert!(out.len() < data.len() / 2, "{name} compressed");
            }
        }
        // The kernel's XZ decoder accepts no check but CRC32 (and none): the stream flags say
        // CRC32 (the byte after the 6-byte magic and a zero byte).
        let mut out = Vec::new();
        write_module(&mut out, ModuleCompression::Xz, |w| w.write_all(&data)).unwrap();
        assert_eq!(&out[..6], b"\xfd7zXZ\0");
        assert_eq!(out[7], 0x01, "CRC32 check");
    }

    #[test]
    fn failure_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, "old").unwrap();
        let err = write_atomically(&p, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("injected failure"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("injected failure"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temporary file left behind"
        );
        write_atomically(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }
}
