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
    /// The symbol versions `check_version()` reads, in file order: since 6.14 the extended
    /// `__version_ext_crcs`/`__version_ext_names` pair when present, else `__versions`; `None`
    /// when the module has neither (built without CONFIG_MODVERSIONS).
    pub versions: Option<Vec<SymbolVersion>>,
    /// True when the module has a `__versions` section: `same_magic()` then skips the
    /// release (it looks at this section only, even in 7.x).
    pub basic_versions: bool,
    /// True when a module signature is appended (`~Module signature appended~\n` at the end).
    pub signed: bool,
}

/// One entry of the module's symbol versions: the CRC the module expects for `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SymbolVersion {
    /// The imported symbol.
    pub name: String,
    /// The CRC (`struct modversion_info.crc`, an `unsigned long` holding a 32-bit value).
    pub crc: u64,
}

/// The marker the kernel looks for at the end of a signed module (module_signature.h).
pub const MODULE_SIG_STRING: &[u8] = b"~Module signature appended~\n";

/// `struct modversion_info` on 64-bit: an `unsigned long crc` and `char name[56]`.
const MODVERSION_INFO_SIZE: usize = 64;

/// The module's symbol versions (see [`LivepatchModule::versions`]).
fn parse_versions(
    elf: &ElfObject<'_>,
    resched: &mut Resched,
) -> Result<Option<Vec<SymbolVersion>>, Cancelled> {
    // check_version() (6.14+) uses the extended pair exclusively when the module has it.
    if let (Some(c), Some(n)) = (
        elf.section_by_name("__version_ext_crcs"),
        elf.section_by_name("__version_ext_names"),
    ) {
        let mut out = Vec::new();
        let crcs = elf.section_data(c.index).chunks_exact(4);
        let names = elf.section_data(n.index).split(|&b| b == 0);
        for (crc, name) in crcs.zip(names) {
            resched.tick()?;
            out.push(SymbolVersion {
                name: String::from_utf8_lossy(name).into_owned(),
                crc: u64::from(u32::from_le_bytes(crc.try_into().expect("4 bytes"))),
            });
        }
        return Ok(Some(out));
    }
    let mut found = false;
    let mut out = Vec::new();
    if let Some(s) = elf.section_by_name("__versions") {
        found = true;
        // check_version() walks sh_size / sizeof(struct modversion_info) entries.
        for e in elf.section_data(s.index).chunks_exact(MODVERSION_INFO_SIZE) {
            resched.tick()?;
            let crc = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
            let name = &e[8..];
            let n = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            out.push(SymbolVersion {
                name: String::from_utf8_lossy(&name[..n]).into_owned(),
                crc,
            });
        }
    }
    Ok(found.then_some(out))
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
        Self::parse_with(data, &StructLayouts::fallback(6, 1), &mut Resched::none())
    }

    /// Parses `data`, reading the patch tables with `layouts` (from the target's BTF), reaching
    /// reschedule points through `resched` (per section, symbol, relocation and patch table
    /// entry); a cancelled point is [`ParseError::Cancelled`].
    pub fn parse_with(
        data: &'d [u8],
        layouts: &StructLayouts,
        resched: &mut Resched,
    ) -> Result<Self, ParseError> {
        let elf = ElfObject::parse_with(data, resched)?;
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
            // A clock read at the phase's end: the next steps are not all counted items.
            resched.tick_step()?;
            patch
        };
        let versions = parse_versions(&elf, resched)?;
        resched.tick_step()?;
        let basic_versions = elf.section_by_name("__versions").is_some();
        let signed = elf.data.ends_with(MODULE_SIG_STRING);
        Ok(LivepatchModule {
            versions,
            basic_versions,
            signed,
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
            versions,
            ..
        } = self;
        if let Some(v) = versions {
            free_with_points(v, resched)?;
        }
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

    /// The module as a forced load presents it: `modprobe --force`, or `finit_module(2)` with
    /// MODULE_INIT_IGNORE_MODVERSIONS | MODULE_INIT_IGNORE_VERMAGIC. `load_module()` then
    /// pretends the module has no `__versions` (`info->index.vers = 0`) and no vermagic
    /// (`check_modinfo()`), so every check of either goes through `try_to_force_load()`:
    /// loaded and tainted with CONFIG_MODULE_FORCE_LOAD, refused without it (6.12
    /// kernel/module/main.c, version.c). The file itself is unchanged.
    pub fn force_loaded(&mut self) {
        self.versions = None;
        self.basic_versions = false;
        self.modinfo.retain(|(k, _)| k != "vermagic");
    }

    /// The value of modinfo `key`.
    pub fn modinfo(&self, key: &str) -> Option<&str> {
        self.modinfo
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The CRC the module expects for `name`, when it lists one. `check_version()` takes the
    /// first entry of that name.
    pub fn version_of(&self, name: &str) -> Option<u64> {
        self.versions
            .as_ref()?
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.crc)
    }

    /// True when nothing in the module is about livepatch: no `livepatch` modinfo tag, no klp
    /// relocation section or symbol, no `klp_patch` found, and no call of
    /// `klp_enable_patch()`. The kernel loads such a module as an ordinary one.
    pub fn is_ordinary_module(&self) -> bool {
        !self.is_marked_livepatch()
            && self.klp_sections.is_empty()
            && self.klp_symbols.is_empty()
            && self.patch.is_err()
            && !self
                .elf
                .symbols
                .iter()
                .any(|s| s.is_undefined() && s.name == "klp_enable_patch")
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
