//! The debug sections a cache keeps beside a debug vmlinux's entry (`ENTRY.dwarf`: only
//! the sections line tables and inline chains need, about a third of the vmlinux, mapped
//! when used), marked with the entry's input identity: written with the entry
//! (`cache_put.rs`), read for `file:line` (`debug_lines.rs`), listed and removed with it
//! (`cache_list.rs`).

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_elf::DebugLines;

use crate::entry::CACHE_FORMAT as FORMAT;

const MAGIC: &[u8; 8] = b"KLPSYMDW";
/// The sidecar's name beside its entry.
pub(crate) const SUFFIX: &str = ".dwarf";

/// The sidecar of the cache entry at `entry`.
pub(crate) fn sidecar_of(entry: &Path) -> PathBuf {
    let mut s = entry.as_os_str().to_owned();
    s.push(SUFFIX);
    PathBuf::from(s)
}

/// Writes the debug sections of `elf` beside `entry` (temporary file, renamed), marked with
/// the entry's input identity `content`. Nothing is written for an ELF without DWARF.
pub(crate) fn write_sidecar(
    entry: &Path,
    content: u128,
    elf: &[u8],
    rs: &mut Resched,
) -> std::io::Result<()> {
    let sections = klpsym_elf::debug_sections(elf);
    if sections.is_empty() {
        return Ok(());
    }
    // Header: magic, format, content, count, then (name length, name, offset, length) each;
    // the sections follow, each 8-aligned.
    let mut header = Vec::new();
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT.to_le_bytes());
    header.extend_from_slice(&content.to_le_bytes());
    header.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    let header_len: usize = header.len()
        + sections
            .iter()
            .map(|(n, _)| 4 + n.len() + 16)
            .sum::<usize>();
    let mut at = header_len.div_ceil(8) * 8;
    for (name, data) in &sections {
        header.extend_from_slice(&(name.len() as u32).to_le_bytes());
        header.extend_from_slice(name.as_bytes());
        header.extend_from_slice(&(at as u64).to_le_bytes());
        header.extend_from_slice(&(data.len() as u64).to_le_bytes());
        at = (at + data.len()).div_ceil(8) * 8;
    }
    let dir = entry.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        // 64 KiB a write(2): a call copies it all into the page cache at once.
        let mut w = std::io::BufWriter::with_capacity(64 << 10, tmp.as_file_mut());
        w.write_all(&header)?;
        let mut written = header.len();
        for (_, data) in &sections {
            let pad = written.div_ceil(8) * 8 - written;
            w.write_all(&[0u8; 8][..pad])?;
            written += pad;
            // In steps of 64 KiB (a copy into the page cache of a few microseconds), with a
            // reschedule point between.
            for chunk in data.chunks(4 << 20) {
                for step in chunk.chunks(64 << 10) {
                    rs.tick_step()
                        .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
                    w.write_all(step)?;
                }
                // Copied once: a mapped section's pages leave the process's memory behind
                // the copy (not a decompressed copy's: it is the process's own).
                if matches!(data, std::borrow::Cow::Borrowed(_)) {
                    klpsym_core::bulk::release_pages_with(chunk, rs)
                        .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
                }
            }
            written += data.len();
        }
        w.flush()?;
    }
    tmp.persist(sidecar_of(entry)).map_err(|e| e.error)?;
    Ok(())
}

/// The debug sections of the sidecar at `path`, when it is whole and marks `content`.
pub(crate) fn read_sidecar(path: &Path, content: u128) -> Option<DebugLines> {
    let file = std::fs::File::open(path).ok()?;
    let map = crate::entry::map_private(&file).ok()?;
    let bytes: &[u8] = (*map).as_ref();
    let mut b = bytes;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (h, t) = (b.get(..n)?, b.get(n..)?);
        b = t;
        Some(h)
    };
    if take(8)? != MAGIC || u32::from_le_bytes(take(4)?.try_into().ok()?) != FORMAT {
        return None;
    }
    if u128::from_le_bytes(take(16)?.try_into().ok()?) != content {
        return None;
    }
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let mut ranges: Vec<(String, Range<usize>)> = Vec::new();
    for _ in 0..count.min(64) {
        let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(take(n)?).ok()?.to_string();
        let off = u64::from_le_bytes(take(8)?.try_into().ok()?) as usize;
        let len = u64::from_le_bytes(take(8)?.try_into().ok()?) as usize;
        let end = off.checked_add(len)?;
        if end > bytes.len() {
            return None;
        }
        ranges.push((name, off..end));
    }
    DebugLines::from_ranges(map, &ranges)
}
