//! What `nm -n vmlinux` prints: the input of `scripts/kallsyms`.
//!
//! scripts/kallsyms never sees the ELF file; it reads `nm -n` output (directly before
//! 6.1, through `scripts/mksysmap` since). So both the type letter and the input order
//! (which becomes the last tie-break of the kallsyms sort) are GNU nm's, reproduced
//! here from binutils' `bfd_decode_symclass` / `decode_section_type` and nm's
//! `numeric_forward` (value, then name in the C locale kbuild forces, then symbol
//! table order because glibc's qsort is a stable merge sort for such sizes).

use klpsym_resched::bulk::sort_by_with_points;
use klpsym_resched::resched::{Cancelled, Resched};

use crate::raw::{
    RawElf, RawSection, RawSymbol, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_ABS, SHN_COMMON,
    SHN_UNDEF, SHT_NOBITS, STB_GLOBAL, STB_GNU_UNIQUE, STB_WEAK, STT_FILE, STT_GNU_IFUNC,
    STT_OBJECT, STT_SECTION,
};

/// One line of `nm -n` output, its name borrowed from the [`RawElf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NmLine<'r> {
    /// Undefined (nm prints these first).
    pub undefined: bool,
    pub addr: u64,
    pub kind: u8,
    pub name: &'r str,
    pub size: u64,
    /// Section header index of the section the symbol is defined in.
    pub section_index: Option<u32>,
    /// Index of the symbol in `.symtab`.
    pub symtab_index: u32,
    /// For a local symbol: the source file of its translation unit, the last STT_FILE entry
    /// before it in `.symtab` (the linker keeps each object's locals after its FILE entry).
    pub file: Option<&'r str>,
}

/// BFD's idea of a section's flags, derived from the ELF header the way
/// `_bfd_elf_make_section_from_shdr` does, then turned into nm's letter.
fn section_letter(sec: &RawSection<'_>) -> u8 {
    // coff_section_type(): a prefix table consulted before the flags.
    for (prefix, c) in [
        (".drectve", b'i'),
        (".edata", b'e'),
        (".idata", b'i'),
        (".pdata", b'p'),
    ] {
        if sec.name.starts_with(prefix) {
            return c;
        }
    }
    let has_contents = sec.sh_type != SHT_NOBITS;
    let alloc = sec.flags & SHF_ALLOC != 0;
    let load = alloc && has_contents;
    let readonly = sec.flags & SHF_WRITE == 0;
    let code = sec.flags & SHF_EXECINSTR != 0;
    let data = !code && load;
    let debugging = !alloc
        && (sec.name.starts_with(".debug")
            || sec.name.starts_with(".gnu.debuglto_.debug_")
            || sec.name.starts_with(".gnu.linkonce.wi.")
            || sec.name.starts_with(".zdebug")
            || sec.name.starts_with(".line")
            || sec.name.starts_with(".stab"));
    if code {
        b't'
    } else if data {
        if readonly {
            b'r'
        } else {
            b'd'
        }
    } else if !has_contents {
        b'b'
    } else if debugging {
        b'N'
    } else if readonly {
        b'n'
    } else {
        b'?'
    }
}

/// The letter GNU nm prints for `sym`, or `None` when nm does not print the
/// symbol at all (the null entry, section and file symbols: BFD marks them as
/// debugging symbols, which nm hides without `-a`).
pub(crate) fn nm_letter(elf: &RawElf<'_>, sym: &RawSymbol<'_>) -> Option<u8> {
    if sym.index == 0 || sym.typ == STT_SECTION || sym.typ == STT_FILE {
        return None;
    }
    if sym.shndx == SHN_COMMON {
        return Some(b'C');
    }
    if sym.shndx == SHN_UNDEF {
        return Some(match (sym.bind == STB_WEAK, sym.typ == STT_OBJECT) {
            (true, true) => b'v',
            (true, false) => b'w',
            _ => b'U',
        });
    }
    if sym.typ == STT_GNU_IFUNC {
        return Some(b'i');
    }
    if sym.bind == STB_WEAK {
        return Some(if sym.typ == STT_OBJECT { b'V' } else { b'W' });
    }
    if sym.bind == STB_GNU_UNIQUE {
        return Some(b'u');
    }
    let lower = if sym.shndx == SHN_ABS {
        b'a'
    } else if let Some(sec) = sym.section.and_then(|i| elf.sections.get(i as usize)) {
        section_letter(sec)
    } else {
        // SHN_XINDEX without a resolvable index, or another reserved index.
        b'?'
    };
    Some(if sym.bind == STB_GLOBAL {
        lower.to_ascii_uppercase()
    } else {
        lower
    })
}

/// `nm -n`: every printed symbol, undefined ones first, then by address, then by
/// name (strcmp), then by symbol table order. Empty names are skipped: nm prints
/// such a line but scripts/kallsyms' `fscanf("%llx %c %s")` cannot read a name from
/// it (it would swallow the next line's address), and the kernel never has them.
pub(crate) fn nm_sorted<'r>(
    elf: &'r RawElf<'_>,
    resched: &mut Resched,
) -> Result<Vec<NmLine<'r>>, Cancelled> {
    let mut lines: Vec<NmLine<'r>> = Vec::with_capacity(elf.symbols.len());
    let mut file: Option<&'r str> = None;
    for s in &elf.symbols {
        resched.tick()?;
        if s.typ == STT_FILE {
            file = (!s.name.is_empty()).then_some(&*s.name);
            continue;
        }
        if s.name.is_empty() {
            continue;
        }
        let Some(kind) = nm_letter(elf, s) else {
            continue;
        };
        lines.push(NmLine {
            undefined: s.shndx == SHN_UNDEF,
            addr: s.value,
            kind,
            name: &s.name,
            size: s.size,
            section_index: s.section,
            symtab_index: s.index,
            file: if s.bind == crate::raw::STB_LOCAL {
                file
            } else {
                None
            },
        });
    }
    sort_by_with_points(
        &mut lines,
        |a, b| {
            b.undefined
                .cmp(&a.undefined)
                .then_with(|| {
                    if a.undefined && b.undefined {
                        std::cmp::Ordering::Equal
                    } else {
                        a.addr.cmp(&b.addr)
                    }
                })
                .then_with(|| a.name.as_bytes().cmp(b.name.as_bytes()))
                .then_with(|| a.symtab_index.cmp(&b.symtab_index))
        },
        resched,
    )?;
    Ok(lines)
}
