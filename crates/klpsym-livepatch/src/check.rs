//! `check`: what the kernel does with a livepatch module, step by step, in its order.
//!
//! The walk (kernel/module/main.c, kernel/livepatch/core.c, 5.8+ unless noted):
//! 1. **module load** — `simplify_symbols()`: every undefined symbol the kernel does not
//!    export is `%s: Unknown symbol %s (err -2)` (all are printed, then the load fails);
//!    SHN_COMMON fails. `apply_relocations()`: sections in index order; a SHF_RELA_LIVEPATCH
//!    section's name is parsed (`section %s has an incorrectly formatted name`) and, for
//!    `vmlinux`, its symbols resolved (`klp_resolve_symbols`) then relocations applied
//!    (before 5.8 klp sections were skipped here and all applied at enable time).
//! 2. **patch enable** — the module's init calls `klp_enable_patch()`: table checks,
//!    `module %s is not marked as a livepatch module`, then per object: sysfs names, and for
//!    loaded objects `klp_init_object_loaded()`: the object's klp sections (modules only since
//!    5.8), then `klp_find_object_symbol()` for each function.
//! 3. **module coming** — for each object whose module is not loaded, the same
//!    `klp_init_object_loaded()` when it loads; failure refuses that module.
//!
//! The kernel stops at the first fatal problem of a step; this walk goes on and marks later
//! problems `reached: false`, so an author sees everything at once. Not modelled: the kallsyms
//! size lookups after a successful function lookup (they fail only for symbols outside the
//! kallsyms text ranges), ordinary relocation sections (values depend on the module layout),
//! `klp_is_patch_compatible()` (needs the other loaded patches).

use std::collections::{HashMap, HashSet};

use crate::consts as elf;

use crate::elf::SHN_LIVEPATCH;
use crate::hints::{candidates, not_found_hint};
use crate::module::{KlpRelaSection, LivepatchModule};
use crate::names::{parse_klp_section, parse_klp_symbol};
use crate::patch::{KlpObjectDesc, Pointer};
use crate::reloc::{self, RelocInput};
use crate::report::*;
use crate::target::{TableSource, Target};
use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{LookupOutcome, SymbolTable};

const EINVAL: i32 = 22;
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const MODULE_NAME_LEN: usize = 56;

/// Checks `module` against `target` and reports what the kernel would do.
pub fn check(module: &LivepatchModule<'_>, target: &Target<'_>) -> CheckReport {
    check_with(module, target, &mut Resched::none())
        .expect("a Resched without a cancel flag or callback never cancels")
}

/// [`check`], reaching reschedule points through `resched`: a tick per symbol, section,
/// relocation, object and function, and for every lookup against the target's tables (whose
/// indexes are built first, with points). `Err(Cancelled)` when a point said stop.
pub fn check_with(
    module: &LivepatchModule<'_>,
    target: &Target<'_>,
    resched: &mut Resched,
) -> Result<CheckReport, Cancelled> {
    target.kernel.build_indexes(resched)?;
    for t in target.offline_modules.values() {
        t.build_indexes(resched)?;
    }
    let mut c = Ctx::new(module, target, resched);
    c.module_load()?;
    c.patch_enable()?;
    c.modules_coming()?;
    c.finish()
}

struct Ctx<'m, 'd, 't, 'r> {
    m: &'m LivepatchModule<'d>,
    t: &'m Target<'t>,
    r: &'r mut Resched,
    problems: Vec<Problem>,
    relocs: Vec<RelocationReport>,
    warnings: Vec<String>,
    /// The warnings already given, so each is given once without a walk over the list.
    warned: HashSet<String>,
    objects: Vec<ObjectReport>,
    /// Section bytes as relocations write them (unknown values written as 0xff).
    overlay: HashMap<u32, Vec<u8>>,
    failed: HashSet<String>,
    deferred: Vec<usize>,
    bad_sections: HashSet<u32>,
    /// Hints for names not found, by (table, object, name): the hint looks at the whole table.
    hints: HashMap<(usize, String, String), String>,
}

fn stage_key(s: &Stage) -> String {
    match s {
        Stage::ModuleLoad => "load".into(),
        Stage::PatchEnable => "enable".into(),
        Stage::ModuleComing { module } => format!("coming:{module}"),
    }
}

impl<'m, 'd, 't, 'r> Ctx<'m, 'd, 't, 'r> {
    fn new(m: &'m LivepatchModule<'d>, t: &'m Target<'t>, r: &'r mut Resched) -> Self {
        // The report's lists are sized once for what the module can produce (untouched
        // capacity costs nothing): growing a list of a big patch copies megabytes at once.
        let relocs: usize = m.klp_sections.iter().map(|s| s.relocs.len()).sum();
        let (objects, funcs) = match &m.patch {
            Ok(p) => (
                p.objects.len(),
                p.objects.iter().map(|o| o.funcs.len()).sum::<usize>(),
            ),
            Err(_) => (0, 0),
        };
        let problems =
            m.elf.symbols.len() + m.klp_sections.len() + relocs + 2 * funcs + 3 * objects + 2;
        // Likewise the sets keyed by names: growing one rehashes every entry at once. Hints
        // and most warnings are per klp symbol or function.
        let names = m.klp_symbols.len() + m.klp_sections.len() + funcs + 16;
        Ctx {
            m,
            t,
            r,
            problems: Vec::with_capacity(problems),
            relocs: Vec::with_capacity(relocs),
            warnings: Vec::new(),
            warned: HashSet::with_capacity(names),
            objects: Vec::with_capacity(objects),
            overlay: HashMap::new(),
            failed: HashSet::new(),
            deferred: Vec::new(),
            bad_sections: HashSet::new(),
            hints: HashMap::with_capacity(names),
        }
    }

    /// Adds a warning unless it was given already.
    fn warn_once(&mut self, w: String) {
        if self.warned.insert(w.clone()) {
            self.warnings.push(w);
        }
    }

    /// Adds a warning.
    fn warn(&mut self, w: String) {
        self.warned.insert(w.clone());
        self.warnings.push(w);
    }

    fn blocked(&self, stage: &Stage) -> bool {
        let load = self.failed.contains("load");
        let enable = load || self.failed.contains("enable");
        match stage {
            Stage::ModuleLoad => load,
            Stage::PatchEnable => enable,
            Stage::ModuleComing { .. } => enable || self.failed.contains(&stage_key(stage)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn problem(
        &mut self,
        kind: ProblemKind,
        stage: &Stage,
        log: Vec<String>,
        errno: i32,
        symbol: Option<&str>,
        section: Option<&str>,
        object: Option<&str>,
        hint: String,
    ) -> &mut Problem {
        let reached = !self.blocked(stage);
        self.problems.push(Problem {
            kind,
            stage: stage.clone(),
            log,
            errno,
            errno_name: errno_name(errno),
            reached,
            symbol: symbol.map(str::to_string),
            section: section.map(str::to_string),
            object: object.map(str::to_string),
            hint,
            candidates: Vec::new(),
        });
        self.problems.last_mut().expect("just pushed")
    }

    fn fail(&mut self, stage: &Stage) {
        self.failed.insert(stage_key(stage));
    }

    // ---- step 1: load_module() --------------------------------------------------------

    fn module_load(&mut self) -> Result<(), Cancelled> {
        let stage = Stage::ModuleLoad;
        let m = self.m;
        let name = m.name.clone();
        let mut any = false;
        for s in m.elf.symbols.iter().skip(1) {
            self.r.tick()?;
            if s.shndx == elf::SHN_COMMON {
                self.problem(
                    ProblemKind::CommonSymbol,
                    &stage,
                    vec![format!("{name}: please compile with -fno-common")],
                    reloc::ENOEXEC,
                    Some(&s.name),
                    None,
                    None,
                    "build with -fno-common (kbuild does)".into(),
                );
                any = true;
            } else if s.is_undefined() && !s.name.is_empty() && s.bind() != elf::STB_WEAK {
                let unknown = if s.name.starts_with(".klp.sym.") {
                    true
                } else if s.name == "_GLOBAL_OFFSET_TABLE_" && self.m.arch == crate::Arch::X86_64 {
                    false
                } else {
                    self.t.exported.is_some_and(|f| !f(&s.name))
                };
                if unknown {
                    let hint = if s.name.starts_with(".klp.sym.") {
                        "a klp symbol must have st_shndx SHN_LIVEPATCH (0xff20), not SHN_UNDEF"
                            .to_string()
                    } else {
                        "the target does not export it: turn its relocations into klp relocations (klpsym convert)"
                            .to_string()
                    };
                    self.problem(
                        ProblemKind::UnknownSymbol,
                        &stage,
                        vec![format!("{name}: Unknown symbol {} (err -2)", s.name)],
                        ENOENT,
                        Some(&s.name),
                        None,
                        None,
                        hint,
                    );
                    any = true;
                }
            }
        }
        if any {
            self.fail(&stage);
        }
        let nsec = m.elf.sections.len() as u32;
        for sec in &m.klp_sections {
            self.r.tick()?;
            if sec.target >= nsec || m.elf.sections[sec.target as usize].flags & elf::SHF_ALLOC == 0
            {
                self.warn(format!(
                    "section {} patches section {}, which is not allocated: the loader skips it",
                    sec.name, sec.target
                ));
                continue;
            }
            if !self.t.rules.vmlinux_relocs_at_load {
                continue;
            }
            match self.section_object(sec, &stage) {
                Some(obj) if obj == "vmlinux" => self.klp_section(sec, &obj, &stage, None)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Parses the section name; reports a malformed one.
    fn section_object(&mut self, sec: &KlpRelaSection, stage: &Stage) -> Option<String> {
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
    fn klp_section(
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
        for r in &sec.relocs {
            self.r.tick_step()?;
            resolved.push(self.resolve_one(sec, r.sym, sec_vmlinux, stage, coming)?);
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
            let mut rep = RelocationReport {
                section: sec.name.clone(),
                index: i,
                target_section: tname.clone(),
                offset: r.offset,
                r_type: r.r_type,
                type_name: reloc::type_name(self.m.arch, r.r_type),
                symbol: sym.name.clone(),
                resolved: None,
                offline: false,
                addend: r.addend,
                expression: String::new(),
                value: None,
                bytes: None,
                status: "not_reached",
                note: None,
            };
            let Some(Some((s_val, offline))) = resolved.get(i).copied() else {
                rep.note = Some("symbol not resolved".into());
                self.relocs.push(rep);
                continue;
            };
            rep.resolved = Some(s_val);
            rep.offline = offline;
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
            };
            let was_blocked = self.blocked(stage);
            match reloc::apply(self.m.arch, &self.m.name, &input) {
                Ok(None) => rep.status = "none",
                Ok(Some(a)) => {
                    rep.expression = a.expression.to_string();
                    rep.value = a.value;
                    rep.bytes = a
                        .bytes
                        .as_ref()
                        .map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
                    rep.note = a.note.clone();
                    rep.status = if was_blocked {
                        "not_reached"
                    } else if a.overflow_unknown {
                        "needs_placement"
                    } else {
                        "applied"
                    };
                    let written = a.bytes.unwrap_or_else(|| vec![0xff; usize::from(a.width)]);
                    self.write_overlay(target, r.offset, &written)?;
                }
                Err(f) => {
                    rep.status = if was_blocked { "not_reached" } else { "failed" };
                    let kind = if f.lines[0].contains("overflow") {
                        ProblemKind::RelocationOverflow
                    } else if f.lines[0].contains("nonzero") {
                        ProblemKind::RelocationTargetNonzero
                    } else {
                        ProblemKind::RelocationType
                    };
                    let hint = match kind {
                        ProblemKind::RelocationOverflow => "the resolved address does not fit the relocation's field",
                        ProblemKind::RelocationTargetNonzero => {
                            "the bytes at the place are not zero: a relocation was applied twice or the object was pre-linked"
                        }
                        _ => "the kernel cannot apply this relocation type in a module",
                    };
                    let section = sec.name.clone();
                    let symbol = sym.name.clone();
                    self.problem(
                        kind,
                        stage,
                        f.lines,
                        f.errno,
                        Some(&symbol),
                        Some(&section),
                        None,
                        hint.into(),
                    );
                    self.fail(stage);
                }
            }
            self.relocs.push(rep);
        }
        bulk::free_with_points(resolved, self.r)
    }

    fn existing(&self, section: u32, offset: u64, width: usize) -> Vec<u8> {
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

    fn write_overlay(&mut self, section: u32, offset: u64, bytes: &[u8]) -> Result<(), Cancelled> {
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
                vec![format!(
                    "livepatch: symbol {} is not marked as a livepatch symbol",
                    sym.name
                )],
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
            Some(a) => Ok(Some((a, src == TableSource::Offline))),
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
    fn lookup_problem(
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
            klpsym_core::Verdict::Ambiguous => ProblemKind::Ambiguous,
            klpsym_core::Verdict::PositionNotFound => ProblemKind::PositionNotFound,
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

    // ---- step 2: klp_enable_patch() ---------------------------------------------------

    fn patch_enable(&mut self) -> Result<(), Cancelled> {
        let stage = Stage::PatchEnable;
        let m = self.m;
        let patch = match &m.patch {
            Ok(p) => p,
            Err(e) => {
                self.warn(format!(
                    "patch description not read ({e}): functions not checked"
                ));
                if !m.is_marked_livepatch() {
                    self.not_marked(&stage);
                }
                return Ok(());
            }
        };
        for n in &patch.notes {
            self.r.tick()?;
            self.warn(n.clone());
        }
        if !patch.certain {
            self.warn("the klp_patch was found by guessing between several candidates".into());
        }
        for (i, o) in patch.objects.iter().enumerate() {
            self.r.tick()?;
            if o.funcs_null {
                self.problem(
                    ProblemKind::InvalidPatchTable,
                    &stage,
                    vec![],
                    EINVAL,
                    None,
                    None,
                    Some(o.object_name()),
                    format!("klp_object[{i}].funcs is NULL: klp_enable_patch() returns -EINVAL silently"),
                );
                self.fail(&stage);
            }
        }
        if !self.m.is_marked_livepatch() {
            self.not_marked(&stage);
        }
        let mut obj_names = HashSet::with_capacity(patch.objects.len());
        for (i, o) in patch.objects.iter().enumerate() {
            self.r.tick()?;
            let oname = o.object_name().to_string();
            let loaded = self.t.is_loaded(&oname);
            let state = if loaded {
                ObjectState::Loaded
            } else if self.t.offline_modules.contains_key(&oname) {
                ObjectState::DeferredChecked
            } else {
                ObjectState::DeferredUnchecked
            };
            let mut funcs = Vec::with_capacity(o.funcs.len());
            for f in &o.funcs {
                self.r.tick()?;
                funcs.push(FuncReport {
                    old_name: f.old_name.clone(),
                    old_sympos: f.old_sympos,
                    verdict: None,
                    address: None,
                    new_func: f.new_func_symbol.clone(),
                });
            }
            self.objects.push(ObjectReport {
                name: oname.clone(),
                state,
                funcs,
            });
            if o.name.as_ref().is_some_and(|n| n.len() >= MODULE_NAME_LEN) {
                self.problem(
                    ProblemKind::InvalidPatchTable,
                    &stage,
                    vec![],
                    EINVAL,
                    None,
                    None,
                    Some(&oname),
                    format!(
                        "klp_object[{i}].name is {} bytes; module names are shorter than 56",
                        oname.len()
                    ),
                );
                self.fail(&stage);
                continue;
            }
            if !obj_names.insert(oname.clone()) {
                self.duplicate(
                    &stage,
                    &format!("/kernel/livepatch/{}/{oname}", self.m.name),
                    &oname,
                    &oname,
                );
                continue;
            }
            self.init_funcs(i, o, &stage)?;
            if loaded {
                self.object_loaded(i, o, &stage, None)?;
            } else {
                self.deferred.push(i);
            }
        }
        drop_set_with_points(obj_names, self.r)
    }

    fn not_marked(&mut self, stage: &Stage) {
        let name = self.m.name.clone();
        self.problem(
            ProblemKind::NotLivepatchModule,
            stage,
            vec![format!(
                "livepatch: module {name} is not marked as a livepatch module"
            )],
            EINVAL,
            None,
            None,
            None,
            "add MODULE_INFO(livepatch, \"Y\") to the module source".into(),
        );
        self.fail(stage);
    }

    fn duplicate(&mut self, stage: &Stage, path: &str, kobj: &str, object: &str) {
        self.problem(
            ProblemKind::DuplicateSysfsName,
            stage,
            vec![
                format!("sysfs: cannot create duplicate filename '{path}'"),
                format!(
                    "kobject_add_internal failed for {kobj} with -EEXIST, don't try to register things with the same name in the same directory."
                ),
            ],
            EEXIST,
            None,
            None,
            Some(object),
            "two entries with the same name (and position) in one object".into(),
        );
        self.fail(stage);
    }

    /// `klp_init_func()` for each function of object `i`.
    fn init_funcs(&mut self, i: usize, o: &KlpObjectDesc, stage: &Stage) -> Result<(), Cancelled> {
        let oname = o.object_name().to_string();
        let mut seen = HashSet::with_capacity(o.funcs.len());
        for (j, f) in o.funcs.iter().enumerate() {
            self.r.tick()?;
            let silent = |what: String| (ProblemKind::InvalidPatchTable, what);
            let bad = match (&f.old_name, &f.new_func) {
                (None, _) => Some(silent(format!(
                    "klp_object[{i}].funcs[{j}].old_name is NULL or unreadable"
                ))),
                (Some(_), Pointer::Null) => Some(silent(format!(
                    "klp_object[{i}].funcs[{j}].new_func is NULL"
                ))),
                (Some(n), _) if n.len() >= self.t.rules.ksym_name_len => Some(silent(format!(
                    "klp_object[{i}].funcs[{j}].old_name is {} bytes; KSYM_NAME_LEN is {}",
                    n.len(),
                    self.t.rules.ksym_name_len
                ))),
                _ => None,
            };
            if let Some((kind, hint)) = bad {
                self.problem(
                    kind,
                    stage,
                    vec![],
                    EINVAL,
                    f.old_name.as_deref(),
                    None,
                    Some(&oname),
                    hint,
                );
                self.fail(stage);
                continue;
            }
            let n = f.old_name.as_deref().unwrap_or_default();
            let kobj = format!("{n},{}", f.old_sympos.max(1));
            if !seen.insert(kobj.clone()) {
                let path = format!("/kernel/livepatch/{}/{oname}/{kobj}", self.m.name);
                self.duplicate(stage, &path, &kobj, &oname);
            }
        }
        drop_set_with_points(seen, self.r)
    }

    /// `klp_init_object_loaded()`: the object's klp sections, then its functions.
    fn object_loaded(
        &mut self,
        i: usize,
        o: &KlpObjectDesc,
        stage: &Stage,
        coming: Option<&str>,
    ) -> Result<(), Cancelled> {
        let m = self.m;
        let oname = o.object_name().to_string();
        let all_here = !self.t.rules.vmlinux_relocs_at_load;
        if oname != "vmlinux" || all_here {
            for sec in &m.klp_sections {
                self.r.tick()?;
                if let Some(obj) = self.section_object(sec, stage) {
                    if obj == oname {
                        self.klp_section(sec, &obj, stage, coming)?;
                    }
                }
            }
        }
        for (j, f) in o.funcs.iter().enumerate() {
            // A lookup each: see klp_section.
            self.r.tick_step()?;
            let Some(name) = &f.old_name else { continue };
            let (out, _, table) = self.t.lookup(&oname, name, f.old_sympos, coming);
            if let Some(fr) = self.objects.get_mut(i).and_then(|x| x.funcs.get_mut(j)) {
                fr.verdict = Some(out.verdict);
                fr.address = out.address;
            }
            self.lookup_problem(&out, table, stage, Some(name), None)?;
        }
        Ok(())
    }

    // ---- step 3: klp_module_coming() --------------------------------------------------

    fn modules_coming(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        let Ok(patch) = &m.patch else { return Ok(()) };
        for i in std::mem::take(&mut self.deferred) {
            self.r.tick()?;
            let o = &patch.objects[i];
            let oname = o.object_name().to_string();
            if !self.t.offline_modules.contains_key(&oname) {
                continue;
            }
            let stage = Stage::ModuleComing {
                module: oname.clone(),
            };
            let before = self.problems.len();
            self.object_loaded(i, o, &stage, Some(&oname))?;
            // The kernel adds two lines after the first failure of this module.
            let mut first = None;
            for (k, p) in self.problems[before..].iter().enumerate() {
                self.r.tick()?;
                if p.stage == stage && p.reached {
                    first = Some(k);
                    break;
                }
            }
            if let Some(k) = first {
                let p = &mut self.problems[before + k];
                let ret = -p.errno;
                p.log.push(format!(
                    "livepatch: failed to initialize patch '{}' for module '{oname}' ({ret})",
                    self.m.name
                ));
                p.log.push(format!(
                    "livepatch: patch '{}' failed for module '{oname}', refusing to load module '{oname}'",
                    self.m.name
                ));
            }
        }
        Ok(())
    }

    /// Sections for an object the patch does not list are never applied by the kernel.
    fn orphan_sections(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        let Ok(patch) = &m.patch else { return Ok(()) };
        let mut listed: HashSet<&str> = HashSet::new();
        for o in &patch.objects {
            self.r.tick()?;
            listed.insert(o.object_name());
        }
        for sec in &m.klp_sections {
            self.r.tick()?;
            if let Some(p) = parse_klp_section(sec.name.as_bytes()) {
                if p.object != "vmlinux" && !listed.contains(p.object.as_str()) {
                    self.warn(format!(
                        "section {}: the patch has no klp_object '{}', so the kernel never applies it",
                        sec.name, p.object
                    ));
                }
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<CheckReport, Cancelled> {
        self.orphan_sections()?;
        let verdict = Verdict::of_with(&self.problems, &self.objects, self.r)?;
        let layouts_source = match &self.m.patch {
            Ok(p) => p.layouts.source.to_string(),
            Err(_) => "none".into(),
        };
        // The temporaries: section copies (big buffers), the warning set and the hints.
        for (_, o) in std::mem::take(&mut self.overlay) {
            bulk::free_with_points(o, self.r)?;
        }
        drop_set_with_points(std::mem::take(&mut self.warned), self.r)?;
        for h in std::mem::take(&mut self.hints) {
            drop(h);
            self.r.tick()?;
        }
        Ok(CheckReport {
            module: self.m.name.clone(),
            arch: self.m.arch,
            kernel_version: format!("{}.{}", self.t.rules.version.0, self.t.rules.version.1),
            ksym_name_len: self.t.rules.ksym_name_len,
            layouts_source,
            verdict,
            problems: self.problems,
            objects: self.objects,
            relocations: self.relocs,
            warnings: self.warnings,
        })
    }
}

/// Drops a set element by element with ticks between (each element may own heap memory).
fn drop_set_with_points<T>(set: HashSet<T>, resched: &mut Resched) -> Result<(), Cancelled> {
    for x in set {
        drop(x);
        resched.tick()?;
    }
    Ok(())
}
