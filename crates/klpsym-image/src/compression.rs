//! The compressions a kernel build can apply to its payload: a value of its own, which the
//! container sniffer, the codecs and the errors all name.

use std::fmt;

/// A compression the kernel build can apply to its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    Gzip,
    Xz,
    Zstd,
    /// The legacy LZ4 frame format (`lz4 -l`, magic 0x184C2102).
    Lz4Legacy,
    /// LZMA-alone (`.lzma`).
    Lzma,
    Bzip2,
    /// Recognised but not decoded (no well-kept pure crate); reported as unsupported.
    Lzo,
}

impl Compression {
    /// A short lower-case name (`xz`, `gzip`, `zstd`, `lz4`, `lzma`, `bzip2`, `lzo`), as file
    /// suffixes spell them.
    pub fn short_name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
            Compression::Lz4Legacy => "lz4",
            Compression::Lzma => "lzma",
            Compression::Bzip2 => "bzip2",
            Compression::Lzo => "lzo",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::Gzip => "gzip",
            Compression::Xz => "XZ",
            Compression::Zstd => "zstd",
            Compression::Lz4Legacy => "LZ4 (legacy frame)",
            Compression::Lzma => "LZMA",
            Compression::Bzip2 => "bzip2",
            Compression::Lzo => "LZO",
        })
    }
}
