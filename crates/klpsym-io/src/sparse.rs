//! Reading a stripped vmlinux without its code: only the bytes its tables can be in.
//!
//! A stripped vmlinux (no `.symtab`) is decoded from its kallsyms tables, its banner, its
//! build-id note and its export tables, all of them data: `scripts/kallsyms` emits its tables
//! into `.rodata`, the banner and vermagic are `.rodata` strings, the exports live in
//! `__ksymtab*`/`__kcrctab*` and the build-id in `.notes`. None of it is in an executable
//! section. So such a file is read as a buffer of its full size in which only the ELF headers
//! and the allocated, non-executable sections with file contents are filled; the rest (code,
//! the sections the kernel never loads, padding) stays zero and is never read from disk.
//! On the Debian 6.1 vmlinux that is 22 MB of 66 MB. Everything that decodes the buffer sees
//! the same offsets as in the file, and nothing it looks for can come from code: a table
//! found in the full file is found in the sparse one at the same place.
//!
//! Used only where no content hash of the whole file is needed (`--no-cache`); the cache
//! proves an entry by hashing the file as it is on disk.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use klpsym_core::resched::Resched;
use object::read::elf::{FileHeader, SectionHeader};
use object::{elf, FileKind};

use crate::error::LoadError;

/// Bytes copied between two reschedule points (four pages, as `read_bounded` does).
const STEP: usize = 16 << 10;

/// The data of `path` with only what a stripped vmlinux's decoding reads filled in, or `None`
/// when the file is not an ELF executable without a symbol table (read it whole then).
pub(crate) fn read_stripped_vmlinux(
    path: &Path,
    limit: u64,
    resched: &mut Resched,
) -> Result<Option<Vec<u8>>, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io_err)?;
    let meta = f.metadata().map_err(io_err)?;
    let size = meta.len();
    if !meta.is_file() || size == 0 || size > limit {
        return Ok(None);
    }
    let mut head = Vec::with_capacity(64);
    (&mut f).take(64).read_to_end(&mut head).map_err(io_err)?;
    let head = &head[..];
    if !head.starts_with(b"\x7fELF") || crate::detect(head) != crate::Detected::ElfExecutable {
        return Ok(None);
    }
    let Ok(len) = usize::try_from(size) else {
        return Ok(None);
    };
    // Zeroed memory that is never touched costs nothing: untouched pages read as the shared
    // zero page.
    // No huge pages: the sections are read into it in steps, and a huge page's first touch
    // zeroes 2 MiB in one kernel entry (over the reschedule bound).
    let mut buf = vec![0u8; len];
    let mut file = Filler {
        f: &mut f,
        buf: &mut buf,
        resched,
    };
    file.fill(0, head.len() as u64).map_err(io_err)?;
    let plan = match FileKind::parse(&file.buf[..]) {
        Ok(FileKind::Elf64) => plan::<elf::FileHeader64<object::Endianness>>(&mut file),
        Ok(FileKind::Elf32) => plan::<elf::FileHeader32<object::Endianness>>(&mut file),
        _ => return Ok(None),
    }
    .map_err(io_err)?;
    if !plan {
        return Ok(None);
    }
    Ok(Some(buf))
}

/// Reads the headers of an ELF executable into `file.buf`, then, when it has no symbol table,
/// every allocated non-executable section with contents. `Ok(false)`: read it whole instead
/// (a symbol table, or headers that do not parse; the full decoder then reports what is wrong).
fn plan<H: FileHeader<Endian = object::Endianness>>(
    file: &mut Filler<'_>,
) -> std::io::Result<bool> {
    let head = file.buf[..file.buf.len().min(64)].to_vec();
    let Ok(header) = H::parse(&head[..]) else {
        return Ok(false);
    };
    let Ok(endian) = header.endian() else {
        return Ok(false);
    };
    let ph = header.e_phoff(endian).into();
    let ph_len = u64::from(header.e_phnum(endian)) * u64::from(header.e_phentsize(endian));
    file.fill(ph, ph_len)?;
    let sh = header.e_shoff(endian).into();
    let sh_len = u64::from(header.e_shnum(endian)) * u64::from(header.e_shentsize(endian));
    // More than 65,535 sections keep their count in section 0; no vmlinux has that many.
    if sh == 0 || header.e_shnum(endian) == 0 {
        return Ok(false);
    }
    file.fill(sh, sh_len)?;
    let Ok(sections) = header.section_headers(endian, &file.buf[..]) else {
        return Ok(false);
    };
    let mut ranges = Vec::new();
    for s in sections {
        let kind = s.sh_type(endian);
        if kind == elf::SHT_SYMTAB {
            return Ok(false);
        }
        let flags = s.sh_flags(endian).0;
        let alloc = flags & elf::SHF_ALLOC.0 != 0;
        let code = flags & elf::SHF_EXECINSTR.0 != 0;
        let names = kind == elf::SHT_STRTAB;
        if (alloc && !code && kind != elf::SHT_NOBITS) || names {
            let off: u64 = s.sh_offset(endian).into();
            ranges.push(off..off.saturating_add(s.sh_size(endian).into()));
        }
    }
    // Sections may overlap (or claim the whole file): each byte is read once.
    for r in klpsym_core::merge_spans(ranges) {
        file.fill(r.start, r.end - r.start)?;
    }
    Ok(true)
}

/// Copies file ranges into the same offsets of a buffer of the file's size.
struct Filler<'a> {
    f: &'a mut File,
    buf: &'a mut Vec<u8>,
    resched: &'a mut Resched,
}

impl Filler<'_> {
    /// Fills `[off, off + len)`, clipped to the file; a reschedule point every [`STEP`].
    fn fill(&mut self, off: u64, len: u64) -> std::io::Result<()> {
        let n = self.buf.len() as u64;
        let start = off.min(n) as usize;
        let end = off.saturating_add(len).min(n) as usize;
        self.f.seek(SeekFrom::Start(start as u64))?;
        let mut at = start;
        while at < end {
            let to = (at + STEP).min(end);
            self.f.read_exact(&mut self.buf[at..to]).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    std::io::Error::new(
                        e.kind(),
                        format!("file shrank while read (bytes {at}..{to})"),
                    )
                } else {
                    e
                }
            })?;
            at = to;
            self.resched
                .tick_step()
                .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};

    /// A little-endian ELF64 with code and read-only data, made an executable (e_type 2),
    /// and with its symbol table's type changed to PROGBITS when `strip` (object::write
    /// always writes one). The file ranges of the code and the data sections.
    fn elf(strip: bool) -> (Vec<u8>, std::ops::Range<usize>, std::ops::Range<usize>) {
        let mut o = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = o.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
        o.append_section_data(text, &[0xcc; 3000], 16);
        let ro = o.add_section(Vec::new(), b".rodata".to_vec(), SectionKind::ReadOnlyData);
        o.append_section_data(ro, b"0\x001\x00Linux version 6.1.0 (x)\0", 8);
        let mut bytes = o.write().unwrap();
        bytes[16] = 2;
        let file = object::read::elf::ElfFile64::<Endianness>::parse(&bytes[..]).unwrap();
        let range = |name: &str| {
            use object::{Object as _, ObjectSection as _};
            let (off, len) = file.section_by_name(name).unwrap().file_range().unwrap();
            off as usize..(off + len) as usize
        };
        let (t, r) = (range(".text"), range(".rodata"));
        let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
        let shnum = u16::from_le_bytes(bytes[0x3c..0x3e].try_into().unwrap()) as usize;
        drop(file);
        if strip {
            for i in 0..shnum {
                let at = shoff + 64 * i + 4;
                if bytes[at..at + 4] == 2u32.to_le_bytes() {
                    bytes[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
                }
            }
        }
        (bytes, t, r)
    }

    fn read(bytes: &[u8]) -> Option<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vmlinux");
        std::fs::write(&p, bytes).unwrap();
        read_stripped_vmlinux(&p, 1 << 30, &mut Resched::none()).unwrap()
    }

    #[test]
    fn a_stripped_executable_is_read_without_its_code() {
        let (bytes, text, rodata) = elf(true);
        let got = read(&bytes).expect("a stripped ELF executable is read sparsely");
        assert_eq!(got.len(), bytes.len());
        assert_eq!(got[rodata.clone()], bytes[rodata]);
        assert_eq!(got[..64], bytes[..64]);
        assert!(bytes[text.clone()].iter().all(|&b| b == 0xcc));
        assert!(got[text].iter().all(|&b| b == 0), "code is never read");
        // What the decoder then parses: the same sections, found from the same headers.
        use object::{Object as _, ObjectSection as _};
        let full = object::File::parse(&bytes[..]).unwrap();
        let sparse = object::File::parse(&got[..]).unwrap();
        let names = |f: &object::File<'_>| {
            f.sections()
                .map(|s| (s.name().unwrap_or("").to_owned(), s.file_range()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&full), names(&sparse));
    }

    #[test]
    fn other_files_are_read_whole() {
        // A symbol table: the vmlinux ELF decoder reads it, and DWARF, so all of it.
        assert!(read(&elf(false).0).is_none());
        // A relocatable object (a module) and things that are not ELF.
        let (mut rel, _, _) = elf(true);
        rel[16] = 1;
        assert!(read(&rel).is_none());
        assert!(read(b"ffffffff81000000 T _text\n").is_none());
        assert!(read(b"").is_none());
        assert!(read(b"\x7fELF").is_none());
    }
}
