//! `apply_relocations()` (kernel/module/main.c; kernel/module.c before 5.19): every
//! relocation section of the module in section-index order. A section whose target is out of
//! range or not SHF_ALLOC is skipped; a SHF_RELA_LIVEPATCH section goes to
//! `klp_apply_section_relocs()` (`klp_relocs.rs`); an SHT_REL section fails on x86_64 and
//! arm64 (the generic `apply_relocate()`: "module %s: REL relocation unsupported"); an
//! SHT_RELA section goes to the architecture's `apply_relocate_add()` with the symbol values
//! `simplify_symbols()` left: an undefined symbol's exported address (0 for an unresolved weak
//! one), a defined symbol's value plus its section's address, an SHN_ABS value as it is. The
//! first failure ends the load.
//!
//! Values that depend on where the loader puts the module's sections (a module-local symbol,
//! a PC-relative place) are exact only with `--section-base` for those sections.

use super::{Ctx, ENOEXEC};
use crate::consts as elf;
use crate::elf::{SHF_RELA_LIVEPATCH, SHN_LIVEPATCH};
use crate::reloc::{self, RelocInput, Site};
use crate::report::*;
use klpsym_core::resched::Cancelled;

/// How the ordinary relocations went, for the loader check's line.
#[derive(Default)]
struct Tally {
    sections: usize,
    relocations: usize,
    computed: usize,
    needs_placement: usize,
    /// Whether the kernel accepts them depends on where the module lands.
    may_fail: usize,
    refused: usize,
}

impl Ctx<'_, '_, '_, '_> {
    /// `apply_relocations()` while the module loads.
    pub(super) fn apply_relocations(&mut self) -> Result<(), Cancelled> {
        let stage = Stage::ModuleLoad;
        let m = self.m;
        let nsec = m.elf.sections.len() as u32;
        let mut tally = Tally::default();
        // Whether the kernel gets here at all (an earlier check of the load failed).
        let reached = !self.blocked(&stage);
        let mut klp = m.klp_sections.iter().peekable();
        for s in m.elf.sections.iter().skip(1) {
            self.r.tick()?;
            let is_rel = s.sh_type == elf::SHT_REL || s.sh_type == elf::SHT_RELA;
            if s.flags & SHF_RELA_LIVEPATCH != 0 {
                // The module's klp sections are the SHF_RELA_LIVEPATCH ones, in this order.
                while klp.peek().is_some_and(|k| k.index < s.index) {
                    klp.next();
                }
                if let Some(sec) = klp.next_if(|k| k.index == s.index) {
                    self.klp_section_at_load(sec)?;
                }
                continue;
            }
            if !is_rel || s.info >= nsec {
                continue;
            }
            if m.elf.sections[s.info as usize].flags & elf::SHF_ALLOC == 0 {
                continue;
            }
            tally.sections += 1;
            if s.sh_type == elf::SHT_REL {
                let line = format!("module {}: REL relocation unsupported", m.name);
                self.problem(
                    ProblemKind::RelocationType,
                    &stage,
                    vec![line],
                    ENOEXEC,
                    None,
                    Some(&s.name),
                    None,
                    "x86_64 and arm64 modules carry RELA relocations; this object was not built for the kernel".into(),
                );
                self.fail(&stage);
                tally.refused += 1;
                continue;
            }
            self.ordinary_section(s.index, &mut tally)?;
        }
        self.loader_reached = reached;
        self.relocations_check(&tally);
        Ok(())
    }

    /// The loader check line for the ordinary relocations.
    fn relocations_check(&mut self, t: &Tally) {
        let status = if t.refused > 0 {
            CheckStatus::Failed
        } else if t.relocations == 0 {
            CheckStatus::NotApplicable
        } else if t.may_fail > 0 {
            CheckStatus::NotChecked
        } else {
            CheckStatus::Passed
        };
        let mut detail = format!(
            "{} relocation(s) in {} section(s): {} computed, {} refused",
            t.relocations, t.sections, t.computed, t.refused
        );
        if t.may_fail > 0 {
            detail.push_str(&format!(
                "; {} may overflow depending on where the loader places the module (give the module's section addresses, or a loaded copy to take them from)",
                t.may_fail
            ));
        }
        if t.needs_placement > 0 {
            detail.push_str(&format!(
                "; {} depend on where the loader places the module ({PLACEMENT_HINT})",
                t.needs_placement
            ));
        }
        self.loader_check(LoaderCheckKind::Relocations, status, detail);
    }

    /// `apply_relocate_add()` for one ordinary SHT_RELA section.
    fn ordinary_section(&mut self, index: u32, tally: &mut Tally) -> Result<(), Cancelled> {
        let stage = Stage::ModuleLoad;
        let m = self.m;
        let s = &m.elf.sections[index as usize];
        let target = s.info;
        let tname = m.elf.sections[target as usize].name.clone();
        let relas = m
            .elf
            .relas
            .get(index as usize)
            .map_or(&[][..], Vec::as_slice);
        for (i, r) in relas.iter().enumerate() {
            self.r.tick_step()?;
            tally.relocations += 1;
            // ElfObject::parse refuses relocations whose symbol index is out of range.
            let sym = &m.elf.symbols[r.sym as usize];
            let mut rep = self.new_report(&s.name, i, &tname, r, self.symbol_label(sym));
            let was_blocked = self.blocked(&stage);
            let s_val = self.ordinary_symbol_value(sym);
            rep.resolved = s_val;
            // With S unknown (a symbol of the module's own sections, not placed), the module
            // area stands in for it: what fails there (an unknown type, nonzero bytes, an
            // absolute field too narrow for any module address) fails wherever the loader
            // puts the module; a PC-relative value is only ever between the module's own
            // sections (in range by construction) and stays unknown.
            let probe = s_val.is_none();
            let place = self
                .t
                .section_bases
                .get(&target)
                .filter(|_| !probe)
                .map(|b| b.wrapping_add(r.offset));
            let existing = self.existing(target, r.offset, 8);
            let input = RelocInput {
                r_type: r.r_type,
                symbol_value: s_val.unwrap_or_else(|| self.module_area()),
                addend: r.addend,
                place,
                existing: &existing,
                site: Site {
                    kernel: self.t.rules.version,
                    rela_section: index,
                    index: i,
                    window: if probe { None } else { self.window },
                },
            };
            match reloc::apply(m.arch, &m.name, &input) {
                Ok(None) => rep.status = RelocationStatus::None,
                Ok(Some(mut a)) => {
                    if probe {
                        // Computed from a stand-in S: only the verdict holds.
                        a.value = None;
                        a.bytes = None;
                    } else if a.overflow_unknown {
                        tally.may_fail += 1;
                    }
                    if self.record_applied(&mut rep, a, target, r.offset, was_blocked)? {
                        tally.computed += 1;
                    } else {
                        tally.needs_placement += 1;
                    }
                    if probe {
                        rep.expression = String::new();
                        rep.note = Some(format!(
                            "S is in section {} of the module: exact once that section's load address is given",
                            m.elf
                                .sections
                                .get(usize::from(sym.shndx))
                                .map_or("?", |x| x.name.as_str())
                        ));
                    }
                }
                Err(f) => {
                    tally.refused += 1;
                    self.record_refused(&mut rep, f, &stage, was_blocked);
                }
            }
            self.ordinary.push(rep);
        }
        Ok(())
    }

    /// An address in the target's module area, standing in for an unplaced symbol of the
    /// module: the window's lower end on arm64, MODULES_VADDR on x86_64
    /// (arch/x86/include/asm/pgtable_64_types.h: the kernel image's 1 GiB, then modules).
    fn module_area(&self) -> u64 {
        match (self.m.arch, self.window) {
            (crate::Arch::Aarch64, Some(w)) => w[0].0,
            (crate::Arch::Aarch64, None) => 0xffff_8000_0000_0000,
            (crate::Arch::X86_64, _) => 0xffff_ffff_c000_0000,
        }
    }

    /// A symbol's name for reports: a section symbol (no name) is named by its section.
    fn symbol_label(&self, y: &crate::elf::ElfSymbol) -> String {
        if y.name.is_empty() && y.kind() == elf::STT_SECTION {
            if let Some(s) = self.m.elf.sections.get(usize::from(y.shndx)) {
                return s.name.clone();
            }
        }
        y.name.clone()
    }

    /// S as `simplify_symbols()` leaves it; `None` when it depends on an unknown placement
    /// or address.
    fn ordinary_symbol_value(&self, y: &crate::elf::ElfSymbol) -> Option<u64> {
        match y.shndx {
            elf::SHN_UNDEF if y.name.is_empty() => Some(0),
            elf::SHN_UNDEF => {
                let table = self.t.kernel;
                // An export is a global symbol: the upper-case entry of its name, in
                // vmlinux or a loaded module (the first, as find_symbol() takes it).
                let found = table
                    .by_name(&y.name)
                    .find(|s| s.kind.is_ascii_uppercase())
                    .or_else(|| table.by_name(&y.name).next());
                match found {
                    Some(s) if !table.addresses_hidden() => Some(s.addr),
                    Some(_) => None,
                    // Not exported: refused earlier, unless weak (then 0).
                    None if y.bind() == elf::STB_WEAK => Some(0),
                    None => None,
                }
            }
            elf::SHN_ABS | SHN_LIVEPATCH => Some(y.value),
            sh if y.in_section() => self
                .t
                .section_bases
                .get(&u32::from(sh))
                .map(|b| b.wrapping_add(y.value)),
            _ => Some(y.value),
        }
    }
}
