//! Recognising the container around the kernel (x86 bzImage, arm64 EFI zboot, arm64 Image, a bare
//! compressed stream, or an already raw/ELF vmlinux) and handing its payload to the right codec.

use std::borrow::Cow;
use std::fmt;

use klpsym_resched::resched::Resched;

use crate::codecs::{self, LZ4_LEGACY_MAGIC};
use crate::compression::Compression;
use crate::error::ImageError;
use klpsym_resched::ChunkedFinder;

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageFormat::BzImage { compression } => write!(f, "x86 bzImage, {compression} payload"),
            ImageFormat::Arm64Image { compression: None } => f.write_str("arm64 Image"),
            ImageFormat::Arm64Image {
                compression: Some(c),
            } => write!(f, "arm64 Image, {c}-compressed"),
            ImageFormat::EfiZboot { compression } => {
                write!(f, "EFI zboot image, {compression} payload")
            }
            ImageFormat::Compressed { compression } => write!(f, "{compression}-compressed kernel"),
            ImageFormat::ElfVmlinux => f.write_str("vmlinux ELF without .symtab"),
            ImageFormat::RawVmlinux => f.write_str("raw vmlinux"),
        }
    }
}

/// What the input bytes were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// x86 bzImage (boot protocol "HdrS" header) with a compressed payload.
    BzImage { compression: Compression },
    /// arm64 `Image` (header magic "ARM\x64"), possibly wrapped in a compressed stream
    /// (`Image.gz`, Debian's arm64 vmlinuz).
    Arm64Image { compression: Option<Compression> },
    /// arm64/riscv EFI zboot image ("MZ" + "zimg") with a compressed payload.
    EfiZboot { compression: Compression },
    /// A bare compressed stream (found at the start or by scanning) holding a vmlinux.
    Compressed { compression: Compression },
    /// An ELF vmlinux (stripped or not).
    ElfVmlinux,
    /// A raw binary kernel image with no recognised header.
    RawVmlinux,
}

/// The vmlinux bytes inside a kernel image.
#[derive(Debug)]
pub struct Decompressed<'a> {
    /// The decompressed kernel (borrowed when the input already was one).
    pub data: Cow<'a, [u8]>,
    /// The container the bytes came in.
    pub format: ImageFormat,
    /// Where the compressed payload started in the input, when there was one.
    pub payload_offset: Option<usize>,
}

/// Offsets of the x86 boot protocol header (Documentation/arch/x86/boot.rst).
const BZ_SETUP_SECTS: usize = 0x1f1;
const BZ_HEADER_MAGIC: usize = 0x202;
const BZ_VERSION: usize = 0x206;
const BZ_PAYLOAD_OFFSET: usize = 0x248;
const BZ_PAYLOAD_LENGTH: usize = 0x24c;
/// arm64 Image header: "ARM\x64" at byte 56.
const ARM64_MAGIC_AT: usize = 0x38;
pub(crate) const ARM64_MAGIC: &[u8; 4] = b"ARM\x64";

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Whether `b` starts with an arm64 Image header.
pub(crate) fn is_arm64_image(b: &[u8]) -> bool {
    b.get(ARM64_MAGIC_AT..ARM64_MAGIC_AT + 4) == Some(ARM64_MAGIC)
}

/// The compression of a stream, told by its magic: the one sniffer of klpsym (payloads,
/// compressed modules, Module.symvers, configs). bzip2, LZMA and LZO magics occur by chance
/// in other data: trust them only where something says a compressed stream starts.
pub fn sniff_compression(b: &[u8]) -> Option<Compression> {
    sniff(b, false)
}

/// [`sniff_compression`]; `strict` keeps only the magics that rarely occur by chance (used
/// when scanning an image for its payload).
fn sniff(b: &[u8], strict: bool) -> Option<Compression> {
    if b.starts_with(&[0xFD, b'7', b'z', b'X', b'Z', 0]) {
        Some(Compression::Xz)
    } else if b.starts_with(&[0x1f, 0x8b, 0x08]) {
        Some(Compression::Gzip)
    } else if b.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Compression::Zstd)
    } else if b.starts_with(&LZ4_LEGACY_MAGIC.to_le_bytes()) {
        Some(Compression::Lz4Legacy)
    } else if strict {
        None
    } else if b.starts_with(b"BZh") && b.get(3).is_some_and(|c| (b'1'..=b'9').contains(c)) {
        Some(Compression::Bzip2)
    } else if b.starts_with(&[0x5d, 0, 0]) {
        Some(Compression::Lzma)
    } else if b.starts_with(&[0x89, b'L', b'Z', b'O']) {
        Some(Compression::Lzo)
    } else {
        None
    }
}

/// Decompresses a kernel image to its vmlinux; see the crate docs. `limit` caps the output.
pub fn decompress_image(bytes: &[u8], limit: usize) -> Result<Decompressed<'_>, ImageError> {
    decompress_image_with(bytes, limit, &mut Resched::none())
}

/// [`decompress_image`], reaching a reschedule point through `resched` every few KiB of output
/// (and every 256 KiB of scanning); a cancelled point ends it with [`ImageError::Cancelled`].
pub fn decompress_image_with<'a>(
    bytes: &'a [u8],
    limit: usize,
    resched: &mut Resched,
) -> Result<Decompressed<'a>, ImageError> {
    if bytes.starts_with(b"\x7fELF") {
        return Ok(borrowed(bytes, ImageFormat::ElfVmlinux));
    }
    if is_arm64_image(bytes) {
        return Ok(borrowed(
            bytes,
            ImageFormat::Arm64Image { compression: None },
        ));
    }
    if bytes.get(BZ_HEADER_MAGIC..BZ_HEADER_MAGIC + 4) == Some(b"HdrS") {
        return bzimage(bytes, limit, resched);
    }
    if bytes.starts_with(b"MZ") && bytes.get(4..8) == Some(b"zimg") {
        return efi_zboot(bytes, limit, resched);
    }
    if let Some(c) = sniff(bytes, false) {
        let data = codecs::decompress(c, bytes, 0, None, limit, resched)?;
        let format = if is_arm64_image(&data) {
            ImageFormat::Arm64Image {
                compression: Some(c),
            }
        } else {
            ImageFormat::Compressed { compression: c }
        };
        return Ok(Decompressed {
            data: Cow::Owned(data),
            format,
            payload_offset: Some(0),
        });
    }
    // A plain kernel carries its banner in clear; a compressed one does not. Scanning a raw
    // kernel for magics would find embedded blobs (e.g. the gzip'd IKCONFIG) instead.
    if ChunkedFinder::new(b"Linux version ")
        .find_from(bytes, 0, resched)?
        .is_some()
    {
        return Ok(borrowed(bytes, ImageFormat::RawVmlinux));
    }
    match scan(bytes, 0, limit, resched)? {
        Some((c, at, data)) => Ok(Decompressed {
            data: Cow::Owned(data),
            format: ImageFormat::Compressed { compression: c },
            payload_offset: Some(at),
        }),
        None => Ok(borrowed(bytes, ImageFormat::RawVmlinux)),
    }
}

fn borrowed(bytes: &[u8], format: ImageFormat) -> Decompressed<'_> {
    Decompressed {
        data: Cow::Borrowed(bytes),
        format,
        payload_offset: None,
    }
}

/// The x86 bzImage: the payload sits `payload_offset` bytes into the protected-mode code, which
/// starts after `(setup_sects or 4) + 1` 512-byte sectors. Boot protocol 2.08+ has the payload
/// fields; older ones are scanned.
fn bzimage<'a>(
    bytes: &'a [u8],
    limit: usize,
    resched: &mut Resched,
) -> Result<Decompressed<'a>, ImageError> {
    let setup_sects = match bytes.get(BZ_SETUP_SECTS) {
        Some(0) => 4,
        Some(&n) => usize::from(n),
        None => unreachable_truncated("bzImage setup header", BZ_SETUP_SECTS, bytes.len())?,
    };
    let pm_start = (setup_sects + 1) * 512;
    if pm_start >= bytes.len() {
        return Err(ImageError::Truncated {
            what: "bzImage protected-mode code",
            offset: pm_start,
            expected: 1,
            found: 0,
        });
    }
    let version = u16_at(bytes, BZ_VERSION).unwrap_or(0);
    if version >= 0x208 {
        let off = u32_at(bytes, BZ_PAYLOAD_OFFSET).unwrap_or(0) as usize;
        let len = u32_at(bytes, BZ_PAYLOAD_LENGTH).unwrap_or(0) as usize;
        let start = pm_start.saturating_add(off);
        let end = start.saturating_add(len);
        let Some(payload) = bytes.get(start..end) else {
            return Err(ImageError::Truncated {
                what: "bzImage payload",
                offset: start,
                expected: len,
                found: bytes.len().saturating_sub(start),
            });
        };
        let Some(c) = sniff(payload, false) else {
            return Err(ImageError::UnsupportedCompression {
                container: "bzImage",
                offset: start,
                found: format!("unknown magic {:02x?}", &payload[..payload.len().min(6)]),
            });
        };
        // The build appends the decompressed size (u32 LE) after the stream.
        let hint = payload
            .len()
            .checked_sub(4)
            .and_then(|p| u32_at(payload, p));
        let data = codecs::decompress(c, payload, start, hint.map(|h| h as usize), limit, resched)?;
        return Ok(Decompressed {
            data: Cow::Owned(data),
            format: ImageFormat::BzImage { compression: c },
            payload_offset: Some(start),
        });
    }
    match scan(bytes, pm_start, limit, resched)? {
        Some((c, at, data)) => Ok(Decompressed {
            data: Cow::Owned(data),
            format: ImageFormat::BzImage { compression: c },
            payload_offset: Some(at),
        }),
        None => Err(ImageError::NoKallsyms {
            detail: format!(
                "bzImage boot protocol {:#x} has no payload fields and no compressed stream was found after offset {pm_start:#x}",
                version
            ),
        }),
    }
}

fn unreachable_truncated<T>(what: &'static str, at: usize, len: usize) -> Result<T, ImageError> {
    Err(ImageError::Truncated {
        what,
        offset: at,
        expected: 1,
        found: len.saturating_sub(at),
    })
}

/// EFI zboot (drivers/firmware/efi/libstub/zboot-header.S): "MZ", "zimg", then the payload
/// offset and size (u32 LE) at 8 and 12.
fn efi_zboot<'a>(
    bytes: &'a [u8],
    limit: usize,
    resched: &mut Resched,
) -> Result<Decompressed<'a>, ImageError> {
    let off = u32_at(bytes, 8).unwrap_or(0) as usize;
    let len = u32_at(bytes, 12).unwrap_or(0) as usize;
    let Some(payload) = bytes.get(off..off.saturating_add(len)) else {
        return Err(ImageError::Truncated {
            what: "EFI zboot payload",
            offset: off,
            expected: len,
            found: bytes.len().saturating_sub(off),
        });
    };
    let Some(c) = sniff(payload, false) else {
        return Err(ImageError::UnsupportedCompression {
            container: "EFI zboot",
            offset: off,
            found: format!("unknown magic {:02x?}", &payload[..payload.len().min(6)]),
        });
    };
    let data = codecs::decompress(c, payload, off, None, limit, resched)?;
    Ok(Decompressed {
        data: Cow::Owned(data),
        format: ImageFormat::EfiZboot { compression: c },
        payload_offset: Some(off),
    })
}

/// Looks for the first strong compression magic at or after `from` that decodes; a `TooLarge`
/// error is returned as is (the limit applies to every candidate).
#[allow(clippy::type_complexity)]
fn scan(
    bytes: &[u8],
    from: usize,
    limit: usize,
    resched: &mut Resched,
) -> Result<Option<(Compression, usize, Vec<u8>)>, ImageError> {
    const MAGICS: [&[u8]; 4] = [
        &[0xFD, b'7', b'z', b'X', b'Z', 0],
        &[0x28, 0xb5, 0x2f, 0xfd],
        &[0x02, 0x21, 0x4c, 0x18],
        &[0x1f, 0x8b, 0x08],
    ];
    let hay = bytes.get(from..).unwrap_or_default();
    let mut hits: Vec<usize> = Vec::new();
    for m in MAGICS {
        hits.extend(ChunkedFinder::new(m).find_all(hay, 16, resched)?);
    }
    hits.sort_unstable();
    for at in hits {
        let Some(c) = sniff(&hay[at..], true) else {
            continue;
        };
        match codecs::decompress(c, &hay[at..], from + at, None, limit, resched) {
            Ok(data) => return Ok(Some((c, from + at, data))),
            Err(e @ (ImageError::TooLarge { .. } | ImageError::Cancelled)) => return Err(e),
            Err(_) => continue,
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A minimal bzImage: setup header with payload fields, then the payload.
    fn bzimage_with(payload: &[u8], version: u16) -> Vec<u8> {
        let setup_sects = 3u8;
        let pm = (usize::from(setup_sects) + 1) * 512;
        let mut img = vec![0u8; pm + 100];
        img[BZ_SETUP_SECTS] = setup_sects;
        img[BZ_HEADER_MAGIC..BZ_HEADER_MAGIC + 4].copy_from_slice(b"HdrS");
        img[BZ_VERSION..BZ_VERSION + 2].copy_from_slice(&version.to_le_bytes());
        img[BZ_PAYLOAD_OFFSET..BZ_PAYLOAD_OFFSET + 4].copy_from_slice(&100u32.to_le_bytes());
        img[BZ_PAYLOAD_LENGTH..BZ_PAYLOAD_LENGTH + 4]
            .copy_from_slice(&(payload.len() as u32).to_le_bytes());
        img.extend_from_slice(payload);
        img.extend_from_slice(&[0u8; 37]);
        img
    }

    #[test]
    fn bzimage_payload_is_found_from_the_header_and_by_scan() {
        let inner = b"\x7fELF and then Linux version 6.1.0 (x) #1\n".repeat(1000);
        let mut payload = xz(&inner);
        payload.extend_from_slice(&(inner.len() as u32).to_le_bytes());
        for version in [0x20f, 0x206] {
            let img = bzimage_with(&payload, version);
            let d = decompress_image(&img, 1 << 24).unwrap();
            assert_eq!(
                d.format,
                ImageFormat::BzImage {
                    compression: Compression::Xz
                }
            );
            assert_eq!(d.payload_offset, Some(4 * 512 + 100));
            assert_eq!(&d.data[..], &inner[..]);
        }
    }

    #[test]
    fn bzimage_truncated_payload_is_an_error() {
        let payload = xz(&[7u8; 5000]);
        let img = bzimage_with(&payload, 0x20f);
        let cut = &img[..4 * 512 + 100 + payload.len() / 2];
        let err = decompress_image(cut, 1 << 24).unwrap_err();
        assert!(matches!(err, ImageError::Truncated { .. }), "{err}");
    }

    #[test]
    fn raw_and_elf_inputs_are_borrowed() {
        let elf = b"\x7fELF\x02\x01\x01rest".to_vec();
        let d = decompress_image(&elf, 10).unwrap();
        assert!(matches!(d.data, Cow::Borrowed(_)));
        assert_eq!(d.format, ImageFormat::ElfVmlinux);
        let raw = b"xxxx Linux version 6.1\n".to_vec();
        assert_eq!(
            decompress_image(&raw, 10).unwrap().format,
            ImageFormat::RawVmlinux
        );
    }

    #[test]
    fn gzip_wrapped_arm64_image_is_recognised() {
        let mut image = vec![0u8; 4096];
        image[ARM64_MAGIC_AT..ARM64_MAGIC_AT + 4].copy_from_slice(ARM64_MAGIC);
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(&image).unwrap();
        let gz = g.finish().unwrap();
        let d = decompress_image(&gz, 1 << 20).unwrap();
        assert_eq!(
            d.format,
            ImageFormat::Arm64Image {
                compression: Some(Compression::Gzip)
            }
        );
        assert_eq!(d.data.len(), 4096);
    }

    #[test]
    fn bomb_is_refused() {
        let zeros = vec![0u8; 1 << 22];
        let img = bzimage_with(&xz(&zeros), 0x20f);
        let err = decompress_image(&img, 1 << 20).unwrap_err();
        assert!(
            matches!(err, ImageError::TooLarge { limit, .. } if limit == 1 << 20),
            "{err}"
        );
    }
}
