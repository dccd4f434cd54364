//! Telling a source's kind from its first bytes.

use std::path::Path;

/// What the first bytes of a file say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// /proc/kallsyms or System.map text.
    Text,
    /// An ELF relocatable object: a kernel module.
    ElfRelocatable,
    /// Another ELF object: a vmlinux (with or without .symtab).
    ElfExecutable,
    /// A compressed stream (a compressed module, or a compressed image).
    Compressed(&'static str),
    /// A kernel image (bzImage, arm64 Image, EFI zboot) or raw binary.
    Image,
}

/// Classifies `bytes`.
pub fn detect(bytes: &[u8]) -> Detected {
    if bytes.starts_with(b"\x7fELF") {
        // e_type at offset 16, little or big endian per EI_DATA.
        let et = match (bytes.get(5), bytes.get(16), bytes.get(17)) {
            (Some(2), Some(&a), Some(&b)) => u16::from_be_bytes([a, b]),
            (_, Some(&a), Some(&b)) => u16::from_le_bytes([a, b]),
            _ => 0,
        };
        return if et == 1 {
            Detected::ElfRelocatable
        } else {
            Detected::ElfExecutable
        };
    }
    if let Some(c) = klpsym_image::sniff_compression(bytes) {
        return Detected::Compressed(c.short_name());
    }
    if bytes.starts_with(b"MZ")
        || bytes.get(0x38..0x3c) == Some(b"ARM\x64")
        || bytes.get(0x202..0x206) == Some(b"HdrS")
    {
        return Detected::Image;
    }
    // Text: the first line looks like "hex space letter space".
    let head = &bytes[..bytes.len().min(256)];
    let looks_text = !head.is_empty()
        && head
            .iter()
            .all(|&c| c == b'\n' || c == b'\t' || c == b'\r' || (0x20..0x7f).contains(&c));
    if looks_text || bytes.is_empty() {
        Detected::Text
    } else {
        Detected::Image
    }
}

/// True when `path` is a .deb or an RPM (by its first bytes).
pub fn is_package(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 24];
    std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .is_ok_and(|n| klpsym_package::detect(&head[..n]).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies() {
        assert_eq!(detect(b"ffffffff81000000 T _text\n"), Detected::Text);
        let mut rel = b"\x7fELF\x02\x01\x01\x00".to_vec();
        rel.resize(18, 0);
        rel[16] = 1;
        assert_eq!(detect(&rel), Detected::ElfRelocatable);
        rel[16] = 2;
        assert_eq!(detect(&rel), Detected::ElfExecutable);
        assert_eq!(detect(b"\xfd7zXZ\x00rest"), Detected::Compressed("xz"));
        assert_eq!(detect(b"MZ\x00\x00"), Detected::Image);
        assert_eq!(detect(&[0x00, 0x01, 0xfe, 0x80]), Detected::Image);
    }
}
