//! Module.symvers files as the kernel's build and packages ship them (plain, gzip, XZ), read
//! and handed to the parser (`klpsym_sources::symvers`).

use std::path::Path;

use klpsym_core::resched::Resched;
use klpsym_sources::{parse_symvers_text, Exports, SymversError};

use crate::error::LoadError;
use crate::read::{decompressed, read_bounded};

/// Reads a Module.symvers (`CRC<TAB>NAME<TAB>MODULE<TAB>EXPORT_TYPE[<TAB>NAMESPACE]`).
pub fn read_symvers(path: &Path, limit: u64, resched: &mut Resched) -> Result<Exports, LoadError> {
    let raw = read_bounded(path, limit, resched)?;
    if klpsym_image::sniff_compression(&raw).is_some() {
        return parse_symvers(&raw, path, resched);
    }
    symvers_text(raw, path, resched)
}

/// Parses a Module.symvers' bytes (gzip- or XZ-compressed as some distributions ship it, or
/// plain); `path` names it.
pub fn parse_symvers(raw: &[u8], path: &Path, resched: &mut Resched) -> Result<Exports, LoadError> {
    let text = match decompressed(raw, path, 256 << 20, resched)? {
        std::borrow::Cow::Borrowed(b) => b.to_vec(),
        std::borrow::Cow::Owned(v) => v,
    };
    symvers_text(text, path, resched)
}

/// The exports a Module.symvers' text lists; the text becomes the map's own.
pub(crate) fn symvers_text(
    text: Vec<u8>,
    path: &Path,
    resched: &mut Resched,
) -> Result<Exports, LoadError> {
    parse_symvers_text(text, path.display().to_string(), resched).map_err(|e| match e {
        SymversError::Cancelled(_) => LoadError::Cancelled,
        e => LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: e.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_sources::Export;

    fn e(crc: u32, module: &str, ns: Option<&str>) -> Export<'static> {
        Export {
            crc: Some(crc),
            module: Box::leak(module.to_string().into_boxed_str()),
            namespace: ns.map(|n| &*Box::leak(n.to_string().into_boxed_str())),
        }
    }

    #[test]
    fn compressed_symvers_read_the_same() {
        use std::io::Write;
        let text = "0x5\tkmalloc\tvmlinux\tEXPORT_SYMBOL\t\n";
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(text.as_bytes()).unwrap();
        let gz = z.finish().unwrap();
        let m = parse_symvers(&gz, Path::new("symvers.gz"), &mut Resched::none())
            .unwrap()
            .symbols;
        assert_eq!(m.get("kmalloc"), Some(e(5, "vmlinux", None)));
        let dir = tempfile::tempdir().unwrap();
        for (f, b) in [("plain", text.as_bytes()), ("gz", &gz[..])] {
            let p = dir.path().join(f);
            std::fs::write(&p, b).unwrap();
            let m = read_symvers(&p, 1 << 20, &mut Resched::none())
                .unwrap()
                .symbols;
            assert_eq!(m.get("kmalloc"), Some(e(5, "vmlinux", None)), "{f}");
        }
    }
}
