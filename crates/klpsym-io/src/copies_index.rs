//! The index of a vmlinux's DWARF that finds a function's copies by name and across units
//! ([`klpsym_elf::CopiesIndex`]: one walk of all of `.debug_info`, seconds), kept in the
//! cache under the vmlinux's GNU build id: one build's DWARF is that build's, whatever file
//! or package it was read from. The file ends with the xxh3-128 of what precedes it; one
//! that does not verify is ignored and made again.

use std::path::PathBuf;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_elf::CopiesIndex;

use crate::entry::hash_in_steps;

/// The name a kept index ends with.
pub(crate) const COPIES_INDEX_SUFFIX: &str = ".klpc-copies";

impl crate::Cache {
    /// Where the cache keeps the copies index of the vmlinux whose GNU build id is
    /// `build_id`.
    pub fn copies_index_path(&self, build_id: &str) -> PathBuf {
        let safe: String = build_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        self.dir.join(format!("{safe}{COPIES_INDEX_SUFFIX}"))
    }

    /// The copies index kept for `build_id`, when there is a whole one.
    pub fn read_copies_index(
        &self,
        build_id: &str,
        rs: &mut Resched,
    ) -> Result<Option<CopiesIndex>, Cancelled> {
        let Some(map) = crate::entry::map_entry(&self.copies_index_path(build_id)) else {
            return Ok(None);
        };
        let bytes: &[u8] = (*map).as_ref();
        let Some(body_len) = bytes.len().checked_sub(16) else {
            return Ok(None);
        };
        let (body, trailer) = bytes.split_at(body_len);
        if hash_in_steps(body, rs)?.to_le_bytes() != trailer {
            return Ok(None);
        }
        CopiesIndex::decode(body, rs)
    }

    /// Keeps `index` for `build_id` (temporary file, renamed into place). Failing to write is
    /// not an error (the cache is an optimisation): the reason is returned for a note.
    pub fn keep_copies_index(
        &self,
        build_id: &str,
        index: &CopiesIndex,
        rs: &mut Resched,
    ) -> Result<Result<(), String>, Cancelled> {
        let mut body = index.encode(rs)?;
        let trailer = hash_in_steps(&body, rs)?;
        body.extend_from_slice(&trailer.to_le_bytes());
        if !self.dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            if let Err(e) = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
            {
                return Ok(Err(format!("{}: {e}", self.dir.display())));
            }
        }
        if !self.private() {
            return Ok(Err(format!(
                "{}: not used as a cache: it must be owned by this user and writable by no one else",
                self.dir.display()
            )));
        }
        let path = self.copies_index_path(build_id);
        let written = crate::write_atomically(&path, |w| {
            for chunk in body.chunks(1 << 20) {
                w.write_all(chunk)?;
            }
            Ok(())
        });
        Ok(written.map_err(|e| format!("{}: {e}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_index_reads_back_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = crate::Cache::new(dir.path().join("c"));
        let rs = &mut Resched::none();
        assert_eq!(cache.read_copies_index("ab12", rs).unwrap(), None);
        let index = CopiesIndex::default();
        cache
            .keep_copies_index("ab12", &index, rs)
            .unwrap()
            .unwrap();
        assert_eq!(
            cache.read_copies_index("ab12", rs).unwrap(),
            Some(index.clone())
        );
        // Another build's id reads nothing.
        assert_eq!(cache.read_copies_index("cd34", rs).unwrap(), None);
        let path = cache.copies_index_path("ab12");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 20;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(cache.read_copies_index("ab12", rs).unwrap(), None);
    }
}
