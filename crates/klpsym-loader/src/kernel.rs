//! Loading one kernel symbol source: read, detect the kind from content, parse.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::resched::Resched;
use klpsym_core::SymbolTable;
use klpsym_sources::{parse_text, TextKind};

use crate::error::LoadError;

/// The source used when the user names none: the running kernel.
pub const DEFAULT_SOURCE: &str = "/proc/kallsyms";

/// What kind of source a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// /proc/kallsyms or a copy of it.
    Kallsyms,
    /// A System.map.
    SystemMap,
}

impl SourceKind {
    /// A short stable name (used in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Kallsyms => "kallsyms",
            SourceKind::SystemMap => "system_map",
        }
    }
}

/// Options for [`load`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Refuse inputs larger than this many bytes (a guard against reading a wrong, huge file).
    pub max_input_size: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_input_size: 1 << 30,
        }
    }
}

/// A loaded kernel symbol source.
#[derive(Debug)]
pub struct LoadedKernel {
    /// The path it came from.
    pub path: PathBuf,
    /// What it was.
    pub kind: SourceKind,
    /// Its symbols.
    pub table: SymbolTable,
    /// Time spent reading the file.
    pub read_time: Duration,
    /// Time spent parsing.
    pub parse_time: Duration,
    /// Bytes read.
    pub bytes: u64,
}

/// Reads `path` (a regular file or a /proc file), tells its kind from the content, and parses
/// it, reaching reschedule points through `resched`.
pub fn load(path: &Path, opts: &LoadOptions, resched: &mut Resched) -> Result<LoadedKernel, LoadError> {
    let t0 = Instant::now();
    let bytes = read_bounded(path, opts.max_input_size, resched)?;
    let read_time = t0.elapsed();
    let n = bytes.len() as u64;
    let t1 = Instant::now();
    if let Some(what) = binary_kind(&bytes) {
        return Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: format!(
                "{what}: this build of klpsym reads /proc/kallsyms and System.map text"
            ),
        });
    }
    let parsed = parse_text(bytes, resched).map_err(|source| LoadError::Text {
        path: path.to_path_buf(),
        source,
    })?;
    let kind = match parsed.kind {
        TextKind::SystemMap => SourceKind::SystemMap,
        TextKind::Kallsyms | TextKind::SystemMapStub => SourceKind::Kallsyms,
    };
    Ok(LoadedKernel {
        path: path.to_path_buf(),
        kind,
        table: parsed.table,
        read_time,
        parse_time: t1.elapsed(),
        bytes: n,
    })
}

/// Names a binary format from its magic bytes, for a helpful error.
fn binary_kind(bytes: &[u8]) -> Option<&'static str> {
    let magic: &[(&[u8], &str)] = &[
        (b"\x7fELF", "an ELF file"),
        (b"MZ", "a PE/bzImage kernel image"),
        (b"\xfd7zXZ\x00", "an XZ-compressed file"),
        (b"\x1f\x8b", "a gzip-compressed file"),
        (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
        (b"BZh", "a bzip2-compressed file"),
    ];
    magic
        .iter()
        .find(|(m, _)| bytes.starts_with(m))
        .map(|&(_, what)| what)
}

fn read_bounded(path: &Path, limit: u64, resched: &mut Resched) -> Result<Vec<u8>, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io_err)?;
    let meta = f.metadata().map_err(io_err)?;
    if meta.is_dir() {
        return Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "is a directory; expected a symbol source file".into(),
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
    let mut buf = Vec::with_capacity(if size > 0 { size as usize + 1 } else { 8 << 20 });
    // /proc files hand out about a page per read(2); copy through a fixed chunk so nothing is
    // zero-filled twice, and reach a reschedule point between reads.
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let got = match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        buf.extend_from_slice(&chunk[..got]);
        if buf.len() as u64 > limit {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                size: buf.len() as u64,
                limit,
            });
        }
        resched.tick().map_err(|c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c)))?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn loads_text_and_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("k.txt");
        std::fs::write(&good, "ffffffff81000000 T _text\n").unwrap();
        let k = load(&good, &LoadOptions::default(), &mut Resched::none()).unwrap();
        assert_eq!(k.table.len(), 1);
        assert_eq!(k.kind, SourceKind::Kallsyms);

        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "ffffffff81000000 T _text\nzz T x\n").unwrap();
        let e = load(&bad, &LoadOptions::default(), &mut Resched::none()).unwrap_err().to_string();
        assert!(e.contains("bad.txt: line 2: bad hex address"), "{e}");

        let elf = dir.path().join("x.ko");
        std::fs::File::create(&elf).unwrap().write_all(b"\x7fELF\x02\x01\x01").unwrap();
        let e = load(&elf, &LoadOptions::default(), &mut Resched::none()).unwrap_err().to_string();
        assert!(e.contains("an ELF file"), "{e}");

        let e = load(&dir.path().join("missing"), &LoadOptions::default(), &mut Resched::none()).unwrap_err().to_string();
        assert!(e.contains("missing: No such file"), "{e}");

        let opts = LoadOptions { max_input_size: 4 };
        assert!(matches!(load(&good, &opts, &mut Resched::none()), Err(LoadError::TooLarge { .. })));
    }

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
