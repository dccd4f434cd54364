//! Debian packages: an `ar` archive (`debian-binary`, `control.tar.*`, `data.tar.*`) read as a
//! stream, its compressed tars decompressed as they are read (the `tar` crate over klpsym's
//! decoders), never held whole: a 1 GiB `-dbg` package costs a buffer, not a gigabyte.
//!
//! The `ar` layer is read here, a few lines: a Debian package's members are three, named
//! plainly; GNU (`/`, `//`, `/N`) and BSD (`#1/N`) extended names, whose tables an `ar` reader
//! would allocate as the header claims, are refused.

use std::io::Read;

use klpsym_resched::resched::Resched;

use crate::end::{end_in_bytes, Probe};
use crate::input::Input;
use crate::{
    decode_to_end, io_error, read_body, Collector, Package, PackageError, PackageFormat, Spill,
    Want, STREAM_FACTOR,
};
use klpsym_image::Compression;

const FORMAT: PackageFormat = PackageFormat::Deb;

fn malformed(place: impl Into<String>, what: impl Into<String>) -> PackageError {
    crate::malformed(FORMAT, place, what)
}

/// One `ar` member header: its name and size, and where it starts.
struct ArHeader {
    id: String,
    size: u64,
    at: u64,
}

/// Reads the next member header at offset `at`; `None` at the end of the archive.
fn next_header(r: &mut dyn Read, at: u64) -> Result<Option<ArHeader>, PackageError> {
    let mut h = [0u8; 60];
    let mut got = 0;
    while got < h.len() {
        match r.read(&mut h[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(FORMAT, format!("ar member at offset {at}"), e)),
        }
    }
    match got {
        0 => return Ok(None),
        60 => {}
        n => {
            return Err(malformed(
                format!("ar member at offset {at}"),
                format!("the archive ends {n} bytes into a 60-byte member header"),
            ))
        }
    }
    let id = String::from_utf8_lossy(&h[..16]).trim_end().to_string();
    if id.starts_with('/') || id.starts_with("#1/") {
        return Err(malformed(
            format!("ar member at offset {at}"),
            format!("extended member name '{id}': not used by Debian packages"),
        ));
    }
    if &h[58..60] != b"`\n" {
        return Err(malformed(
            format!("ar member at offset {at}"),
            "no header terminator (`\\n)",
        ));
    }
    let size = std::str::from_utf8(&h[48..58])
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .ok_or_else(|| malformed(format!("ar member {id}"), "the size is not a number"))?;
    Ok(Some(ArHeader {
        id: id.trim_end_matches('/').to_string(),
        size,
        at: at + 60,
    }))
}

/// Reads and drops `n` bytes of `r` (an ar member not wanted, its padding byte).
fn skip(r: &mut dyn Read, n: u64, place: &str) -> Result<(), PackageError> {
    let got = std::io::copy(&mut r.take(n), &mut std::io::sink())
        .map_err(|e| io_error(FORMAT, place.to_string(), e))?;
    if got < n {
        return Err(malformed(
            place,
            format!("ends after {got} of its {n} bytes"),
        ));
    }
    Ok(())
}

pub(crate) fn read(
    r: &mut dyn Input,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|e| io_error(FORMAT, "ar archive".into(), e))?;
    if &magic != b"!<arch>\n" {
        return Err(malformed("ar archive", "no !<arch> magic"));
    }
    let mut pkg = Package {
        format: FORMAT,
        name: None,
        version: None,
        arch: None,
        members: Vec::new(),
        releases: Vec::new(),
        stopped_early: false,
    };
    let mut at = 8u64;
    // Opening the package (its first buffer read) is a stretch of its own.
    resched.tick_step()?;
    while let Some(h) = next_header(r, at)? {
        // A member is a step of bulk work (its header read, a buffer filled).
        resched.tick_step()?;
        let place = format!("ar member {}", h.id);
        let mut body = Read::take(&mut *r, h.size);
        if h.id.starts_with("control.tar") {
            control(&place, &mut body, limit, resched, &mut pkg)?;
        } else if h.id.starts_with("data.tar") {
            let want = want.for_package(pkg.name.as_deref());
            let mut probe = Probe::new(&mut body);
            let d = data_tar(&place, &mut probe, want, limit, spill, resched)?;
            pkg.members = d.members;
            pkg.releases = d.releases;
            pkg.stopped_early = d.early;
            if want.release_only {
                return Ok(pkg);
            }
            // Read to its end before its answers count: what decoding left is read as stored,
            // and its compression's end checked from its bytes (data_tar decoded the others
            // to their end).
            let structural = d.early && end_in_bytes(d.compression);
            probe
                .read_through(
                    structural && d.compression == Some(Compression::Xz),
                    resched,
                )
                .map_err(|e| io_error(FORMAT, place.clone(), e))?;
            let (seen, end) = (probe.seen(), probe.check_end(d.compression));
            drop(probe);
            if body.limit() > 0 {
                return Err(malformed(
                    &place,
                    format!(
                        "the package ends after {seen} of the member's {} bytes: it is cut short (an interrupted download?)",
                        h.size
                    ),
                ));
            }
            if structural {
                end.map_err(|why| malformed(&place, why))?;
            }
            // Everything a Debian package holds comes before here; what follows is not read.
            return Ok(pkg);
        }
        // What the member's reader left (all of it, for a member not wanted), and padding.
        let left = body.limit();
        skip(r, left + (h.size & 1), &place)?;
        at = h.at + h.size + (h.size & 1);
    }
    Err(malformed("ar archive", "no data.tar member"))
}

/// A compressed tar member as a decompressing reader (told by its first bytes).
fn decoder<'a, 'r>(
    id: &str,
    member: &'a mut dyn Read,
    limit: u64,
    resched: &'r mut Resched,
) -> Result<
    (
        klpsym_image::StreamDecoder<'a, 'r>,
        Option<klpsym_image::Compression>,
    ),
    PackageError,
> {
    crate::decoder_of(FORMAT, id, member, limit, resched)
}

/// `control.tar.*`'s `./control`: Package, Version, Architecture.
fn control(
    id: &str,
    data: &mut dyn Read,
    limit: u64,
    resched: &mut Resched,
    pkg: &mut Package,
) -> Result<(), PackageError> {
    let (dec, _) = decoder(id, data, limit, resched)?;
    let mut tar = tar::Archive::new(dec);
    for e in tar.entries().map_err(|e| io_error(FORMAT, id.into(), e))? {
        let mut e = e.map_err(|e| io_error(FORMAT, id.into(), e))?;
        let path = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        if path.trim_start_matches("./") != "control" {
            continue;
        }
        let size = e.header().size().unwrap_or(0);
        let text = read_body(&mut e, size, 1 << 20)
            .map_err(|err| io_error(FORMAT, format!("{id}: member {path}"), err))?;
        for line in String::from_utf8_lossy(&text).lines() {
            let field = |k: &str| line.strip_prefix(k).map(|v| v.trim().to_string());
            if let Some(v) = field("Package:") {
                pkg.name = Some(v);
            } else if let Some(v) = field("Version:") {
                pkg.version = Some(v);
            } else if let Some(v) = field("Architecture:") {
                pkg.arch = Some(v);
            }
        }
        break;
    }
    // The rest of the member is not read: its decoder's memory goes back in steps.
    tar.into_inner().close()?;
    Ok(())
}

/// Where entry `e`'s data ends in its tar (its 512-byte blocks).
fn entry_end<R: Read>(e: &tar::Entry<'_, R>) -> u64 {
    e.raw_file_position()
        .saturating_add(e.size().div_ceil(512).saturating_mul(512))
}

/// What `data.tar.*` gave.
struct DataTar {
    members: Vec<crate::Member>,
    releases: Vec<String>,
    /// Decoding stopped once everything asked for was found.
    early: bool,
    compression: Option<klpsym_image::Compression>,
}

/// `data.tar.*`: the members asked for, the releases named, and whether decoding stopped
/// early. A stream whose end cannot be checked from its bytes (see `end.rs`) is decoded to
/// its end even then: the tar to its end blocks, the stream to its end marker.
fn data_tar(
    id: &str,
    data: &mut dyn Read,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<DataTar, PackageError> {
    let (dec, compression) = decoder(id, data, limit.saturating_mul(STREAM_FACTOR), resched)?;
    let mut tar = tar::Archive::new(dec);
    let mut col = Collector::new(want);
    let mut entries = tar.entries().map_err(|e| io_error(FORMAT, id.into(), e))?;
    let mut early = false;
    // Where the last entry's data ends in the tar: its end blocks come after it.
    let mut last_end = 0u64;
    for e in entries.by_ref() {
        let mut e = e.map_err(|e| io_error(FORMAT, id.into(), e))?;
        last_end = entry_end(&e);
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let wanted = col.wants(&path);
        if want.release_only && col.done() {
            early = true;
            break;
        }
        let Some((kind, release)) = wanted else {
            continue;
        };
        if !spill.keeps(&path, kind) {
            continue;
        }
        let size = e.size();
        col.take(&path, kind, release, &mut e, size, limit, spill)
            .map_err(|err| io_error(FORMAT, format!("{id}: member {path}"), err))?;
        if col.done() {
            early = true;
            break;
        }
    }
    // Decoded to the end unless the stream's end is checked from its stored bytes (end.rs).
    let structural = early && crate::end::end_in_bytes(compression);
    let to_end = !want.release_only && !structural;
    if to_end {
        // The entries left are passed over (their data read through, not kept).
        for e in entries {
            let e = e.map_err(|e| io_error(FORMAT, id.into(), e))?;
            last_end = entry_end(&e);
        }
    }
    let mut dec = tar.into_inner();
    if to_end {
        // The tar crate stops at the first zero block, or at the stream's end without one.
        if dec.produced() < last_end.saturating_add(512) {
            return Err(malformed(
                id,
                "the tar ends without its end blocks: the data is cut short",
            ));
        }
        decode_to_end(FORMAT, id, &mut dec)?;
    }
    // Read to its end or not, the decoder's memory goes back in steps.
    dec.close()?;
    Ok(DataTar {
        members: col.members,
        releases: col.releases,
        early,
        compression,
    })
}
