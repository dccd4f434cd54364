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
    tmp.as_file().sync_all().map_err(|e| ctx(e, "syncing"))?;
    tmp.persist(path)
        .map_err(|e| ctx(e.error, "renaming into place"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
