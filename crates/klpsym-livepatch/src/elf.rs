//! An owned, validated view of a relocatable ELF64 little-endian object (a `.ko`).
//!
//! Read with `object`'s low-level ELF API (it keeps raw `st_shndx` values such as
//! SHN_LIVEPATCH that the unified API would hide). Every count comes from headers that
//! `object` bounds-checked against the input, so nothing here allocates more than the input
//! can describe.

use crate::consts as c;
use object::elf;
use object::read::elf::{FileHeader, Rela as _, SectionHeader, Sym as _};
use object::LittleEndian as LE;
use serde::Serialize;

use klpsym_core::resched::{Cancelled, Resched};

use klpsym_core::bulk::free_with_points;

use crate::error::ParseError;

/// `st_shndx` of a livepatch symbol (include/uapi/linux/elf.h).
pub const SHN_LIVEPATCH: u16 = 0xff20;
/// `sh_flags` bit of a klp relocation section (include/uapi/linux/elf.h).
pub const SHF_RELA_LIVEPATCH: u64 = 0x0010_0000;

/// The architectures the kernel's livepatch supports that this crate models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// EM_X86_64.
    X86_64,
    /// EM_AARCH64.
    Aarch64,
}

impl Arch {
    /// The architecture of an ELF `e_machine`, if modelled.
    pub fn from_machine(machine: u16) -> Option<Arch> {
        match machine {
            c::EM_X86_64 => Some(Arch::X86_64),
            c::EM_AARCH64 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The ELF `e_machine` value.
    pub fn machine(self) -> u16 {
        match self {
            Arch::X86_64 => c::EM_X86_64,
            Arch::Aarch64 => c::EM_AARCH64,
        }
    }

    /// The relocation type of a 64-bit absolute data pointer.
    pub fn abs64(self) -> u32 {
        match self {
            Arch::X86_64 => c::R_X86_64_64,
            Arch::Aarch64 => c::R_AARCH64_ABS64,
        }
    }
}

/// One section header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfSection {
    /// Section index.
    pub index: u32,
    /// Name from `.shstrtab`.
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_addralign`.
    pub addralign: u64,
    /// `sh_entsize`.
    pub entsize: u64,
}

/// One symbol of `.symtab`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfSymbol {
    /// Index in `.symtab` (relocations refer to it).
    pub index: u32,
    /// Name (lossy UTF-8).
    pub name: String,
    /// Raw `st_shndx` (SHN_UNDEF, SHN_ABS, SHN_LIVEPATCH, or a section index).
    pub shndx: u16,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_info`.
    pub info: u8,
}

impl ElfSymbol {
    /// STB_* binding.
    pub fn bind(&self) -> u8 {
        self.info >> 4
    }
    /// STT_* type.
    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }
    /// True for SHN_UNDEF.
    pub fn is_undefined(&self) -> bool {
        self.shndx == c::SHN_UNDEF
    }
    /// True when the symbol lives in a real section (not UNDEF/ABS/COMMON/LIVEPATCH/...).
    pub fn in_section(&self) -> bool {
        self.shndx != c::SHN_UNDEF && self.shndx < c::SHN_LORESERVE
    }
}

/// One `Elf64_Rela`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ElfRela {
    /// `r_offset` in the target section.
    pub offset: u64,
    /// Symbol index.
    pub sym: u32,
    /// Relocation type.
    pub r_type: u32,
    /// `r_addend`.
    pub addend: i64,
}

/// The parsed object.
#[derive(Debug, Clone)]
pub struct ElfObject<'d> {
    /// The input bytes.
    pub data: &'d [u8],
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// All sections, index 0 included.
    pub sections: Vec<ElfSection>,
    /// All symbols, index 0 included.
    pub symbols: Vec<ElfSymbol>,
    /// Index of `.symtab` (0 when absent).
    pub symtab_index: u32,
    /// Index of the string table linked from `.symtab`.
    pub strtab_index: u32,
    /// `e_shstrndx`.
    pub shstrtab_index: u32,
    /// Relocations of every SHT_RELA section, by section index (empty for other sections).
    pub relas: Vec<Vec<ElfRela>>,
}

fn err(what: impl Into<String>) -> ParseError {
    ParseError::Malformed(what.into())
}

/// `name`, once the object's name budget ([`klpsym_elf::NameBudget`]) allows it; the error
/// says where (`at`).
fn spend<'n>(
    budget: &mut klpsym_elf::NameBudget,
    name: &'n [u8],
    at: impl FnOnce() -> String,
) -> Result<&'n [u8], ParseError> {
    budget
        .spend(name.len())
        .map(|()| name)
        .map_err(|e| err(format!("{}: {e}", at())))
}

impl<'d> ElfObject<'d> {
    /// Parses `data`, which must be an ELF64 little-endian object.
    pub fn parse(data: &'d [u8]) -> Result<Self, ParseError> {
        Self::parse_with(data, &mut Resched::none())
    }

    /// [`parse`](ElfObject::parse), reaching reschedule points through `resched` (a tick per
    /// section, symbol and relocation); a cancelled point is [`ParseError::Cancelled`].
    pub fn parse_with(data: &'d [u8], resched: &mut Resched) -> Result<Self, ParseError> {
        if data.len() < 64 || &data[..4] != b"\x7fELF" {
            return Err(ParseError::NotElf);
        }
        if data[c::EI_CLASS] != c::ELFCLASS64 {
            return Err(ParseError::Unsupported(
                "32-bit ELF: livepatch modules here are ELF64".into(),
            ));
        }
        if data[c::EI_DATA] != c::ELFDATA2LSB {
            return Err(ParseError::Unsupported(
                "big-endian ELF is not supported".into(),
            ));
        }
        let hdr =
            elf::FileHeader64::<LE>::parse(data).map_err(|e| err(format!("ELF header: {e}")))?;
        let e = LE;
        let sections = hdr
            .sections(e, data)
            .map_err(|x| err(format!("section headers: {x}")))?;
        let mut names = klpsym_elf::NameBudget::new(data.len());
        let mut out_sections = Vec::with_capacity(sections.len());
        for (i, s) in sections.iter().enumerate() {
            resched.tick()?;
            let name = sections
                .section_name(e, s)
                .map_err(|x| err(format!("section {i}: name: {x}")))
                .and_then(|n| spend(&mut names, n, || format!("section {i}")))
                .map(|n| String::from_utf8_lossy(n).into_owned())?;
            out_sections.push(ElfSection {
                index: i as u32,
                name,
                sh_type: s.sh_type(e).0,
                flags: s.sh_flags(e).0,
                offset: s.sh_offset(e),
                size: s.sh_size(e),
                link: s.sh_link(e),
                info: s.sh_info(e),
                addralign: s.sh_addralign(e),
                entsize: s.sh_entsize(e),
            });
        }
        let symtab = sections
            .symbols(e, data, elf::SHT_SYMTAB)
            .map_err(|x| err(format!(".symtab: {x}")))?;
        let mut symbols = Vec::with_capacity(symtab.len());
        for (i, s) in symtab.symbols().iter().enumerate() {
            resched.tick()?;
            let name = s
                .name(e, symtab.strings())
                .map_err(|x| err(format!("symbol {i}: name: {x}")))
                .and_then(|n| spend(&mut names, n, || format!("symbol {i}")))
                .map(|n| String::from_utf8_lossy(n).into_owned())?;
            symbols.push(ElfSymbol {
                index: i as u32,
                name,
                shndx: s.st_shndx(e).0,
                value: s.st_value(e),
                size: s.st_size(e),
                info: s.st_info().0,
            });
        }
        let symtab_index = symtab.section().0 as u32;
        let strtab_index = symtab.string_section().0 as u32;
        let mut relas = Vec::with_capacity(sections.len());
        // Relocation sections that do not overlap hold at most one entry per 24 input bytes
        // in total. Headers may all point at one table, which would make the copies below a
        // quadratic multiple of the input: refuse more entries than the file can hold.
        let mut rela_entries_left = data.len() / std::mem::size_of::<elf::Rela64<LE>>();
        for (i, s) in sections.iter().enumerate() {
            resched.tick()?;
            let mut v = Vec::new();
            if let Some((rs, _link)) = s.rela(e, data).map_err(|x| {
                err(format!(
                    "section {i} ({}): relocations: {x}",
                    out_sections[i].name
                ))
            })? {
                rela_entries_left = rela_entries_left.checked_sub(rs.len()).ok_or_else(|| {
                    err(format!(
                        "section {i} ({}): relocation sections hold more entries in total than \
                         the {}-byte file has room for: their tables overlap",
                        out_sections[i].name,
                        data.len()
                    ))
                })?;
                v.reserve(rs.len());
                for (j, r) in rs.iter().enumerate() {
                    resched.tick()?;
                    let sym = r.r_sym(e, false);
                    if sym as usize >= symbols.len() {
                        return Err(err(format!(
                            "section {i} ({}): relocation {j} refers to symbol {sym}, but .symtab has {}",
                            out_sections[i].name,
                            symbols.len()
                        )));
                    }
                    v.push(ElfRela {
                        offset: r.r_offset(e),
                        sym,
                        r_type: r.r_type(e, false).0,
                        addend: r.r_addend(e),
                    });
                }
            }
            relas.push(v);
        }
        Ok(ElfObject {
            data,
            e_type: hdr.e_type(e).0,
            machine: hdr.e_machine(e).0,
            sections: out_sections,
            symbols,
            symtab_index,
            strtab_index,
            shstrtab_index: u32::from(hdr.e_shstrndx(e).0),
            relas,
        })
    }

    /// Frees the object's tables with reschedule points between the steps: a module with tens
    /// of thousands of symbols and relocations is thousands of heap blocks.
    pub fn drop_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        let ElfObject {
            sections,
            symbols,
            relas,
            ..
        } = self;
        free_with_points(symbols, resched)?;
        free_with_points(sections, resched)?;
        for r in relas {
            free_with_points(r, resched)?;
        }
        Ok(())
    }

    /// The file bytes of section `index` (empty for SHT_NOBITS or an invalid index).
    pub fn section_data(&self, index: u32) -> &'d [u8] {
        let Some(s) = self.sections.get(index as usize) else {
            return &[];
        };
        if s.sh_type == c::SHT_NOBITS {
            return &[];
        }
        let start = s.offset as usize;
        let end = start.saturating_add(s.size as usize);
        self.data.get(start..end).unwrap_or(&[])
    }

    /// The section named `name`.
    pub fn section_by_name(&self, name: &str) -> Option<&ElfSection> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// Reads `len` bytes at `offset` of section `index`; NOBITS sections read as zeros.
    pub fn read_bytes(&self, index: u32, offset: u64, len: usize) -> Option<Vec<u8>> {
        let s = self.sections.get(index as usize)?;
        let end = offset.checked_add(len as u64)?;
        if end > s.size {
            return None;
        }
        if s.sh_type == c::SHT_NOBITS {
            return Some(vec![0; len]);
        }
        self.section_data(index)
            .get(offset as usize..end as usize)
            .map(<[u8]>::to_vec)
    }

    /// Reads a NUL-terminated string at `offset` of section `index` (at most 4096 bytes).
    pub fn read_cstr(&self, index: u32, offset: u64) -> Option<String> {
        let d = self.section_data(index);
        let tail = d.get(offset as usize..)?;
        let n = tail.iter().take(4096).position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&tail[..n]).into_owned())
    }
}
