//! `elf_validity_check()` (`elf_validity_cache_copy()` since 6.4): what the module loader
//! checks of the ELF file itself, after the signature and before anything of the module is
//! used — its header's type and machine, and since 6.4 its `.gnu.linkonce.this_module` (one
//! section, with contents, SHF_ALLOC, of `sizeof(struct module)` bytes; the size check came
//! with "module: add sanity check for ELF module section" and is in 6.6.y; the lab's 6.1
//! vmlinux holds none of its lines, 6.12 and 7.2 all). Each refusal is -ENOEXEC.

use super::{Ctx, ENOEXEC};
use crate::consts as elf;
use crate::report::*;

impl Ctx<'_, '_, '_, '_> {
    /// `elf_validity_check()`'s header checks: `e_type != ET_REL` (`Invalid ELF header type:
    /// %u != %u`) then `!elf_check_arch()` (`Invalid architecture in ELF header: %u`), each
    /// -ENOEXEC, after `module_sig_check()` (an unenforced signature passes silently; an
    /// enforced one refuses first, which `module_load()` reports). Debian's 5.10 prints one
    /// line for any of them (`Module has invalid ELF structures`, kernel/module.c); 6.1 prints
    /// each check's own (the lab's 5.10 and 6.1 show both; the release between them that
    /// changed it is not one the lab boots). True when the module loader stops here.
    pub(super) fn elf_header_refused(&mut self) -> bool {
        let (etype, machine) = (self.m.elf.e_type, self.m.elf.machine);
        let refusal = if etype != elf::ET_REL {
            Some(format!(
                "Invalid ELF header type: {etype} != {}",
                elf::ET_REL
            ))
        } else {
            match &self.t.loader.machine {
                Some(f) if f.value != machine => {
                    Some(format!("Invalid architecture in ELF header: {machine}"))
                }
                _ => None,
            }
        };
        let Some(line) = refusal else {
            if let Some(f) = self.t.loader.machine.clone() {
                self.header_check = Some(LoaderCheck {
                    check: LoaderCheckKind::ElfHeader,
                    status: CheckStatus::Passed,
                    detail: format!(
                        "a relocatable object for e_machine {machine} ({}), the target's ({})",
                        klpsym_elf::machine_name(machine),
                        f.source
                    ),
                });
            }
            return false;
        };
        // The kernel gets here only with a module loader and past the signature check: a
        // refusal of those comes first (module_load() reports it).
        let no_modules = self.t.loader.modules.as_ref().is_some_and(|f| !f.value);
        let sig_refused =
            !self.m.signed && self.t.loader.sig_force.as_ref().is_some_and(|f| f.value);
        if no_modules || sig_refused {
            return false;
        }
        self.module_support();
        self.signature();
        let line = if self.t.rules.version < (6, 0) {
            "Module has invalid ELF structures".to_string()
        } else {
            line
        };
        let (detail, hint) = if etype != elf::ET_REL {
            (
                format!("e_type {etype}, not {} (ET_REL)", elf::ET_REL),
                format!(
                    "the file is not a relocatable object (e_type {etype}): a module is what kbuild links as ET_REL (a .ko)"
                ),
            )
        } else {
            let target = self
                .t
                .loader
                .machine
                .as_ref()
                .map_or_else(String::new, |f| {
                    format!(
                        "; the target's is {} ({}) ({})",
                        f.value,
                        klpsym_elf::machine_name(f.value),
                        f.source
                    )
                });
            let detail = format!(
                "e_machine {machine} ({}){target}",
                klpsym_elf::machine_name(machine)
            );
            (
                detail.clone(),
                format!(
                    "the module is built for another architecture ({detail}): build it for the target's, against its headers"
                ),
            )
        };
        self.validity_refusal(
            ProblemKind::ElfHeader,
            LoaderCheckKind::ElfHeader,
            line,
            detail,
            hint,
        );
        true
    }

    /// A refusal of `elf_validity_check()`/`elf_validity_cache_copy()` (-ENOEXEC): the problem,
    /// the failed check, and nothing after it reached.
    fn validity_refusal(
        &mut self,
        kind: ProblemKind,
        check: LoaderCheckKind,
        line: String,
        detail: String,
        hint: String,
    ) {
        self.loader_failure(kind, vec![line], ENOEXEC, hint);
        self.loader_checks.push(LoaderCheck {
            check,
            status: CheckStatus::Failed,
            detail,
        });
        self.loader_reached = false;
    }

    /// The `.gnu.linkonce.this_module` checks of `elf_validity_cache_copy()` (6.4+; since 6.13
    /// `elf_validity_cache_index_mod()`, kernel/module/main.c), in the kernel's order: exactly
    /// one such section, not SHT_NOBITS, SHF_ALLOC, and `sh_size == sizeof(struct module)` —
    /// a module built against the headers of another configuration (another kernel's, or a
    /// kernel klp-build made with its own config) is refused there, -ENOEXEC, before its
    /// symbol versions or vermagic are looked at. 5.10 and 6.1 have none of these (the lab's
    /// 6.1 vmlinux holds none of the lines; 6.12 and 7.2 hold all four). False when the load
    /// stops here.
    pub(super) fn this_module(&mut self) -> bool {
        if self.t.rules.version < (6, 4) {
            return true;
        }
        // info->name: modinfo's name= only (the struct's name is read after these checks).
        let name = self
            .m
            .modinfo("name")
            .unwrap_or("(missing .modinfo section or name field)")
            .to_string();
        let found: Vec<_> = self
            .m
            .elf
            .sections
            .iter()
            .filter(|s| s.name == ".gnu.linkonce.this_module")
            .map(|s| (s.sh_type, s.flags, s.size))
            .collect();
        let refusal = match found.as_slice() {
            [] | [_, _, ..] => Some((
                if self.t.rules.version < (6, 13) {
                    format!("module {name}: Only one .gnu.linkonce.this_module section must exist.")
                } else {
                    format!("module {name}: Exactly one .gnu.linkonce.this_module section must exist.")
                },
                format!("{} .gnu.linkonce.this_module sections", found.len()),
                "a module has exactly one .gnu.linkonce.this_module section (modpost writes it into NAME.mod.c): link the module with kbuild".to_string(),
            )),
            [(t, _, _)] if *t == elf::SHT_NOBITS => Some((
                format!("module {name}: .gnu.linkonce.this_module section must have a size set"),
                "the section is SHT_NOBITS".to_string(),
                "the module's .gnu.linkonce.this_module has no contents: link the module with kbuild".to_string(),
            )),
            [(_, f, _)] if f & elf::SHF_ALLOC == 0 => Some((
                format!("module {name}: .gnu.linkonce.this_module must occupy memory during process execution"),
                "the section is not SHF_ALLOC".to_string(),
                "the module's .gnu.linkonce.this_module is not SHF_ALLOC: link the module with kbuild".to_string(),
            )),
            [(_, _, size)] => match self.t.loader.struct_module_size.clone() {
                None => {
                    self.loader_check(
                        LoaderCheckKind::ThisModule,
                        CheckStatus::NotChecked,
                        format!("the section is {size} bytes; sizeof(struct module) of the target is not known (its BTF, or a module it ships)"),
                    );
                    return true;
                }
                Some(f) if f.value == *size => {
                    self.loader_check(
                        LoaderCheckKind::ThisModule,
                        CheckStatus::Passed,
                        format!("{size} bytes, sizeof(struct module) ({})", f.source),
                    );
                    return true;
                }
                Some(f) => Some((
                    format!("module {name}: .gnu.linkonce.this_module section size must match the kernel's built struct module size at run time"),
                    format!("{size} bytes; sizeof(struct module) is {} ({})", f.value, f.source),
                    format!(
                        "the module was built against the headers of another kernel configuration (its struct module is {size} bytes, the target's {}): build it against the target's own headers",
                        f.value
                    ),
                )),
            },
        };
        let Some((line, detail, hint)) = refusal else {
            return true;
        };
        if !self.loader_reached {
            self.loader_check(LoaderCheckKind::ThisModule, CheckStatus::Failed, detail);
            return false;
        }
        self.validity_refusal(
            ProblemKind::ThisModule,
            LoaderCheckKind::ThisModule,
            line,
            detail,
            hint,
        );
        false
    }
}
