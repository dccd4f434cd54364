//! `klp_enable_patch()`, called from the patch module's init: the patch tables, the
//! livepatch modinfo tag, sysfs names, and `klp_init_object_loaded()` for every loaded
//! object (its klp sections, then `klp_find_object_symbol()` for each function).

use std::collections::HashSet;

use super::{drop_set_with_points, Ctx, EEXIST, EINVAL, MODULE_NAME_LEN};
use crate::patch::{Discovery, KlpObjectDesc, Pointer};
use crate::report::*;
use klpsym_core::resched::Cancelled;

impl Ctx<'_, '_, '_, '_> {
    pub(super) fn patch_enable(&mut self) -> Result<(), Cancelled> {
        let stage = Stage::PatchEnable;
        let m = self.m;
        if m.is_ordinary_module() {
            // No klp_enable_patch() call: the module's init does what it does, livepatch is
            // never involved.
            return Ok(());
        }
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
        if patch.discovery == Discovery::KlpBuild && patch.objects.is_empty() {
            // scripts/livepatch/init.c (6.19+, pr_fmt KBUILD_MODNAME): an empty
            // .init.klp_objects fails before klp_enable_patch() is called.
            let line = format!("{}: nothing to patch!", m.name);
            self.problem(
                ProblemKind::InvalidPatchTable,
                &stage,
                vec![line],
                EINVAL,
                None,
                Some(crate::patch::KLP_OBJECTS_SEC),
                None,
                "klp-build's .init.klp_objects section holds no struct klp_object_ext".into(),
            );
            self.fail(&stage);
            return Ok(());
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
            } else if self.t.unplaced_modules.contains_key(&oname) {
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

    pub(super) fn not_marked(&mut self, stage: &Stage) {
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
    pub(super) fn object_loaded(
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
}
