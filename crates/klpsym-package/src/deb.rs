//! Debian packages: an `ar` archive (`debian-binary`, `control.tar.*`, `data.tar.*`), read
//! with the `ar` and `tar` crates; the compressed tars are streamed, never copied whole.

use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::rc::Rc;

use klpsym_resched::resched::Resched;

use crate::{
    decoder, io_error, read_body, Collector, Package, PackageError, PackageFormat, Want,
    STREAM_FACTOR,
};

const FORMAT: PackageFormat = PackageFormat::Deb;

/// The package bytes as a reader whose position the caller can see while `ar` holds it: an ar
/// member's data is then a slice of the package, not a copy.
struct Tracked<'a> {
    data: &'a [u8],
    pos: Rc<Cell<usize>>,
}

impl Read for Tracked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let p = self.pos.get().min(self.data.len());
        let n = buf.len().min(self.data.len() - p);
        buf[..n].copy_from_slice(&self.data[p..p + n]);
        self.pos.set(p + n);
        Ok(n)
    }
}

impl Seek for Tracked<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let new = match to {
            SeekFrom::Start(o) => o as i128,
            SeekFrom::Current(d) => self.pos.get() as i128 + d as i128,
            SeekFrom::End(d) => self.data.len() as i128 + d as i128,
        };
        if new < 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start",
            ));
        }
        self.pos.set(new.min(usize::MAX as i128) as usize);
        Ok(new as u64)
    }
}

fn malformed(place: impl Into<String>, what: impl Into<String>) -> PackageError {
    crate::malformed(FORMAT, place, what)
}

/// Refuses what a Debian package never holds and the `ar` crate does not bound: GNU (`/`, `//`,
/// `/N`) and BSD (`#1/N`) extended member names, whose tables it allocates and indexes as the
/// header claims. Walks the 60-byte member headers only.
fn precheck(bytes: &[u8]) -> Result<(), PackageError> {
    let mut at = 8usize;
    while at + 60 <= bytes.len() {
        let h = &bytes[at..at + 60];
        let id = String::from_utf8_lossy(&h[..16]).trim_end().to_string();
        if id.starts_with('/') || id.starts_with("#1/") {
            return Err(malformed(
                format!("ar member at offset {at}"),
                format!("extended member name '{id}': not used by Debian packages"),
            ));
        }
        let Some(size) = std::str::from_utf8(&h[48..58])
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
        else {
            return Ok(()); // the ar reader reports it
        };
        at = match at
            .checked_add(60)
            .and_then(|x| x.checked_add(size))
            .and_then(|x| x.checked_add(size & 1))
        {
            Some(next) => next,
            None => return Ok(()),
        };
    }
    Ok(())
}

pub(crate) fn read(
    bytes: &[u8],
    want: Want,
    limit: u64,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    precheck(bytes)?;
    let pos = Rc::new(Cell::new(0));
    let mut archive = ar::Archive::new(Tracked {
        data: bytes,
        pos: pos.clone(),
    });
    let mut pkg = Package {
        format: FORMAT,
        name: None,
        version: None,
        arch: None,
        members: Vec::new(),
        releases: Vec::new(),
        stopped_early: false,
    };
    let mut saw_data = false;
    while let Some(entry) = archive.next_entry() {
        resched.tick()?;
        let mut entry = entry.map_err(|e| malformed("ar archive", e.to_string()))?;
        let id = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        let size = entry.header().size();
        let start = pos.get();
        let end = start
            .checked_add(usize::try_from(size).unwrap_or(usize::MAX))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| {
                malformed(
                    format!("ar member {id}"),
                    format!(
                        "says {size} bytes at offset {start}, past the end of the {}-byte package",
                        bytes.len()
                    ),
                )
            })?;
        let data = &bytes[start..end];
        entry
            .seek(SeekFrom::End(0))
            .map_err(|e| malformed(format!("ar member {id}"), e.to_string()))?;
        drop(entry);
        if id.starts_with("control.tar") {
            control(&id, data, limit, resched, &mut pkg)?;
        } else if id.starts_with("data.tar") {
            saw_data = true;
            let want = want.for_package(pkg.name.as_deref());
            let (members, releases, early) = data_tar(&id, data, want, limit, resched)?;
            pkg.members = members;
            pkg.releases = releases;
            pkg.stopped_early = early;
        }
    }
    if !saw_data {
        return Err(malformed("ar archive", "no data.tar member"));
    }
    Ok(pkg)
}

/// `control.tar.*`'s `./control`: Package, Version, Architecture.
fn control(
    id: &str,
    data: &[u8],
    limit: u64,
    resched: &mut Resched,
    pkg: &mut Package,
) -> Result<(), PackageError> {
    let dec = decoder(data, limit, resched).map_err(|e| io_error(FORMAT, id.into(), e))?;
    let mut tar = tar::Archive::new(dec);
    let entries = tar.entries().map_err(|e| io_error(FORMAT, id.into(), e))?;
    for e in entries {
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
    Ok(())
}

type DataTar = (Vec<crate::Member>, Vec<String>, bool);

/// `data.tar.*`: the members asked for, the releases named, and whether reading stopped early.
fn data_tar(
    id: &str,
    data: &[u8],
    want: Want,
    limit: u64,
    resched: &mut Resched,
) -> Result<DataTar, PackageError> {
    let dec = decoder(data, limit.saturating_mul(STREAM_FACTOR), resched)
        .map_err(|e| io_error(FORMAT, id.into(), e))?;
    let mut tar = tar::Archive::new(dec);
    let mut col = Collector::new(want);
    let entries = tar.entries().map_err(|e| io_error(FORMAT, id.into(), e))?;
    let mut early = false;
    for e in entries {
        let mut e = e.map_err(|e| io_error(FORMAT, id.into(), e))?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let Some((kind, release)) = col.wants(&path) else {
            continue;
        };
        let size = e.size();
        let body = read_body(&mut e, size, limit)
            .map_err(|err| io_error(FORMAT, format!("{id}: member {path}"), err))?;
        col.keep(&path, kind, release, body);
        if col.done() {
            early = true;
            break;
        }
    }
    Ok((col.members, col.releases, early))
}
