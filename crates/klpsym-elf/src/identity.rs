//! What a vmlinux says about its build besides its symbols: the CRCs of its exports (what the
//! module loader checks a module's symbol versions against) and its GNU build id (what proves
//! two files one build).

use klpsym_resched::resched::{Cancelled, Resched};

/// The CRCs of a vmlinux ELF's exports: its `__crc_<name>` symbols, as (name, CRC) in symbol
/// table order. Before 5.19 they are absolute symbols whose value is the CRC; since, they sit
/// in `__kcrctab`/`__kcrctab_gpl` and the CRC is the `u32` they point at. `None` when `bytes`
/// are not an ELF file `object` reads. A tick per symbol.
pub fn vmlinux_crcs(
    bytes: &[u8],
    resched: &mut Resched,
) -> Result<Option<Vec<(String, u32)>>, Cancelled> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolSection};
    let Ok(file) = object::File::parse(bytes) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for sym in file.symbols() {
        resched.tick()?;
        let Ok(name) = sym.name() else { continue };
        let Some(export) = name.strip_prefix("__crc_") else {
            continue;
        };
        let crc = match sym.section() {
            SymbolSection::Absolute => u32::try_from(sym.address()).ok(),
            SymbolSection::Section(i) => file.section_by_index(i).ok().and_then(|s| {
                let off = sym.address().checked_sub(s.address())?;
                let data = s.data().ok()?;
                let off = usize::try_from(off).ok()?;
                let b = data.get(off..off.checked_add(4)?)?;
                Some(u32::from_le_bytes(b.try_into().ok()?))
            }),
            _ => None,
        };
        if let Some(crc) = crc {
            out.push((export.to_string(), crc));
        }
    }
    Ok(Some(out))
}

/// The GNU build id of a 64-bit ELF file, from its PT_NOTE segments, read through
/// `read(offset, length)` (a few small reads of a file, or slices of bytes in memory, whose
/// code may be left unread); `None` for anything else (not ELF, 32-bit, no such note,
/// implausible headers).
pub fn build_id_from_notes(read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    use object::elf::{FileHeader64, ProgramHeader64, NT_GNU_BUILD_ID, PT_NOTE};
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::Endianness;
    let head = read(0, std::mem::size_of::<FileHeader64<Endianness>>())?;
    let header = FileHeader64::<Endianness>::parse(&head[..]).ok()?;
    let endian = header.endian().ok()?;
    let count = usize::from(header.e_phnum(endian));
    let size = std::mem::size_of::<ProgramHeader64<Endianness>>();
    if usize::from(header.e_phentsize(endian)) != size || count == 0 || count > 1024 {
        return None;
    }
    let table = read(header.e_phoff(endian), count * size)?;
    let (headers, _) =
        object::pod::slice_from_bytes::<ProgramHeader64<Endianness>>(&table, count).ok()?;
    for ph in headers.iter().filter(|ph| ph.p_type(endian) == PT_NOTE) {
        let n = usize::try_from(ph.p_filesz(endian)).ok()?;
        if n > 1 << 20 {
            continue;
        }
        let data = read(ph.p_offset(endian), n)?;
        let Ok(mut notes) = object::read::elf::NoteIterator::<FileHeader64<Endianness>>::new(
            endian,
            ph.p_align(endian),
            &data,
        ) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == b"GNU" && note.n_type(endian) == NT_GNU_BUILD_ID {
                return Some(note.desc().to_vec());
            }
        }
    }
    None
}
