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
use klpsym_core::{LookupOutcome, SymbolTable};

const EINVAL: i32 = 22;
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const MODULE_NAME_LEN: usize = 56;

/// Checks `module` against `target` and reports what the kernel would do.
pub fn check(module: &LivepatchModule<'_>, target: &Target<'_>) -> CheckReport {
    let mut c = Ctx::new(module, target);
    c.module_load();
    c.patch_enable();
    c.modules_coming();
    c.finish()
}

struct Ctx<'m, 'd, 't> {
    m: &'m LivepatchModule<'d>,
    t: &'m Target<'t>,
    problems: Vec<Problem>,
    relocs: Vec<RelocationReport>,
    warnings: Vec<String>,
    objects: Vec<ObjectReport>,
    /// Section bytes as relocations write them (unknown values written as 0xff).
    overlay: HashMap<u32, Vec<u8>>,
    failed: HashSet<String>,
    deferred: Vec<usize>,
    bad_sections: HashSet<u32>,
}

fn stage_key(s: &Stage) -> String {
    match s {
        Stage::ModuleLoad => "load".into(),
        Stage::PatchEnable => "enable".into(),
        Stage::ModuleComing { module } => format!("coming:{module}"),
    }
}

impl<'m, 'd, 't> Ctx<'m, 'd, 't> {
    fn new(m: &'m LivepatchModule<'d>, t: &'m Target<'t>) -> Self {
        Ctx {
            m,
            t,
            problems: Vec::new(),
            relocs: Vec::new(),
            warnings: Vec::new(),
            objects: Vec::new(),
            overlay: HashMap::new(),
            failed: HashSet::new(),
            deferred: Vec::new(),
            bad_sections: HashSet::new(),
        }
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

    fn module_load(&mut self) {
        let stage = Stage::ModuleLoad;
        let name = self.m.name.clone();
        let mut any = false;
        for s in self.m.elf.symbols.iter().skip(1) {
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
        let nsec = self.m.elf.sections.len() as u32;
        for sec in &self.m.klp_sections {
            if sec.target >= nsec
                || self.m.elf.sections[sec.target as usize].flags & elf::SHF_ALLOC == 0
            {
                self.warnings.push(format!(
                    "section {} patches section {}, which is not allocated: the loader skips it",
                    sec.name, sec.target
                ));
                continue;
            }
            if !self.t.rules.vmlinux_relocs_at_load {
                continue;
            }
            match self.section_object(sec, &stage) {
                Some(obj) if obj == "vmlinux" => self.klp_section(sec, &obj, &stage, None),
                _ => {}
            }
        }
    }

    /// Parses the section name; reports a malformed one.
    fn section_object(&mut self, sec: &KlpRelaSection, stage: &Stage) -> Option<String> {
        match parse_klp_section(sec.name.as_bytes()) {
            Some(p) => {
                if let Some(l) = p.lenient {
                    let w = format!("section {}: {l}", sec.name);
                    if !self.warnings.contains(&w) {
                        self.warnings.push(w);
                    }
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
    ) {
        let sec_vmlinux = sec_obj == "vmlinux";
        let mut resolved: Vec<Option<(u64, bool)>> = Vec::with_capacity(sec.relocs.len());
        for r in &sec.relocs {
            resolved.push(self.resolve_one(sec, r.sym, sec_vmlinux, stage, coming));
        }
        let target = sec.target;
        let tname = self
            .m
            .elf
            .sections
            .get(target as usize)
            .map_or_else(String::new, |s| s.name.clone());
        for (i, r) in sec.relocs.iter().enumerate() {
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
                    self.write_overlay(target, r.offset, &written);
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

    fn write_overlay(&mut self, section: u32, offset: u64, bytes: &[u8]) {
        let m = self.m;
        let o = self.overlay.entry(section).or_insert_with(|| {
            let size = m.elf.sections.get(section as usize).map_or(0, |s| s.size) as usize;
            m.elf.read_bytes(section, 0, size).unwrap_or_default()
        });
        let start = offset as usize;
        if let Some(dst) = start
            .checked_add(bytes.len())
            .and_then(|end| o.get_mut(start..end))
        {
            dst.copy_from_slice(bytes);
        }
    }

    /// One symbol of `klp_resolve_symbols()`: Some((S, offline)) when resolved.
    fn resolve_one(
        &mut self,
        sec: &KlpRelaSection,
        sym_index: u32,
        sec_vmlinux: bool,
        stage: &Stage,
        coming: Option<&str>,
    ) -> Option<(u64, bool)> {
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
            return None;
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
            return None;
        };
        if let Some(l) = &k.lenient {
            let w = format!("symbol {}: {l}", sym.name);
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
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
            return None;
        }
        let (out, src, table) = self.t.lookup(&k.object, &k.name, k.sympos, coming);
        if self.lookup_problem(&out, table, stage, Some(&sym.name), Some(&sec.name)) {
            return None;
        }
        Some((out.address.unwrap_or(0), src == TableSource::Offline))
            .filter(|_| out.address.is_some())
            .or_else(|| {
                let w = format!(
                    "{}: resolved, but the target hides addresses: values not computed",
                    sym.name
                );
                if !self.warnings.contains(&w) {
                    self.warnings.push(w);
                }
                None
            })
    }

    /// Reports a failed lookup; true when it failed.
    fn lookup_problem(
        &mut self,
        out: &LookupOutcome,
        table: &SymbolTable,
        stage: &Stage,
        symbol: Option<&str>,
        section: Option<&str>,
    ) -> bool {
        let Some(msg) = &out.message else {
            return false;
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
            _ => not_found_hint(self.t.kernel, &name, &out.object),
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
        true
    }

    // ---- step 2: klp_enable_patch() ---------------------------------------------------

    fn patch_enable(&mut self) {
        let stage = Stage::PatchEnable;
        let patch = match &self.m.patch {
            Ok(p) => p.clone(),
            Err(e) => {
                self.warnings.push(format!(
                    "patch description not read ({e}): functions not checked"
                ));
                if !self.m.is_marked_livepatch() {
                    self.not_marked(&stage);
                }
                return;
            }
        };
        self.warnings.extend(patch.notes.iter().cloned());
        if !patch.certain {
            self.warnings
                .push("the klp_patch was found by guessing between several candidates".into());
        }
        for (i, o) in patch.objects.iter().enumerate() {
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
        let mut obj_names = HashSet::new();
        for (i, o) in patch.objects.iter().enumerate() {
            let oname = o.object_name().to_string();
            let loaded = self.t.is_loaded(&oname);
            let state = if loaded {
                ObjectState::Loaded
            } else if self.t.offline_modules.contains_key(&oname) {
                ObjectState::DeferredChecked
            } else {
                ObjectState::DeferredUnchecked
            };
            self.objects.push(ObjectReport {
                name: oname.clone(),
                state,
                funcs: o
                    .funcs
                    .iter()
                    .map(|f| FuncReport {
                        old_name: f.old_name.clone(),
                        old_sympos: f.old_sympos,
                        verdict: None,
                        address: None,
                        new_func: f.new_func_symbol.clone(),
                    })
                    .collect(),
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
            self.init_funcs(i, o, &stage);
            if loaded {
                self.object_loaded(i, o, &stage, None);
            } else {
                self.deferred.push(i);
            }
        }
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
    fn init_funcs(&mut self, i: usize, o: &KlpObjectDesc, stage: &Stage) {
        let oname = o.object_name().to_string();
        let mut seen = HashSet::new();
        for (j, f) in o.funcs.iter().enumerate() {
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
    }

    /// `klp_init_object_loaded()`: the object's klp sections, then its functions.
    fn object_loaded(&mut self, i: usize, o: &KlpObjectDesc, stage: &Stage, coming: Option<&str>) {
        let oname = o.object_name().to_string();
        let all_here = !self.t.rules.vmlinux_relocs_at_load;
        if oname != "vmlinux" || all_here {
            for sec in &self.m.klp_sections {
                if let Some(obj) = self.section_object(sec, stage) {
                    if obj == oname {
                        self.klp_section(sec, &obj, stage, coming);
                    }
                }
            }
        }
        for (j, f) in o.funcs.iter().enumerate() {
            let Some(name) = &f.old_name else { continue };
            let (out, src, table) = self.t.lookup(&oname, name, f.old_sympos, coming);
            if let Some(fr) = self.objects.get_mut(i).and_then(|x| x.funcs.get_mut(j)) {
                fr.verdict = Some(out.verdict);
                fr.address = out.address;
            }
            let _ = src;
            self.lookup_problem(&out, table, stage, Some(name), None);
        }
    }

    // ---- step 3: klp_module_coming() --------------------------------------------------

    fn modules_coming(&mut self) {
        let Ok(patch) = &self.m.patch else { return };
        let patch = patch.clone();
        for i in std::mem::take(&mut self.deferred) {
            let o = &patch.objects[i];
            let oname = o.object_name().to_string();
            if !self.t.offline_modules.contains_key(&oname) {
                continue;
            }
            let stage = Stage::ModuleComing {
                module: oname.clone(),
            };
            let before = self.problems.len();
            self.object_loaded(i, o, &stage, Some(&oname));
            // The kernel adds two lines after the first failure of this module.
            let first = self.problems[before..]
                .iter()
                .position(|p| p.stage == stage && p.reached);
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
    }

    /// Sections for an object the patch does not list are never applied by the kernel.
    fn orphan_sections(&mut self) {
        let listed: HashSet<String> = match &self.m.patch {
            Ok(p) => p
                .objects
                .iter()
                .map(|o| o.object_name().to_string())
                .collect(),
            Err(_) => return,
        };
        for sec in &self.m.klp_sections {
            if let Some(p) = parse_klp_section(sec.name.as_bytes()) {
                if p.object != "vmlinux" && !listed.contains(&p.object) {
                    self.warnings.push(format!(
                        "section {}: the patch has no klp_object '{}', so the kernel never applies it",
                        sec.name, p.object
                    ));
                }
            }
        }
    }

    fn finish(mut self) -> CheckReport {
        self.orphan_sections();
        let verdict = Verdict::of(&self.problems, &self.objects);
        let layouts_source = match &self.m.patch {
            Ok(p) => p.layouts.source.to_string(),
            Err(_) => "none".into(),
        };
        CheckReport {
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
        }
    }
}
