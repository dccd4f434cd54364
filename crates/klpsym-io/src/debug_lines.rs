//! `file:line` sources: a vmlinux's DWARF (the bytes at hand, the cache's copy of its debug
//! sections, or its package read again) and modules' debug files (a folder of them, the
//! host's `/usr/lib/debug/lib/modules/$release`, or a debug package read for them).
//!
//! The cache keeps a debug vmlinux's DWARF beside its entry (`ENTRY.dwarf`: only the sections
//! line tables and inline chains need, about a third of the vmlinux, mapped when used), so a
//! warm run gives `file:line` without reading the `-dbg` package again.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_elf::DebugLines;

use crate::error::LoadError;
use crate::loaded::{LoadedKernel, SourceKind};

const MAGIC: &[u8; 8] = b"KLPSYMDW";
use crate::entry::CACHE_FORMAT as FORMAT;
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
fn read_sidecar(path: &Path, content: u128) -> Option<DebugLines> {
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

impl LoadedKernel {
    /// The line tables of this kernel's vmlinux with debug info: this kernel when it is one,
    /// else its `debug` vmlinux; from the bytes at hand, else the cache's copy of its debug
    /// sections, else its file or package read again. `None` without DWARF.
    pub fn vmlinux_lines(
        &self,
        limit: u64,
        rs: &mut Resched,
    ) -> Result<Option<DebugLines>, LoadError> {
        let k = if self.kind == SourceKind::VmlinuxElf {
            self
        } else {
            match self.debug.as_deref() {
                Some(d) => d,
                None => return Ok(None),
            }
        };
        if let Some(elf) = &k.elf {
            return Ok(DebugLines::vmlinux(elf.0.clone()));
        }
        if let (Some(entry), Some(content)) = (&k.cached, k.content) {
            if let Some(lines) = read_sidecar(&sidecar_of(entry), content) {
                return Ok(Some(lines));
            }
        }
        let opts = crate::LoadOptions {
            max_input_size: limit,
            max_decompressed_size: limit,
            ..crate::LoadOptions::default()
        };
        let bytes = crate::package::elf_of(&k.path, &opts, rs)?;
        Ok(DebugLines::vmlinux(bytes.0))
    }
}

/// Where the host keeps the debug files of release `release`'s modules (Debian's, Fedora's
/// and Ubuntu's `-dbg`/`-dbgsym`/`debuginfo` packages install them there).
pub fn host_debug_modules_dir(release: &str) -> Option<PathBuf> {
    let d = PathBuf::from(format!("/usr/lib/debug/lib/modules/{release}"));
    d.is_dir().then_some(d)
}

/// The debug file of module `name` under `dir` (`NAME.ko` or `NAME.ko.debug`, `_` and `-`
/// alike), searched through the folder's tree.
pub fn find_module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let want = klpsym_core::normalize_module_name(name);
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > 1_000_000 {
                return None;
            }
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
                continue;
            }
            let f = e.file_name();
            let f = f.to_string_lossy();
            let f = f.trim_end_matches(".debug");
            if f.contains(".ko") && klpsym_core::normalize_module_name(f) == want {
                return Some(p);
            }
        }
    }
    None
}

/// The lines of a module's debug file read from `path` (a `.ko` with DWARF, possibly
/// compressed as modules are).
pub fn module_lines_from_file(
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> Result<Option<DebugLines>, LoadError> {
    let raw = crate::read::read_bounded(path, limit, rs)?;
    let bytes = crate::read::decompressed(&raw, path, limit, rs)?;
    Ok(DebugLines::module(&bytes))
}

impl crate::Cache {
    /// Where the cache keeps the debug file of module `name` of the build whose vmlinux has
    /// GNU build id `build_id` (one build's modules are that build's: no other identity is
    /// needed).
    pub fn debug_module_path(&self, build_id: &str, name: &str) -> PathBuf {
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        self.dir.join(format!(
            "{}-{}{DEBUG_MODULE_SUFFIX}",
            safe(build_id),
            safe(name)
        ))
    }
}

/// The name a kept module debug file ends with.
pub(crate) const DEBUG_MODULE_SUFFIX: &str = ".klpc-debug.ko";
