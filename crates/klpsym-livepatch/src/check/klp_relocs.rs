//! `apply_relocations()` for klp relocation sections: `klp_apply_section_relocs()` →
//! `klp_resolve_symbols()` (every symbol looked up with `klp_find_object_symbol()`), then the
//! architecture's `apply_relocate_add()`. vmlinux sections run when the patch module loads
//! (since 5.8), module sections when their module is (or becomes) loaded.

use super::{Ctx, EINVAL};
use crate::consts as elf;
use crate::elf::{ElfRela, SHN_LIVEPATCH};
use crate::hints::{candidates, not_found_hint};
use crate::module::KlpRelaSection;
use crate::names::{parse_klp_section, parse_klp_symbol};
use crate::reloc::{self, Applied, RelocFailure, RelocInput, Site};
use crate::report::*;
use crate::target::TableSource;
use klpsym_core::bulk;
use klpsym_core::resched::Cancelled;
use klpsym_core::{LookupOutcome, SymbolTable};

impl Ctx<'_, '_, '_, '_> {
    /// One SHF_RELA_LIVEPATCH section met by `apply_relocations()` while the patch module
    /// loads: since 5.8 the vmlinux ones are applied here, module ones wait for their module.
    pub(super) fn klp_section_at_load(&mut self, sec: &KlpRelaSection) -> Result<(), Cancelled> {
        let stage = Stage::ModuleLoad;
        let m = self.m;
        let nsec = m.elf.sections.len() as u32;
        // Before 5.8 apply_relocations() left every klp section to the enable step.
        if !self.t.rules.vmlinux_relocs_at_load {
            return Ok(());
        }
        if sec.target >= nsec || m.elf.sections[sec.target as usize].flags & elf::SHF_ALLOC == 0 {
            self.warn(format!(
                "section {} patches section {}, which is not allocated: the loader skips it",
                sec.name, sec.target
            ));
            return Ok(());
        }
        match self.section_object(sec, &stage) {
            Some(obj) if obj == "vmlinux" => self.klp_section(sec, &obj, &stage, None),
            _ => Ok(()),
        }
    }

    pub(super) fn section_object(&mut self, sec: &KlpRelaSection, stage: &Stage) -> Option<String> {
        match parse_klp_section(sec.name.as_bytes()) {
            Some(p) => {
                if let Some(l) = p.lenient {
                    self.warn_once(format!("section {}: {l}", sec.name));
                }
                Some(p.object)
            }
            None => {
                if !self.bad_sections.insert(sec.index) {
                    self.fail(stage);
                    return None;
                }
                self.problem(
                    ProblemKind::BadSectionName,
                    stage,
                    vec![format!(
                        "livepatch: section {} has an incorrectly formatted name",
                        sec.name
                    )],
                    EINVAL,
                    None,
                    Some(&sec.name),
                    None,
                    "klp relocation sections are named .klp.rela.<object>.<section>".into(),
                );
                self.fail(stage);
                None
            }
        }
    }

    /// `klp_resolve_symbols()` then `apply_relocate_add()` for one section.
    pub(super) fn klp_section(
        &mut self,
        sec: &KlpRelaSection,
        sec_obj: &str,
        stage: &Stage,
        coming: Option<&str>,
    ) -> Result<(), Cancelled> {
        let sec_vmlinux = sec_obj == "vmlinux";
        let mut resolved: Vec<Option<(u64, bool)>> = Vec::with_capacity(sec.relocs.len());
        // Lookups and relocation values are a microsecond or so each: a clock read per item
        // (tick_step) keeps a stride learned on cheaper items before from overshooting here.
        for (i, r) in sec.relocs.iter().enumerate() {
            self.r.tick_step()?;
            resolved.push(self.resolve_one(sec, i, r.sym, sec_vmlinux, stage, coming)?);
        }
        let target = sec.target;
        let tname = self
            .m
            .elf
            .sections
            .get(target as usize)
            .map_or_else(String::new, |s| s.name.clone());
        for (i, r) in sec.relocs.iter().enumerate() {
            self.r.tick_step()?;
            let sym = &self.m.elf.symbols[r.sym as usize];
            let mut rep = self.new_report(&sec.name, i, &tname, r, sym.name.clone());
            let Some(Some((s_val, unplaced))) = resolved.get(i).copied() else {
                rep.note = Some("symbol not resolved".into());
                self.relocs.push(rep);
                continue;
            };
            rep.resolved = Some(s_val);
            rep.unplaced = unplaced;
            let place = self
                .t
                .section_bases
                .get(&target)
                .map(|b| b.wrapping_add(r.offset));
            let width = 8usize;
            let existing = self.existing(target, r.offset, width);
            let input = RelocInput {
                r_type: r.r_type,
                symbol_value: s_val,
                addend: r.addend,
                place,
                existing: &existing,
                site: Site {
                    kernel: self.t.rules.version,
                    rela_section: sec.index,
                    index: i,
                    // S from an unplaced .ko is an offset, not an address: no window
                    // verdict can be drawn from it.
                    window: if unplaced { None } else { self.window },
                },
            };
            let was_blocked = self.blocked(stage);
            match reloc::apply(self.m.arch, &self.m.name, &input) {
                Ok(None) => rep.status = RelocationStatus::None,
                Ok(Some(a)) => {
                    self.record_applied(&mut rep, a, target, r.offset, was_blocked)?;
                }
                Err(f) => self.record_refused(&mut rep, f, stage, was_blocked),
            }
            self.relocs.push(rep);
        }
        bulk::free_with_points(resolved, self.r)
    }

    /// The report of relocation `i` of section `section` (into `target`) before the kernel
    /// reaches it: nothing resolved or computed yet.
    pub(super) fn new_report(
        &self,
        section: &str,
        i: usize,
        target: &str,
        r: &ElfRela,
        symbol: String,
    ) -> RelocationReport {
        RelocationReport {
            section: section.to_string(),
            index: i,
            target_section: target.to_string(),
            offset: r.offset,
            r_type: r.r_type,
            type_name: reloc::type_name(self.m.arch, r.r_type),
            symbol,
            resolved: None,
            unplaced: false,
            addend: r.addend,
            expression: String::new(),
            value: None,
            bytes: None,
            status: RelocationStatus::NotReached,
            note: None,
        }
    }

    /// Records what the architecture's code writes for one relocation (klp or ordinary):
    /// the report's expression, value, bytes, note and status, and the bytes into the section
    /// copy (unknown ones as 0xff, so a later relocation at the same place does not read
    /// zeros). True when the value is exact.
    pub(super) fn record_applied(
        &mut self,
        rep: &mut RelocationReport,
        a: Applied,
        target: u32,
        offset: u64,
        was_blocked: bool,
    ) -> Result<bool, Cancelled> {
        rep.expression = a.expression.to_string();
        rep.value = a.value;
        rep.note = a.note;
        let exact = a.bytes.is_some() && !a.overflow_unknown;
        rep.status = if was_blocked {
            RelocationStatus::NotReached
        } else if a.overflow_unknown {
            RelocationStatus::NeedsPlacement
        } else {
            RelocationStatus::Applied
        };
        match &a.bytes {
            Some(b) => self.write_overlay(target, offset, b)?,
            None => self.write_overlay(target, offset, &vec![0xff; usize::from(a.width)])?,
        }
        rep.bytes = a.bytes;
        Ok(exact)
    }

    /// Records a relocation the architecture's code refuses: a problem with its lines and
    /// errno, the load (or the module's coming) failed.
    pub(super) fn record_refused(
        &mut self,
        rep: &mut RelocationReport,
        f: RelocFailure,
        stage: &Stage,
        was_blocked: bool,
    ) {
        rep.status = if was_blocked {
            RelocationStatus::NotReached
        } else {
            RelocationStatus::Failed
        };
        let place = format!("{}+{:#x}", rep.target_section, rep.offset);
        let (kind, hint) = if f.lines[0].contains("overflow") {
            (
                ProblemKind::RelocationOverflow,
                format!("{place}: the value does not fit the relocation's field (a module built without the kernel's code model?)"),
            )
        } else if f.lines[0].contains("nonzero") {
            (
                ProblemKind::RelocationTargetNonzero,
                format!("{place}: the bytes at the place are not zero (the object was pre-linked or relocated twice)"),
            )
        } else {
            (
                ProblemKind::RelocationType,
                format!(
                    "{place}: the kernel cannot apply {} in a module",
                    rep.type_name
                ),
            )
        };
        let (section, symbol) = (rep.section.clone(), rep.symbol.clone());
        self.problem(
            kind,
            stage,
            f.lines,
            f.errno,
            Some(&symbol),
            Some(&section),
            None,
            hint,
        );
        self.fail(stage);
    }

    pub(super) fn existing(&self, section: u32, offset: u64, width: usize) -> Vec<u8> {
        let full = self
            .m
            .elf
            .sections
            .get(section as usize)
            .map_or(0, |s| s.size);
        let avail = full.saturating_sub(offset).min(width as u64) as usize;
        if let Some(o) = self.overlay.get(&section) {
            return o
                .get(offset as usize..offset as usize + avail)
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
        }
        self.m
            .elf
            .read_bytes(section, offset, avail)
            .unwrap_or_default()
    }

    pub(super) fn write_overlay(
        &mut self,
        section: u32,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), Cancelled> {
        if !self.overlay.contains_key(&section) {
            let copy = self.section_copy(section)?;
            self.overlay.insert(section, copy);
        }
        let Some(o) = self.overlay.get_mut(&section) else {
            return Ok(());
        };
        let start = offset as usize;
        if let Some(dst) = start
            .checked_add(bytes.len())
            .and_then(|end| o.get_mut(start..end))
        {
            dst.copy_from_slice(bytes);
        }
        Ok(())
    }

    /// The bytes of `section` (zeros for NOBITS; empty when it lies outside the file), copied
    /// in steps.
    fn section_copy(&mut self, section: u32) -> Result<Vec<u8>, Cancelled> {
        let obj = &self.m.elf;
        let Some(s) = obj.sections.get(section as usize) else {
            return Ok(Vec::new());
        };
        if s.sh_type == elf::SHT_NOBITS {
            // Zeroed pages from the allocator, touched only where relocations write.
            return Ok(vec![0u8; s.size as usize]);
        }
        let data = obj.section_data(section);
        if data.len() as u64 != s.size {
            return Ok(Vec::new());
        }
        let mut v = Vec::new();
        bulk::extend_from_slice(&mut v, data, self.r)?;
        Ok(v)
    }

    /// One symbol of `klp_resolve_symbols()`: Some((S, offline)) when resolved.
    fn resolve_one(
        &mut self,
        sec: &KlpRelaSection,
        rela_index: usize,
        sym_index: u32,
        sec_vmlinux: bool,
        stage: &Stage,
        coming: Option<&str>,
    ) -> Result<Option<(u64, bool)>, Cancelled> {
        let sym = &self.m.elf.symbols[sym_index as usize];
        if sym.shndx != SHN_LIVEPATCH {
            self.problem(
                ProblemKind::NotLivepatchSymbol,
                stage,
                vec![if self.t.rules.not_livepatch_message_has_position {
                    // 6.19 on: "symbol %s at rela sec %u idx %d ...", where the "rela
                    // sec" printed is the symbol table's section index (symndx) and idx
                    // the relocation's index in its section.
                    format!(
                        "livepatch: symbol {} at rela sec {} idx {} is not marked as a livepatch symbol",
                        sym.name, self.m.elf.symtab_index, rela_index
                    )
                } else {
                    format!(
                        "livepatch: symbol {} is not marked as a livepatch symbol",
                        sym.name
                    )
                }],
                EINVAL,
                Some(&sym.name),
                Some(&sec.name),
                None,
                format!(
                    "symbol {} must have st_shndx SHN_LIVEPATCH (0xff20); it has {:#x}",
                    sym_index, sym.shndx
                ),
            );
            self.fail(stage);
            return Ok(None);
        }
        let Some(k) = parse_klp_symbol(sym.name.as_bytes(), self.t.rules.ksym_name_len) else {
            self.problem(
                ProblemKind::BadSymbolName,
                stage,
                vec![format!("livepatch: symbol {} has an incorrectly formatted name", sym.name)],
                EINVAL,
                Some(&sym.name),
                Some(&sec.name),
                None,
                format!(
                    "klp symbols are named .klp.sym.<object>.<name>,<position> (object up to 55 bytes, name up to {})",
                    self.t.rules.ksym_name_len - 1
                ),
            );
            self.fail(stage);
            return Ok(None);
        };
        if let Some(l) = &k.lenient {
            self.warn_once(format!("symbol {}: {l}", sym.name));
        }
        if !sec_vmlinux && k.object == "vmlinux" && self.t.rules.rejects_vmlinux_in_module_section {
            self.problem(
                ProblemKind::VmlinuxSymbolInModuleSection,
                stage,
                vec![format!(
                    "livepatch: invalid access to vmlinux symbol '{}' from module-specific livepatch relocation section",
                    k.name
                )],
                EINVAL,
                Some(&sym.name),
                Some(&sec.name),
                Some("vmlinux"),
                "move this relocation to a .klp.rela.vmlinux.* section (or use a normal relocation if exported)".into(),
            );
            self.fail(stage);
            return Ok(None);
        }
        let (out, src, table) = self.t.lookup(&k.object, &k.name, k.sympos, coming);
        if self.lookup_problem(&out, table, stage, Some(&sym.name), Some(&sec.name))? {
            return Ok(None);
        }
        match out.address {
            Some(a) => Ok(Some((a, src == TableSource::Unplaced))),
            None => {
                self.warn_once(format!(
                    "{}: resolved, but the target hides addresses: values not computed",
                    sym.name
                ));
                Ok(None)
            }
        }
    }

    /// Reports a failed lookup; true when it failed.
    pub(super) fn lookup_problem(
        &mut self,
        out: &LookupOutcome,
        table: &SymbolTable,
        stage: &Stage,
        symbol: Option<&str>,
        section: Option<&str>,
    ) -> Result<bool, Cancelled> {
        let Some(msg) = &out.message else {
            return Ok(false);
        };
        let kind = match out.verdict {
            klpsym_core::LookupVerdict::Ambiguous => ProblemKind::Ambiguous,
            klpsym_core::LookupVerdict::PositionNotFound => ProblemKind::PositionNotFound,
            _ => ProblemKind::SymbolNotFound,
        };
        let name = msg.split('\'').nth(1).unwrap_or_default().to_string();
        let cands = candidates(table, &out.candidates);
        let hint = match kind {
            ProblemKind::Ambiguous => format!(
                "'{name}' is defined {} times in {}: choose one with old_sympos or the ,N of the klp symbol",
                cands.len(),
                out.object
            ),
            ProblemKind::PositionNotFound => {
                format!("{} has {} definition(s) of '{name}'", out.object, cands.len())
            }
            _ => {
                let key = (
                    self.t.kernel as *const SymbolTable as usize,
                    out.object.clone(),
                    name.clone(),
                );
                match self.hints.get(&key) {
                    Some(h) => h.clone(),
                    None => {
                        let h = not_found_hint(self.t.kernel, &name, &out.object, self.r)?;
                        self.hints.insert(key, h.clone());
                        h
                    }
                }
            }
        };
        let object = out.object.clone();
        let p = self.problem(
            kind,
            stage,
            vec![format!("livepatch: {msg}")],
            EINVAL,
            Some(symbol.unwrap_or(&name)),
            section,
            Some(&object),
            hint,
        );
        p.candidates = cands;
        self.fail(stage);
        Ok(true)
    }
}
