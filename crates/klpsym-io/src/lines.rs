//! The declaration lines of a debug vmlinux's functions, made once from its DWARF and kept
//! with its cache entry (reading them where no index is kept: `debug_lines.rs`).

use klpsym_core::resched::Resched;

use crate::error::LoadError;

/// The declaration line of every function of a debug vmlinux, made once from its DWARF and
/// kept in the cache beside its table ([`crate::Cache`]): a warm run answers
/// [`LoadedKernel::decl_lines_at`](crate::LoadedKernel::decl_lines_at) without decompressing the `-dbg` package again. The
/// answers are those of [`klpsym_elf::decl_lines`] for the table's text symbols.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineIndex {
    /// The files named, each once.
    files: Vec<String>,
    /// (address, index into `files`, line), sorted by address.
    at: Vec<(u64, u32, u64)>,
}

impl LineIndex {
    /// The lines of the text symbols (`t`, `T`, `w`, `W`) of `table`, from the DWARF of `elf`.
    pub(crate) fn make(
        elf: &[u8],
        table: &klpsym_core::SymbolTable,
        resched: &mut Resched,
    ) -> Result<LineIndex, LoadError> {
        let mut addrs = Vec::new();
        for s in table.iter() {
            resched.tick().map_err(klpsym_core::BuildError::from)?;
            if matches!(s.kind, 't' | 'T' | 'w' | 'W') {
                addrs.push(s.addr);
            }
        }
        addrs.sort_unstable();
        addrs.dedup();
        let lines =
            klpsym_elf::decl_lines(elf, &addrs, resched).map_err(klpsym_core::BuildError::from)?;
        let mut index = LineIndex::default();
        let mut file_ids: std::collections::HashMap<String, u32> = Default::default();
        for (addr, line) in addrs.into_iter().zip(lines) {
            let Some(l) = line else { continue };
            let next = index.files.len() as u32;
            let id = *file_ids.entry(l.file.clone()).or_insert_with(|| {
                index.files.push(l.file);
                next
            });
            index.at.push((addr, id, l.line));
        }
        Ok(index)
    }

    /// The line of the function at `addr`, when the DWARF told it.
    pub fn get(&self, addr: u64) -> Option<klpsym_elf::DeclLine> {
        let i = self.at.binary_search_by_key(&addr, |e| e.0).ok()?;
        let (_, file, line) = self.at[i];
        Some(klpsym_elf::DeclLine {
            file: self.files.get(file as usize)?.clone(),
            line,
        })
    }

    /// How many functions it knows.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// True when it knows none.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}
