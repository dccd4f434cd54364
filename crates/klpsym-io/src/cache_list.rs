//! What the cache folder holds, every kind of entry together (`klpsym cache`): the one place
//! that knows the kernel, module-tree and Module.symvers caches; each of those knows only
//! its own entries.

use klpsym_core::resched::Resched;

use crate::cache::{Cache, EntryInfo, SUFFIX};

impl Cache {
    /// Every entry file, with what it says about itself.
    pub fn list(&self, rs: &mut Resched) -> std::io::Result<Vec<EntryInfo>> {
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for e in rd {
            let e = e?;
            let p = e.path();
            let name = p.to_string_lossy();
            // A module's debug file kept under its build's id; a debug vmlinux's sections
            // beside their entry, listed on their own only when the entry is gone.
            let extra = if name.ends_with(crate::debug_lines::DEBUG_MODULE_SUFFIX) {
                Some(("module debug file", true))
            } else if name.ends_with(crate::copies_index::COPIES_INDEX_SUFFIX) {
                Some(("copies index", true))
            } else if let Some(entry) = name.strip_suffix(crate::debug_lines::SUFFIX) {
                (!std::path::Path::new(entry).exists()).then_some(("debug sections", false))
            } else {
                None
            };
            if let Some((kind, current)) = extra {
                let m = e.metadata()?;
                out.push(EntryInfo {
                    file: p.clone(),
                    bytes: m.len(),
                    current,
                    kind,
                    source_bytes: None,
                    source: None,
                    age_secs: age(&m),
                });
                continue;
            }
            if !name.ends_with(SUFFIX) {
                continue;
            }
            let m = e.metadata()?;
            // The debug sections kept beside a kernel entry count with it.
            let sidecar =
                std::fs::metadata(crate::debug_lines::sidecar_of(&p)).map_or(0, |m| m.len());
            let bytes = std::fs::read(&p).unwrap_or_default();
            // (source, its size): a folder has none.
            let (kind, described) = if crate::tree_cache::is_entry(&bytes) {
                let root =
                    crate::tree_cache::describe(&bytes, rs).map_err(std::io::Error::other)?;
                ("module tree", root.map(|r| (r.display().to_string(), None)))
            } else if crate::symvers_cache::is_entry(&bytes) {
                let file =
                    crate::symvers_cache::describe(&bytes, rs).map_err(std::io::Error::other)?;
                ("Module.symvers", file.map(|(s, n)| (s, Some(n))))
            } else {
                let kernel = crate::cache::describe(&bytes, rs).map_err(std::io::Error::other)?;
                ("kernel", kernel.map(|(s, n)| (s, Some(n))))
            };
            out.push(EntryInfo {
                file: p,
                bytes: m.len() + sidecar,
                current: described.is_some(),
                kind,
                source_bytes: described.as_ref().and_then(|d| d.1),
                source: described.map(|d| d.0),
                age_secs: age(&m),
            });
        }
        out.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(out)
    }
}

/// Seconds since `m`'s file was last written.
fn age(m: &std::fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map_or(0, |d| d.as_secs())
}
