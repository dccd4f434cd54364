//! A livepatch module as the kernel sees it: klp relocation sections, klp symbols, modinfo
//! and the patch description.

use crate::consts as elf;
use serde::Serialize;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};

use crate::elf::{Arch, ElfObject, ElfRela, SHF_RELA_LIVEPATCH, SHN_LIVEPATCH};
use crate::error::ParseError;
use crate::layouts::StructLayouts;
use crate::patch::{read_patch, PatchDesc, RelocMap};
use klpsym_core::bulk::free_with_points;

/// A section flagged SHF_RELA_LIVEPATCH (whatever its name: the kernel selects these
/// sections by the flag, then parses the name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KlpRelaSection {
    /// Section index.
    pub index: u32,
    /// Section name.
    pub name: String,
    /// `sh_info`: the section the relocations patch.
    pub target: u32,
    /// The relocations, in file order.
    pub relocs: Vec<ElfRela>,
}

/// The parsed module.
#[derive(Debug, Clone)]
pub struct LivepatchModule<'d> {
    /// The ELF view.
    pub elf: ElfObject<'d>,
    /// The architecture.
    pub arch: Arch,
    /// `.modinfo` entries (`key=value`), in order.
    pub modinfo: Vec<(String, String)>,
    /// The module name (`name=` of modinfo, else the name in `.gnu.linkonce.this_module`).
    pub name: String,
    /// Sections with SHF_RELA_LIVEPATCH, in section order.
    pub klp_sections: Vec<KlpRelaSection>,
    /// Symbol indices of SHN_LIVEPATCH symbols.
    pub klp_symbols: Vec<u32>,
    /// The patch description, or why it could not be read.
    pub patch: Result<PatchDesc, String>,
}

/// `vermagic=`, `livepatch=` and friends.
fn parse_modinfo(data: &[u8], resched: &mut Resched) -> Result<Vec<(String, String)>, Cancelled> {
    let mut out = Vec::new();
    for e in data.split(|&b| b == 0) {
        resched.tick()?;
        if e.is_empty() {
            continue;
        }
        let s = String::from_utf8_lossy(e);
        if let Some((k, v)) = s.split_once('=') {
            out.push((k.to_string(), v.to_string()));
        }
    }
    Ok(out)
}

/// `struct module.name` sits after `enum module_state state` (4 bytes, padded) and
/// `struct list_head list` (16 bytes) on 64-bit kernels.
const THIS_MODULE_NAME_OFFSET: usize = 24;

impl<'d> LivepatchModule<'d> {
    /// Parses `data` with the fallback struct layouts of Linux 5.1–6.18.
    pub fn parse(data: &'d [u8]) -> Result<Self, ParseError> {
        Self::parse_with(data, &StructLayouts::fallback(6, 1))
    }

    /// Parses `data`, reading the patch tables with `layouts` (from the target's BTF).
    pub fn parse_with(data: &'d [u8], layouts: &StructLayouts) -> Result<Self, ParseError> {
        Self::parse_with_resched(data, layouts, &mut Resched::none())
    }

    /// [`parse_with`](LivepatchModule::parse_with), reaching reschedule points through
    /// `resched` (per section, symbol, relocation and patch table entry); a cancelled point is
    /// [`ParseError::Cancelled`].
    pub fn parse_with_resched(
        data: &'d [u8],
        layouts: &StructLayouts,
        resched: &mut Resched,
    ) -> Result<Self, ParseError> {
        let elf = ElfObject::parse_with_resched(data, resched)?;
        Self::from_elf(elf, layouts, resched)
    }

    /// The module view of an already parsed object.
    pub(crate) fn from_elf(
        elf: ElfObject<'d>,
        layouts: &StructLayouts,
        resched: &mut Resched,
    ) -> Result<Self, ParseError> {
        if elf.e_type != elf::ET_REL {
            return Err(ParseError::Unsupported(format!(
                "e_type {} is not ET_REL: a kernel module is a relocatable object",
                elf.e_type
            )));
        }
        let arch = Arch::from_machine(elf.machine).ok_or_else(|| {
            ParseError::Unsupported(format!(
                "e_machine {} (only x86_64 and aarch64 are modelled)",
                elf.machine
            ))
        })?;
        if elf.symtab_index == 0 {
            return Err(ParseError::Malformed(
                "no .symtab: a module needs one".into(),
            ));
        }
        let modinfo = match elf.section_by_name(".modinfo") {
            Some(s) => parse_modinfo(elf.section_data(s.index), resched)?,
            None => Vec::new(),
        };
        let name = modinfo
            .iter()
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.clone())
            .or_else(|| {
                let s = elf.section_by_name(".gnu.linkonce.this_module")?;
                let d = elf.section_data(s.index).get(THIS_MODULE_NAME_OFFSET..)?;
                let n = d.iter().take(56).position(|&b| b == 0)?;
                (n > 0).then(|| String::from_utf8_lossy(&d[..n]).into_owned())
            })
            .unwrap_or_else(|| "<unnamed>".to_string());
        let mut klp_sections = Vec::new();
        for s in &elf.sections {
            resched.tick()?;
            if s.flags & SHF_RELA_LIVEPATCH == 0 {
                continue;
            }
            let mut relocs = Vec::new();
            bulk::extend_from_slice(&mut relocs, &elf.relas[s.index as usize], resched)?;
            klp_sections.push(KlpRelaSection {
                index: s.index,
                name: s.name.clone(),
                target: s.info,
                relocs,
            });
        }
        let mut klp_symbols = Vec::new();
        for s in &elf.symbols {
            resched.tick()?;
            if s.shndx == SHN_LIVEPATCH {
                klp_symbols.push(s.index);
            }
        }
        let patch = {
            let relocs = RelocMap::new(
                &elf,
                |i| elf.sections[i as usize].flags & SHF_RELA_LIVEPATCH != 0,
                resched,
            )?;
            let patch = if layouts.is_consistent() {
                read_patch(&elf, &relocs, layouts, resched)?
            } else {
                Err(format!("inconsistent struct layouts: {layouts:?}"))
            };
            relocs.drop_with_points(resched)?;
            patch
        };
        Ok(LivepatchModule {
            elf,
            arch,
            modinfo,
            name,
            klp_sections,
            klp_symbols,
            patch,
        })
    }

    /// Frees the module's tables with reschedule points between the steps (a big patch is tens
    /// of thousands of heap blocks: symbol names, relocation lists, patch entries).
    pub fn drop_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        let LivepatchModule {
            elf,
            modinfo,
            klp_sections,
            klp_symbols,
            patch,
            ..
        } = self;
        for s in klp_sections {
            free_with_points(s.relocs, resched)?;
        }
        free_with_points(klp_symbols, resched)?;
        free_with_points(modinfo, resched)?;
        if let Ok(p) = patch {
            for o in p.objects {
                free_with_points(o.funcs, resched)?;
            }
        }
        elf.drop_with_points(resched)
    }

    /// The value of modinfo `key`.
    pub fn modinfo(&self, key: &str) -> Option<&str> {
        self.modinfo
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True when modinfo has `livepatch=` (the kernel checks only its presence:
    /// `get_modinfo(info, "livepatch")`).
    pub fn is_marked_livepatch(&self) -> bool {
        self.modinfo("livepatch").is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modinfo_entries() {
        let m = parse_modinfo(
            b"livepatch=Y\0name=lp\0\0vermagic=6.1.0 SMP\0junk\0",
            &mut Resched::none(),
        )
        .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2], ("vermagic".to_string(), "6.1.0 SMP".to_string()));
    }
}
