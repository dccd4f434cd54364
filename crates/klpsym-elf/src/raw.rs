//! A flat, owned-index view of the parts of an ELF object kallsyms cares about:
//! section headers (raw flags and types, as the kernel and nm look at them) and the
//! `.symtab` entries (raw `st_shndx`, because the module loader compares the raw
//! 16-bit value against `e_shnum` and never resolves `SHN_XINDEX`).
//!
//! Parsing is done by the `object` crate, which bounds every table by the input's
//! size, so no count read from the input can cause an unbounded allocation here.

use std::borrow::Cow;

use klpsym_resched::resched::{Cancelled, Resched};
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::Endianness;

use crate::error::ElfError;

// Raw `<elf.h>` values, kept as plain integers because the kernel and nm compare
// raw header fields.
pub(crate) const SHT_SYMTAB: u32 = 2;
pub(crate) const SHT_NOBITS: u32 = 8;
pub(crate) const SHF_WRITE: u64 = 0x1;
pub(crate) const SHF_ALLOC: u64 = 0x2;
pub(crate) const SHF_EXECINSTR: u64 = 0x4;
/// The kernel's private flag for sections made read-only after init.
pub(crate) const SHF_RO_AFTER_INIT: u64 = 0x0020_0000;
/// ia64's SHF_IA_64_SHORT, the kernel's `ARCH_SHF_SMALL` there (0 elsewhere).
pub(crate) const SHF_IA_64_SHORT: u64 = 0x1000_0000;
pub(crate) const SHN_UNDEF: u16 = 0;
pub(crate) const SHN_LORESERVE: u16 = 0xff00;
pub(crate) const SHN_ABS: u16 = 0xfff1;
pub(crate) const SHN_COMMON: u16 = 0xfff2;
pub(crate) const SHN_XINDEX: u16 = 0xffff;
pub(crate) const STB_LOCAL: u8 = 0;
pub(crate) const STB_GLOBAL: u8 = 1;
pub(crate) const STB_WEAK: u8 = 2;
pub(crate) const STB_GNU_UNIQUE: u8 = 10;
pub(crate) const STT_OBJECT: u8 = 1;
pub(crate) const STT_SECTION: u8 = 3;
pub(crate) const STT_FILE: u8 = 4;
pub(crate) const STT_GNU_IFUNC: u8 = 10;
pub(crate) const ET_REL: u16 = 1;
pub(crate) const EM_X86_64: u16 = 62;
pub(crate) const EM_IA_64: u16 = 50;

/// One section header.
#[derive(Debug, Clone)]
pub(crate) struct RawSection<'a> {
    /// Borrowed from the section name table (copied only when it is not UTF-8).
    pub name: Cow<'a, str>,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub size: u64,
    pub align: u64,
    /// File bytes of the section (`None` for `SHT_NOBITS`).
    pub data: Option<&'a [u8]>,
}

/// One `.symtab` entry.
#[derive(Debug, Clone)]
pub(crate) struct RawSymbol<'a> {
    pub index: u32,
    /// Borrowed from the string table (copied only when it is not UTF-8): no allocation per
    /// symbol, and nothing to free per symbol either.
    pub name: Cow<'a, str>,
    /// `st_name` as stored (0 means "no name" to the module loader).
    pub st_name: u32,
    pub value: u64,
    pub size: u64,
    pub bind: u8,
    pub typ: u8,
    /// The raw 16-bit `st_shndx`.
    pub shndx: u16,
    /// The section index with `SHN_XINDEX` resolved, for naming only.
    pub section: Option<u32>,
}

/// The parsed object.
#[derive(Debug)]
pub(crate) struct RawElf<'a> {
    pub machine: u16,
    pub e_type: u16,
    pub little_endian: bool,
    pub is_64: bool,
    pub sections: Vec<RawSection<'a>>,
    pub symbols: Vec<RawSymbol<'a>>,
    /// Whether a `SHT_SYMTAB` section exists.
    pub has_symtab: bool,
}

impl<'a> RawElf<'a> {
    /// Parse an ELF32 or ELF64 object of either byte order, with a reschedule point per
    /// section and per symbol.
    pub fn parse(data: &'a [u8], resched: &mut Resched) -> Result<Self, ElfError> {
        if data.len() < 16 || &data[..4] != b"\x7fELF" {
            return Err(ElfError::Parse(format!(
                "missing ELF magic at offset 0 (found {:02x?})",
                &data[..data.len().min(4)]
            )));
        }
        match data[4] {
            1 => parse_generic::<elf::FileHeader32<Endianness>>(data, resched),
            2 => parse_generic::<elf::FileHeader64<Endianness>>(data, resched),
            other => Err(ElfError::Parse(format!(
                "e_ident[EI_CLASS] at offset 4 is {other}, expected 1 (ELF32) or 2 (ELF64)"
            ))),
        }
    }

    /// Name of section `index`, if it exists.
    pub fn section_name(&self, index: u32) -> Option<&str> {
        self.sections.get(index as usize).map(|s| &*s.name)
    }

    /// Section index by exact name (first match, as the kernel's `find_sec` does).
    pub fn find_section(
        &self,
        name: &str,
        resched: &mut Resched,
    ) -> Result<Option<usize>, Cancelled> {
        for (i, s) in self.sections.iter().enumerate() {
            resched.tick()?;
            if s.name == name {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }
}

/// Section and symbol names are borrowed from their string tables, but the callers copy the
/// names they keep (into one arena per result). Entries may all point at one long name
/// (`sh_name`/`st_name` are plain offsets), which would make those copies a quadratic multiple
/// of the input; in objects a linker writes, names total about the size of their string tables.
/// More than this many name bytes per input byte is refused.
const NAME_BYTES_PER_INPUT_BYTE: usize = 4;

/// Running total of the name bytes an ELF reader copies, against a limit of four name bytes
/// per input byte (at least 64 KiB): one rule for every reader of untrusted objects (this
/// crate's, and the livepatch module reader's).
#[derive(Debug)]
pub struct NameBudget {
    left: usize,
    limit: usize,
    input: usize,
}

/// A [`NameBudget`] spent: its message says what was refused (the caller adds where).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamesTooLarge {
    limit: usize,
    input: usize,
}

impl std::fmt::Display for NamesTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "section and symbol names total more than {} bytes ({}x the {}-byte input): \
             entries share names far beyond what a linker writes",
            self.limit, NAME_BYTES_PER_INPUT_BYTE, self.input
        )
    }
}

impl NameBudget {
    /// The budget of an object of `input` bytes.
    pub fn new(input: usize) -> Self {
        // A floor for tiny objects, so the budget never refuses a small real one.
        let limit = input.saturating_mul(NAME_BYTES_PER_INPUT_BYTE).max(1 << 16);
        NameBudget {
            left: limit,
            limit,
            input,
        }
    }

    /// Spends `len` bytes of names, or says the budget is spent.
    pub fn spend(&mut self, len: usize) -> Result<(), NamesTooLarge> {
        match self.left.checked_sub(len) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(NamesTooLarge {
                limit: self.limit,
                input: self.input,
            }),
        }
    }

    fn take(&mut self, name: &[u8], at: impl FnOnce() -> String) -> Result<(), ElfError> {
        self.spend(name.len())
            .map_err(|e| ElfError::malformed(e.to_string(), at()))
    }
}

fn parse_generic<'a, H>(data: &'a [u8], resched: &mut Resched) -> Result<RawElf<'a>, ElfError>
where
    H: FileHeader<Endian = Endianness>,
{
    let header = H::parse(data)?;
    let endian = header.endian()?;
    let table = header.sections(endian, data)?;
    let mut names = NameBudget::new(data.len());
    let mut sections = Vec::with_capacity(table.len());
    let mut has_symtab = false;
    for (i, sh) in table.iter().enumerate() {
        resched.tick()?;
        let name = table
            .section_name(endian, sh)
            .map_err(|e| ElfError::malformed(e.to_string(), format!("section header {i}")))?;
        names.take(name, || format!("section header {i}"))?;
        let sh_type = sh.sh_type(endian).0;
        has_symtab |= sh_type == SHT_SYMTAB;
        let bytes = if sh_type == SHT_NOBITS || i == 0 {
            None
        } else {
            Some(sh.data(endian, data).map_err(|e| {
                ElfError::malformed(
                    e.to_string(),
                    format!("section {i} ({})", String::from_utf8_lossy(name)),
                )
            })?)
        };
        sections.push(RawSection {
            name: String::from_utf8_lossy(name),
            sh_type,
            flags: sh.sh_flags(endian).0,
            addr: sh.sh_addr(endian).into(),
            size: sh.sh_size(endian).into(),
            align: sh.sh_addralign(endian).into(),
            data: bytes,
        });
    }
    let symtab = table
        .symbols(endian, data, elf::SHT_SYMTAB)
        .map_err(|e| ElfError::malformed(e.to_string(), ".symtab"))?;
    let mut symbols = Vec::with_capacity(symtab.len());
    for (i, sym) in symtab.iter().enumerate() {
        resched.tick()?;
        let name = symtab
            .symbol_name(endian, sym)
            .map_err(|e| ElfError::malformed(e.to_string(), format!(".symtab entry {i}")))?;
        names.take(name, || format!(".symtab entry {i}"))?;
        let shndx = sym.st_shndx(endian).0;
        let section = if shndx == SHN_XINDEX {
            symtab.shndx(endian, object::SymbolIndex(i))
        } else if shndx == 0 || shndx >= SHN_LORESERVE {
            None
        } else {
            Some(u32::from(shndx))
        };
        symbols.push(RawSymbol {
            index: u32::try_from(i)
                .map_err(|_| ElfError::malformed("too many symbols", ".symtab"))?,
            name: String::from_utf8_lossy(name),
            st_name: sym.st_name(endian),
            value: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            bind: sym.st_bind().0,
            typ: sym.st_type().0,
            shndx,
            section,
        });
    }
    Ok(RawElf {
        machine: header.e_machine(endian).0,
        little_endian: header.is_little_endian(),
        is_64: header.is_class_64(),
        e_type: header.e_type(endian).0,
        sections,
        symbols,
        has_symtab,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_budget_refuses_past_the_multiple_and_names_the_place() {
        let mut b = NameBudget::new(1 << 20);
        let name = vec![b'a'; 1 << 20];
        for _ in 0..NAME_BYTES_PER_INPUT_BYTE {
            b.take(&name, || "first".into()).unwrap();
        }
        let err = b.take(b"x", || ".symtab entry 7".into()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(".symtab entry 7"), "{msg}");
        assert!(msg.contains("share names"), "{msg}");
    }

    #[test]
    fn name_budget_has_a_floor_for_tiny_objects() {
        let mut b = NameBudget::new(10);
        b.take(&[b'n'; 60_000], || "s".into()).unwrap();
    }
}
