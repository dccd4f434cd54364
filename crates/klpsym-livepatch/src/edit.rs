//! Rewriting a relocatable ELF64 LE object while keeping every section and symbol index.
//!
//! The kernel requires a livepatch module's symbol table intact (klp relocations refer to
//! symbols by index), so nothing is renumbered. The strategy is append-only:
//! - symbols are patched in place in `.symtab` (name offset, `st_shndx`, `st_value`);
//! - new names are appended to copies of `.strtab` / `.shstrtab`, and sections whose contents
//!   change (shrunk `.rela*` sections) get new contents; all of these are written after the
//!   original bytes and their headers re-pointed;
//! - new sections get new headers at the end of a new section-header table, also appended;
//!   `e_shoff`/`e_shnum` are updated. The old table and old contents stay as unreferenced
//!   bytes, which ELF allows and readelf does not warn about.

use std::collections::BTreeMap;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};

use crate::elf::ElfObject;
use crate::error::ConvertError;

/// A section to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSection {
    /// Its name (appended to `.shstrtab`).
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_addralign`.
    pub addralign: u64,
    /// `sh_entsize`.
    pub entsize: u64,
    /// Its contents.
    pub data: Vec<u8>,
}

/// Accumulates edits, then writes the new file.
#[derive(Debug)]
pub struct ElfEditor<'o, 'd> {
    obj: &'o ElfObject<'d>,
    strtab: Vec<u8>,
    shstrtab: Vec<u8>,
    symbols: BTreeMap<u32, (u32, u16, u64)>,
    renamed: BTreeMap<u32, u32>,
    contents: BTreeMap<u32, Vec<u8>>,
    added: Vec<NewSection>,
}

const EHDR_SHOFF: usize = 0x28;
const EHDR_SHNUM: usize = 0x3c;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: u64 = 24;

fn align_up(v: usize, a: u64) -> usize {
    let a = a.clamp(1, 4096) as usize;
    v.div_ceil(a) * a
}

/// A copy of `src` with room for `extra` more bytes, made in steps.
fn copy_with_room(src: &[u8], extra: usize, resched: &mut Resched) -> Result<Vec<u8>, Cancelled> {
    let mut v = Vec::with_capacity(src.len().saturating_add(extra));
    bulk::extend_from_slice(&mut v, src, resched)?;
    Ok(v)
}

/// Appends `data` at the next multiple of `align`; returns where it starts.
fn place(
    out: &mut Vec<u8>,
    data: &[u8],
    align: u64,
    resched: &mut Resched,
) -> Result<usize, Cancelled> {
    let at = align_up(out.len(), align);
    out.resize(at, 0);
    bulk::extend_from_slice(out, data, resched)?;
    Ok(at)
}

impl<'o, 'd> ElfEditor<'o, 'd> {
    /// An editor over `obj` (see [`ElfEditor::new_with`]), with no reschedule points.
    pub fn new(obj: &'o ElfObject<'d>) -> Self {
        Self::new_with(obj, 0, &mut Resched::none()).expect("no cancel without a flag")
    }

    /// An editor over `obj`; its string tables are copied in steps, `.strtab` with room for
    /// `extra_names` more bytes (so renaming symbols does not regrow a big table).
    pub fn new_with(
        obj: &'o ElfObject<'d>,
        extra_names: usize,
        resched: &mut Resched,
    ) -> Result<Self, Cancelled> {
        Ok(ElfEditor {
            obj,
            strtab: copy_with_room(obj.section_data(obj.strtab_index), extra_names, resched)?,
            shstrtab: copy_with_room(obj.section_data(obj.shstrtab_index), 4096, resched)?,
            symbols: BTreeMap::new(),
            renamed: BTreeMap::new(),
            contents: BTreeMap::new(),
            added: Vec::new(),
        })
    }

    /// Appends `name` to `.strtab` and returns its offset.
    fn add_string(&mut self, name: &str) -> u32 {
        let off = self.strtab.len() as u32;
        self.strtab.extend_from_slice(name.as_bytes());
        self.strtab.push(0);
        off
    }

    /// Renames symbol `index` and sets its section index and value.
    pub fn set_symbol(&mut self, index: u32, name: &str, shndx: u16, value: u64) {
        let off = self.add_string(name);
        self.symbols.insert(index, (off, shndx, value));
    }

    /// Renames section `index`.
    pub fn rename_section(&mut self, index: u32, name: &str) {
        let off = self.shstrtab.len() as u32;
        self.shstrtab.extend_from_slice(name.as_bytes());
        self.shstrtab.push(0);
        self.renamed.insert(index, off);
    }

    /// Replaces the contents of section `index`.
    pub fn set_contents(&mut self, index: u32, data: Vec<u8>) {
        self.contents.insert(index, data);
    }

    /// Adds a section; returns its future index.
    pub fn add_section(&mut self, s: NewSection) -> u32 {
        self.added.push(s);
        (self.obj.sections.len() + self.added.len() - 1) as u32
    }

    /// Writes the new file (see [`ElfEditor::write_with`]), with no reschedule points. Fails
    /// only on limits (more than 0xff00 sections).
    pub fn write(self) -> Result<Vec<u8>, ConvertError> {
        self.write_with(&mut Resched::none())
    }

    /// Writes the new file, copying in steps and ticking per symbol and section header. Fails
    /// on limits (more than 0xff00 sections: [`ConvertError::Refused`]) and on a cancelled
    /// point ([`ConvertError::Cancelled`]). The editor's buffers are freed with points.
    pub fn write_with(mut self, resched: &mut Resched) -> Result<Vec<u8>, ConvertError> {
        let obj = self.obj;
        let nsec = obj.sections.len() + self.added.len();
        if nsec >= usize::from(crate::consts::SHN_LORESERVE) {
            return Err(ConvertError::Refused(vec![format!(
                "{nsec} sections would need extended section numbering"
            )]));
        }
        // Every byte the output can need, so it is never regrown (a regrowth copies it all at
        // once): the input, then each appended table after at most 4 KiB of alignment.
        let names_len: usize = self.added.iter().map(|s| s.name.len() + 1).sum();
        let appended = self.strtab.len()
            + self.shstrtab.len()
            + names_len
            + self.contents.values().map(Vec::len).sum::<usize>()
            + self.added.iter().map(|s| s.data.len()).sum::<usize>();
        let pieces = 3 + self.contents.len() + self.added.len();
        let bound = obj.data.len() + appended + pieces * 4096 + nsec * SHDR_SIZE;
        let mut out = Vec::with_capacity(bound);
        bulk::extend_from_slice(&mut out, obj.data, resched)?;
        // Symbols in place.
        let symtab = &obj.sections[obj.symtab_index as usize];
        for (&i, &(name, shndx, value)) in &self.symbols {
            resched.tick()?;
            let at = (symtab.offset + u64::from(i) * SYM_SIZE) as usize;
            let Some(sym) = out.get_mut(at..at + SYM_SIZE as usize) else {
                return Err(ConvertError::Refused(vec![format!(
                    "symbol {i} lies outside the file"
                )]));
            };
            sym[0..4].copy_from_slice(&name.to_le_bytes());
            sym[6..8].copy_from_slice(&shndx.to_le_bytes());
            sym[8..16].copy_from_slice(&value.to_le_bytes());
        }
        // New section names.
        let mut new_names = Vec::new();
        for s in &self.added {
            resched.tick()?;
            new_names.push(self.shstrtab.len() as u32);
            self.shstrtab.extend_from_slice(s.name.as_bytes());
            self.shstrtab.push(0);
        }
        let mut headers: Vec<[u8; SHDR_SIZE]> = Vec::with_capacity(nsec);
        let shoff_old = u64::from_le_bytes(
            obj.data[EHDR_SHOFF..EHDR_SHOFF + 8]
                .try_into()
                .expect("8 bytes"),
        ) as usize;
        for i in 0..obj.sections.len() {
            resched.tick()?;
            let at = shoff_old + i * SHDR_SIZE;
            let mut h = [0u8; SHDR_SIZE];
            h.copy_from_slice(&obj.data[at..at + SHDR_SIZE]);
            headers.push(h);
        }
        let relocate = |h: &mut [u8; SHDR_SIZE], at: usize, size: usize| {
            h[24..32].copy_from_slice(&(at as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
        };
        if self.strtab.len() != obj.section_data(obj.strtab_index).len() {
            let at = place(&mut out, &self.strtab, 1, resched)?;
            relocate(
                &mut headers[obj.strtab_index as usize],
                at,
                self.strtab.len(),
            );
        }
        for (&i, &off) in &self.renamed {
            headers[i as usize][0..4].copy_from_slice(&off.to_le_bytes());
        }
        if !self.added.is_empty() || !self.renamed.is_empty() {
            let at = place(&mut out, &self.shstrtab, 1, resched)?;
            relocate(
                &mut headers[obj.shstrtab_index as usize],
                at,
                self.shstrtab.len(),
            );
        }
        for (&i, data) in &self.contents {
            let align = obj.sections[i as usize].addralign;
            let at = place(&mut out, data, align, resched)?;
            relocate(&mut headers[i as usize], at, data.len());
        }
        for (s, &name) in self.added.iter().zip(&new_names) {
            let at = place(&mut out, &s.data, s.addralign, resched)?;
            let mut h = [0u8; SHDR_SIZE];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&s.sh_type.to_le_bytes());
            h[8..16].copy_from_slice(&s.flags.to_le_bytes());
            h[24..32].copy_from_slice(&(at as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(s.data.len() as u64).to_le_bytes());
            h[40..44].copy_from_slice(&s.link.to_le_bytes());
            h[44..48].copy_from_slice(&s.info.to_le_bytes());
            h[48..56].copy_from_slice(&s.addralign.to_le_bytes());
            h[56..64].copy_from_slice(&s.entsize.to_le_bytes());
            headers.push(h);
        }
        let shoff = align_up(out.len(), 8);
        out.resize(shoff, 0);
        for h in &headers {
            resched.tick()?;
            out.extend_from_slice(h);
        }
        out[EHDR_SHOFF..EHDR_SHOFF + 8].copy_from_slice(&(shoff as u64).to_le_bytes());
        out[EHDR_SHNUM..EHDR_SHNUM + 2].copy_from_slice(&(nsec as u16).to_le_bytes());
        // The editor's copies: string tables and section contents can be megabytes.
        bulk::free_with_points(headers, resched)?;
        bulk::free_with_points(std::mem::take(&mut self.strtab), resched)?;
        bulk::free_with_points(std::mem::take(&mut self.shstrtab), resched)?;
        for (_, c) in std::mem::take(&mut self.contents) {
            bulk::free_with_points(c, resched)?;
        }
        for s in std::mem::take(&mut self.added) {
            bulk::free_with_points(s.data, resched)?;
        }
        Ok(out)
    }
}

/// Encodes RELA entries, a tick per entry.
pub fn encode_relas(
    relas: &[crate::elf::ElfRela],
    resched: &mut Resched,
) -> Result<Vec<u8>, Cancelled> {
    let mut v = Vec::with_capacity(relas.len() * 24);
    for r in relas {
        v.extend_from_slice(&r.offset.to_le_bytes());
        v.extend_from_slice(&((u64::from(r.sym) << 32) | u64::from(r.r_type)).to_le_bytes());
        v.extend_from_slice(&r.addend.to_le_bytes());
        resched.tick()?;
    }
    Ok(v)
}

/// Strips an appended module signature (`~Module signature appended~\n` and the
/// `struct module_signature` before it); returns the unsigned bytes, or `None` when there is
/// no (well-formed) signature.
pub fn strip_module_signature(data: &[u8]) -> Option<&[u8]> {
    const MARKER: &[u8] = b"~Module signature appended~\n";
    let body = data.strip_suffix(MARKER)?;
    if body.len() < 12 {
        return None;
    }
    let ms = &body[body.len() - 12..];
    let signer_len = usize::from(ms[3]);
    let key_id_len = usize::from(ms[4]);
    let sig_len = u32::from_be_bytes([ms[8], ms[9], ms[10], ms[11]]) as usize;
    let total = 12usize
        .checked_add(sig_len)?
        .checked_add(signer_len)?
        .checked_add(key_id_len)?;
    body.len().checked_sub(total).map(|n| &body[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_stripped() {
        let mut f = b"ELFDATA".to_vec();
        f.extend_from_slice(&[0xAA; 5]); // signature bytes
        f.extend_from_slice(&[0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
        f.extend_from_slice(b"~Module signature appended~\n");
        assert_eq!(strip_module_signature(&f), Some(&b"ELFDATA"[..]));
        assert_eq!(strip_module_signature(b"ELFDATA"), None);
        // a length larger than the file is not a signature
        let mut bad = vec![0u8; 12];
        bad[11] = 200;
        bad.extend_from_slice(b"~Module signature appended~\n");
        assert_eq!(strip_module_signature(&bad), None);
    }
}
