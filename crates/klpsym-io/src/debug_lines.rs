//! `file:line` sources: a vmlinux's DWARF (the bytes at hand, the cache's copy of its debug
//! sections, or its package read again) and modules' debug files (a folder of them, the
//! host's `/usr/lib/debug/lib/modules/$release`, or a debug package read for them); and the
//! declaration lines of functions, from the cache's index or that DWARF.
//!
//! The cache keeps a debug vmlinux's DWARF beside its entry (`debug_sidecar.rs`), so a warm
//! run gives `file:line` without reading the `-dbg` package again.

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_elf::DebugLines;

use crate::debug_sidecar::{read_sidecar, sidecar_of};
use crate::error::LoadError;
use crate::loaded::{LoadedKernel, SourceKind};

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
        let bytes = crate::package::elf_of(&k.path, &opts_for(limit), rs)?;
        Ok(DebugLines::vmlinux(bytes.0))
    }

    /// The DWARF declaration line (`fs/inode.c:432`) of the functions at `addrs` in the
    /// vmlinux with debug info at hand: this kernel when it is one, else its `debug` vmlinux
    /// (the caller gives addresses there). `None` where an address is `None` or DWARF does not
    /// tell. Only the compilation units holding the functions are read.
    pub fn decl_lines_at(
        &self,
        addrs: &[Option<u64>],
        limit: u64,
        resched: &mut Resched,
    ) -> Result<Vec<Option<klpsym_elf::DeclLine>>, LoadError> {
        let none = vec![None; addrs.len()];
        let elf_kernel = if self.kind == SourceKind::VmlinuxElf {
            self
        } else {
            match self.debug.as_deref() {
                Some(d) => d,
                None => return Ok(none),
            }
        };
        if addrs.iter().all(Option::is_none) {
            return Ok(none);
        }
        // Kept with a cached -dbg package's table: no need to read the package again.
        if let Some(index) = &elf_kernel.lines {
            return Ok(addrs.iter().map(|a| a.and_then(|a| index.get(a))).collect());
        }
        let bytes = match &elf_kernel.elf {
            Some(b) => b.clone(),
            None => crate::package::elf_of(&elf_kernel.path, &opts_for(limit), resched)?,
        };
        let bytes = bytes.bytes();
        // Only known addresses are looked up.
        let wanted: Vec<u64> = addrs.iter().flatten().copied().collect();
        let mut lines = klpsym_elf::decl_lines(bytes, &wanted, resched)
            .map_err(klpsym_core::BuildError::from)?
            .into_iter();
        Ok(addrs
            .iter()
            .map(|a| a.and_then(|_| lines.next().flatten()))
            .collect())
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
    Ok(DebugLines::module(&read_module_file(path, limit, rs)?))
}

/// The bytes of a module file at `path` (a `.ko`, decompressed when `.ko.xz`, `.ko.zst`,
/// `.ko.gz`), at most `limit` of them.
pub fn read_module_file(path: &Path, limit: u64, rs: &mut Resched) -> Result<Vec<u8>, LoadError> {
    let raw = crate::read::read_bounded(path, limit, rs)?;
    let decoded = match crate::read::decompressed(&raw, path, limit, rs)? {
        std::borrow::Cow::Owned(v) => Some(v),
        std::borrow::Cow::Borrowed(_) => None,
    };
    Ok(decoded.unwrap_or(raw))
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

/// Load options with one limit for input and decompressed sizes.
fn opts_for(limit: u64) -> crate::LoadOptions {
    crate::LoadOptions {
        max_input_size: limit,
        max_decompressed_size: limit,
        ..crate::LoadOptions::default()
    }
}
