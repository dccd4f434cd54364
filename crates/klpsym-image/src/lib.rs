//! Kernel image bytes to the kernel's own kallsyms list (what `/proc/kallsyms` prints for
//! vmlinux), with no file I/O.
//!
//! Two steps, usable apart: [`decompress_image`] finds and decodes the payload of a bzImage,
//! EFI zboot, `Image.gz` or bare compressed stream (XZ, gzip, zstd, legacy LZ4, LZMA, bzip2) under
//! a size limit; [`find_kallsyms`] locates the compressed kallsyms tables in the decompressed
//! kernel without symbols (anchored on the token table) and decodes them for every layout from
//! Linux 5.x to the 2026 place-relative offsets. [`extract`] does both.
//!
//! Invariants: input is only read, never trusted: every count is checked against the input size,
//! every located table is cross-checked against the others, and several surviving layouts are an
//! error ([`ImageError::Ambiguous`]), never a guess. Assumptions go to [`ImageSymbols::notes`].

mod codecs;
mod compression;
mod container;
mod crcs;
mod decode;
mod elfinfo;
mod error;
mod identity;
mod kallsyms;
mod layout;
mod stream;
mod tables;
mod xz;
mod xz_blocks;
mod xz_format;
mod xz_worker;

pub use compression::Compression;
pub use container::{
    decompress_image, decompress_image_with, sniff_compression, Decompressed, ImageFormat,
};
pub use error::ImageError;
pub use identity::{banner_release, find_build_id, find_vermagic};
pub use kallsyms::{find_kallsyms, find_kallsyms_with};
use klpsym_resched::resched::Resched;
pub use layout::{Addressing, LayoutEra, NameLengthEncoding, TableLayout, TableOffsets};
pub use stream::{is_cancelled, StreamDecoder};

/// One kallsyms entry of vmlinux.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KallsymsEntry {
    /// Link-time address (what `/proc/kallsyms` shows with KASLR off).
    pub addr: u64,
    /// Type letter as the kernel prints it (`T`, `t`, `D`, ...).
    pub kind: u8,
    pub name: String,
}

/// Architecture of the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Arm64,
    /// Another ELF machine (named as the `object` crate names it).
    Other(String),
    Unknown,
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arch::X86_64 => f.write_str("x86_64"),
            Arch::Arm64 => f.write_str("aarch64"),
            Arch::Other(o) => f.write_str(o),
            Arch::Unknown => f.write_str("unknown"),
        }
    }
}

/// The decoded kallsyms of a kernel image and how they were found.
#[derive(Debug, Clone)]
pub struct ImageSymbols {
    /// In kallsyms order (the order `/proc/kallsyms` prints vmlinux).
    pub entries: Vec<KallsymsEntry>,
    pub format: ImageFormat,
    /// The "Linux version ..." banner line, from the decompressed image.
    pub version: Option<String>,
    /// The module loader's `VERMAGIC_STRING`, when found ([`find_vermagic`]).
    pub vermagic: Option<String>,
    /// The GNU build id, when found ([`find_build_id`]).
    pub build_id: Option<String>,
    /// The CRC of every exported symbol (CONFIG_MODVERSIONS), read from `__kcrctab` through
    /// the `__ksymtab_*` entries of kallsyms; `None` when the tables are not named.
    pub crcs: Option<std::collections::HashMap<String, u32>>,
    pub arch: Arch,
    pub layout: TableLayout,
    /// Anything assumed or uncertain, said plainly.
    pub notes: Vec<String>,
}

impl ImageSymbols {
    /// The entries as `/proc/kallsyms` prints them (`%016x %c %s\n`).
    pub fn to_proc_kallsyms(&self) -> String {
        let mut s = String::with_capacity(self.entries.len() * 48);
        for e in &self.entries {
            use std::fmt::Write;
            let _ = writeln!(s, "{:016x} {} {}", e.addr, char::from(e.kind), e.name);
        }
        s
    }
}

/// Decompresses (under `limit` bytes) and decodes a kernel image's kallsyms.
pub fn extract(bytes: &[u8], limit: usize) -> Result<ImageSymbols, ImageError> {
    extract_with(bytes, limit, &mut Resched::none())
}

/// [`extract`], reaching reschedule points through `resched` in both steps (see
/// [`decompress_image_with`] and [`find_kallsyms_with`]).
pub fn extract_with(
    bytes: &[u8],
    limit: usize,
    resched: &mut Resched,
) -> Result<ImageSymbols, ImageError> {
    let d = decompress_image_with(bytes, limit, resched)?;
    let syms = extract_decompressed(&d, resched)?;
    // Tens of megabytes of decompressed kernel: freed in steps, not in one munmap.
    if let std::borrow::Cow::Owned(v) = d.data {
        klpsym_resched::bulk::free_with_points(v, resched)?;
    }
    Ok(syms)
}

/// The second half of [`extract_with`], for a caller that already decompressed the
/// image (and looked at the payload) so it is not decompressed twice.
pub fn extract_decompressed(
    d: &Decompressed<'_>,
    resched: &mut Resched,
) -> Result<ImageSymbols, ImageError> {
    let mut syms = find_kallsyms_with(&d.data, resched)?;
    syms.format = match (d.format, syms.format) {
        (ImageFormat::Compressed { compression }, ImageFormat::Arm64Image { .. }) => {
            ImageFormat::Arm64Image {
                compression: Some(compression),
            }
        }
        (ImageFormat::ElfVmlinux | ImageFormat::RawVmlinux, inner) => inner,
        (outer, _) => outer,
    };
    Ok(syms)
}
