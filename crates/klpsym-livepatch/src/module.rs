//! A livepatch module as the kernel sees it: klp relocation sections, klp symbols, modinfo
//! and the patch description.

use crate::consts as elf;
use serde::Serialize;

use crate::elf::{Arch, ElfObject, ElfRela, SHF_RELA_LIVEPATCH, SHN_LIVEPATCH};
use crate::error::ParseError;
use crate::layouts::StructLayouts;
use crate::patch::{read_patch, PatchDesc, RelocMap};

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
fn parse_modinfo(data: &[u8]) -> Vec<(String, String)> {
    data.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .filter_map(|e| {
            let s = String::from_utf8_lossy(e);
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
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
        let elf = ElfObject::parse(data)?;
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
        let modinfo = elf
            .section_by_name(".modinfo")
            .map(|s| parse_modinfo(elf.section_data(s.index)))
            .unwrap_or_default();
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
        let klp_sections: Vec<KlpRelaSection> = elf
            .sections
            .iter()
            .filter(|s| s.flags & SHF_RELA_LIVEPATCH != 0)
            .map(|s| KlpRelaSection {
                index: s.index,
                name: s.name.clone(),
                target: s.info,
                relocs: elf.relas[s.index as usize].clone(),
            })
            .collect();
        let klp_symbols = elf
            .symbols
            .iter()
            .filter(|s| s.shndx == SHN_LIVEPATCH)
            .map(|s| s.index)
            .collect();
        let patch = {
            let relocs = RelocMap::new(&elf, |i| {
                elf.sections[i as usize].flags & SHF_RELA_LIVEPATCH != 0
            });
            if layouts.is_consistent() {
                read_patch(&elf, &relocs, layouts)
            } else {
                Err(format!("inconsistent struct layouts: {layouts:?}"))
            }
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
        let m = parse_modinfo(b"livepatch=Y\0name=lp\0\0vermagic=6.1.0 SMP\0junk\0");
        assert_eq!(m.len(), 3);
        assert_eq!(m[2], ("vermagic".to_string(), "6.1.0 SMP".to_string()));
    }
}
