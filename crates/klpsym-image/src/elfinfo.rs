//! What an ELF vmlinux adds: the architecture, the file-offset-to-address mapping of its loaded
//! segments (needed for place-relative offsets), and, when it still has a `.symtab`, the
//! `kallsyms_*` symbols themselves (used to cross-check what the scan found).

use klpsym_resched::resched::{Cancelled, Resched};
use std::ops::Range;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionFlags};

use crate::Arch;

/// Facts read from an ELF vmlinux.
#[derive(Debug, Default)]
pub(crate) struct ElfInfo {
    pub arch: Option<Arch>,
    /// (file offset, file size, virtual address) of each loaded segment.
    pub segments: Vec<(u64, u64, u64)>,
    /// File offsets of `kallsyms_*` symbols found in `.symtab`.
    pub kallsyms_symbols: Vec<(String, usize)>,
    /// File ranges of the allocated, non-executable sections with contents, ascending and
    /// merged: everything a scan looks for is data (`scripts/kallsyms` puts its tables in
    /// `.rodata`; the banner, vermagic, exports and build-id note are data too), so code
    /// and the sections the kernel never loads are not searched. Empty when the file has no
    /// section headers (then all of it is).
    pub data_spans: Vec<Range<usize>>,
}

impl ElfInfo {
    /// `Ok(None)` when `data` does not parse as ELF.
    pub fn parse(data: &[u8], resched: &mut Resched) -> Result<Option<ElfInfo>, Cancelled> {
        let Ok(file) = object::File::parse(data) else {
            return Ok(None);
        };
        let arch = match file.architecture() {
            object::Architecture::X86_64 => Arch::X86_64,
            object::Architecture::Aarch64 => Arch::Arm64,
            other => Arch::Other(format!("{other:?}")),
        };
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .filter(|&(_, size, _)| size > 0)
            .collect();
        let mut data_spans: Vec<Range<usize>> = Vec::new();
        for section in file.sections() {
            resched.tick()?;
            // NOBITS sections (.bss) have no file range.
            let SectionFlags::Elf { sh_flags, .. } = section.flags() else {
                continue;
            };
            let alloc = sh_flags.0 & object::elf::SHF_ALLOC.0 != 0;
            let code = sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0;
            let (Some((off, size)), true, false) = (section.file_range(), alloc, code) else {
                continue;
            };
            let (Ok(off), Ok(size)) = (usize::try_from(off), usize::try_from(size)) else {
                continue;
            };
            data_spans.push(off..off.saturating_add(size));
        }
        let mut info = ElfInfo {
            arch: Some(arch),
            segments,
            kallsyms_symbols: Vec::new(),
            data_spans: klpsym_resched::merge_spans(data_spans),
        };
        for sym in file.symbols() {
            resched.tick()?;
            let Ok(name) = sym.name() else { continue };
            if name.starts_with("kallsyms_") {
                if let Some(off) = info.file_offset(sym.address()) {
                    info.kallsyms_symbols.push((name.to_owned(), off));
                }
            }
        }
        Ok(Some(info))
    }

    /// Virtual address of a file offset, when a loaded segment covers it.
    pub fn vaddr(&self, off: usize) -> Option<u64> {
        let off = off as u64;
        self.segments
            .iter()
            .find(|&&(o, s, _)| off >= o && off < o + s)
            .map(|&(o, _, v)| v + (off - o))
    }

    fn file_offset(&self, vaddr: u64) -> Option<usize> {
        self.segments
            .iter()
            .find(|&&(_, s, v)| vaddr >= v && vaddr < v + s)
            .and_then(|&(o, _, v)| usize::try_from(o + (vaddr - v)).ok())
    }

    /// File offset of the `.symtab` symbol `name`, if present.
    pub fn symbol(&self, name: &str) -> Option<usize> {
        self.kallsyms_symbols
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, o)| o)
    }
}
