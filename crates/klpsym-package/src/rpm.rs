//! RPM packages: a 96-byte lead, the signature header (padded to 8 bytes), the main header
//! (whose tags name the package), then the payload: a cpio (newc) archive, compressed, read
//! as it streams. The headers are a few bounded reads written here (no well-kept crate reads
//! an RPM's payload from a stream); the cpio archive is read with the `cpio` crate.

use std::io::Read;

use klpsym_resched::resched::Resched;

use crate::end::{end_in_bytes, Probe};
use crate::input::Input;
use crate::{
    decode_to_end, io_error, Collector, Package, PackageError, PackageFormat, Spill, Want,
    STREAM_FACTOR,
};
use klpsym_image::Compression;

/// At most this many bytes of headers are read (kernel packages' are a few hundred KiB).
const MAX_HEADERS: usize = 64 << 20;

const FORMAT: PackageFormat = PackageFormat::Rpm;
const LEAD: usize = 96;
const HEADER_MAGIC: [u8; 4] = [0x8e, 0xad, 0xe8, 0x01];

const TAG_NAME: u32 = 1000;
const TAG_VERSION: u32 = 1001;
const TAG_RELEASE: u32 = 1002;
const TAG_ARCH: u32 = 1022;
/// The signature header's RPMSIGTAG_SIZE and RPMSIGTAG_LONGSIZE: the main header and the
/// compressed payload, in bytes.
const SIGTAG_SIZE: u32 = 1000;
const SIGTAG_LONGSIZE: u32 = 270;

fn malformed(place: impl Into<String>, what: impl Into<String>) -> PackageError {
    crate::malformed(FORMAT, place, what)
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A header structure at `at`: its index entries `(tag, type, offset, count)`, its data
/// store, and where it ends.
fn header<'a>(bytes: &'a [u8], at: usize, what: &str) -> Result<Header<'a>, PackageError> {
    let place = || format!("{what} at offset {at}");
    if bytes.get(at..at + 4) != Some(&HEADER_MAGIC[..]) {
        return Err(malformed(place(), "no header magic (8e ad e8 01)"));
    }
    let (n, size) = match (be32(bytes, at + 8), be32(bytes, at + 12)) {
        (Some(n), Some(s)) => (n as usize, s as usize),
        _ => return Err(malformed(place(), "truncated")),
    };
    let index = at + 16;
    let store = n
        .checked_mul(16)
        .and_then(|x| x.checked_add(index))
        .filter(|&s| s <= bytes.len())
        .ok_or_else(|| malformed(place(), format!("{n} index entries do not fit")))?;
    let end = store
        .checked_add(size)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| malformed(place(), format!("a {size}-byte store does not fit")))?;
    Ok(Header {
        index: &bytes[index..store],
        store: &bytes[store..end],
    })
}

struct Header<'a> {
    index: &'a [u8],
    store: &'a [u8],
}

impl Header<'_> {
    /// A string tag's value (types STRING, STRING_ARRAY's first, I18NSTRING's first).
    fn string(&self, tag: u32) -> Option<String> {
        for e in self.index.chunks_exact(16) {
            if be32(e, 0)? != tag || !matches!(be32(e, 4)?, 6 | 8 | 9) {
                continue;
            }
            let off = be32(e, 8)? as usize;
            let s = self.store.get(off..)?;
            let len = s.iter().position(|&b| b == 0)?;
            return Some(String::from_utf8_lossy(&s[..len]).into_owned());
        }
        None
    }

    /// An integer tag's first value (types INT32 and INT64).
    fn int(&self, tag: u32) -> Option<u64> {
        for e in self.index.chunks_exact(16) {
            if be32(e, 0)? != tag {
                continue;
            }
            let off = be32(e, 8)? as usize;
            return match be32(e, 4)? {
                4 => be32(self.store, off).map(u64::from),
                5 => Some(u64::from_be_bytes(
                    self.store.get(off..off + 8)?.try_into().ok()?,
                )),
                _ => None,
            };
        }
        None
    }
}

/// Reads the lead and both headers from `r` into memory (they are small and bounded): the
/// bytes read, and where the main header starts.
fn read_headers(r: &mut dyn Read) -> Result<(Vec<u8>, usize), PackageError> {
    let fill = |r: &mut dyn Read, buf: &mut Vec<u8>, upto: usize, what: &str| {
        if upto > MAX_HEADERS {
            return Err(malformed(
                what,
                format!("claims more than {MAX_HEADERS} bytes of headers"),
            ));
        }
        if buf.len() < upto {
            // Grown by the bytes that arrive, never by what the header claims: a short input
            // claiming 60 MiB of headers holds only its own bytes before it is refused.
            let want = upto - buf.len();
            let got = r
                .take(want as u64)
                .read_to_end(buf)
                .map_err(|e| io_error(FORMAT, what.to_string(), e))?;
            if got < want {
                let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                return Err(io_error(FORMAT, what.to_string(), e));
            }
        }
        Ok(())
    };
    let mut b = Vec::new();
    fill(r, &mut b, LEAD + 16, "lead").map_err(|_| malformed("lead", "shorter than 96 bytes"))?;
    let end_of = |b: &[u8], at: usize| -> Option<usize> {
        let n = be32(b, at + 8)? as usize;
        let size = be32(b, at + 12)? as usize;
        n.checked_mul(16)?.checked_add(at + 16)?.checked_add(size)
    };
    let sig_end = end_of(&b, LEAD).ok_or_else(|| malformed("signature header", "truncated"))?;
    let main_at = sig_end.div_ceil(8) * 8;
    fill(r, &mut b, main_at + 16, "signature header")?;
    let main_end = end_of(&b, main_at).ok_or_else(|| malformed("header", "truncated"))?;
    fill(r, &mut b, main_end, "header")?;
    Ok((b, main_at))
}

pub(crate) fn read(
    r: &mut dyn Input,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    let (bytes, main_at) = read_headers(r)?;
    let sig = header(&bytes, LEAD, "signature header")?;
    let main = header(&bytes, main_at, "header")?;
    let version = match (main.string(TAG_VERSION), main.string(TAG_RELEASE)) {
        (Some(v), Some(r)) => Some(format!("{v}-{r}")),
        (v, _) => v,
    };
    let mut col = Collector::new(want.for_package(main.string(TAG_NAME).as_deref()));
    let mut probe = Probe::new(r);
    let (dec, compression) = crate::decoder_of(
        FORMAT,
        "payload",
        &mut probe,
        limit.saturating_mul(STREAM_FACTOR),
        resched,
    )?;
    let mut early = false;
    // The cpio trailer reached: the payload's archive ended where it says.
    let mut trailer = false;
    let structural = |early: bool| early && end_in_bytes(compression);
    let mut reader = Some(dec);
    while let Some(dec) = reader.take() {
        let r =
            cpio::NewcReader::new(dec).map_err(|e| io_error(FORMAT, "payload (cpio)".into(), e))?;
        let entry = r.entry();
        if entry.is_trailer() {
            trailer = true;
            reader = Some(
                r.finish()
                    .map_err(|e| io_error(FORMAT, "payload (cpio trailer)".into(), e))?,
            );
            break;
        }
        let path = entry.name().to_string();
        let is_file = entry.mode() & 0o170000 == 0o100000;
        let size = u64::from(entry.file_size());
        let mut r = r;
        if is_file && !early {
            let wanted = col.wants(&path);
            if want.release_only && col.done() {
                early = true;
                break;
            }
            if let Some((kind, release)) = wanted.filter(|(k, _)| spill.keeps(&path, *k)) {
                col.take(&path, kind, release, &mut r, size, limit, spill)
                    .map_err(|e| io_error(FORMAT, format!("payload: member {path}"), e))?;
                if col.done() {
                    early = true;
                    // What is left is read as stored where the compression's end can be
                    // found in its bytes; otherwise on to the trailer (passed over).
                    if want.release_only || structural(early) {
                        break;
                    }
                }
            }
        }
        reader = Some(
            r.finish()
                .map_err(|e| io_error(FORMAT, format!("payload: member {path}"), e))?,
        );
    }
    if !want.release_only {
        if let (true, Some(dec)) = (trailer, reader.as_mut()) {
            // After the trailer: the archive's padding, then the stream's end marker.
            decode_to_end(FORMAT, "payload", dec)?;
        }
        drop(reader);
        probe
            .read_through(
                structural(early) && compression == Some(Compression::Xz),
                resched,
            )
            .map_err(|e| io_error(FORMAT, "payload".into(), e))?;
        if structural(early) {
            probe
                .check_end(compression)
                .map_err(|why| malformed("payload", why))?;
        }
        // The signature header's size of the header and payload, when it gives one.
        let header_len = (bytes.len() - main_at) as u64;
        if let Some(size) = sig.int(SIGTAG_LONGSIZE).or_else(|| sig.int(SIGTAG_SIZE)) {
            let have = header_len + probe.seen();
            if have != size {
                return Err(malformed(
                    "payload",
                    format!(
                        "the header and payload are {have} bytes, the signature header says {size}: the package is cut short or damaged"
                    ),
                ));
            }
        }
    }
    Ok(Package {
        format: FORMAT,
        name: main.string(TAG_NAME),
        version,
        arch: main.string(TAG_ARCH),
        members: col.members,
        releases: col.releases,
        stopped_early: early,
    })
}
