//! `check`: what the kernel does with a livepatch module, step by step, in its order.
//!
//! The walk, one file per step of the kernel's path (5.8+ unless noted):
//! 1. **module load** (`load_module()`): [`loader`] — signature, `module_layout`, vermagic,
//!    livepatch support, then `simplify_symbols()` (unknown symbols, symbol versions,
//!    namespaces); [`klp_relocs`] — `apply_relocations()`: a SHF_RELA_LIVEPATCH section's name
//!    is parsed and, for `vmlinux`, its symbols resolved (`klp_resolve_symbols`) and its
//!    relocations applied (before 5.8 all klp sections waited for the enable step).
//! 2. **patch enable** ([`enable`]) — the module's init calls `klp_enable_patch()`: table
//!    checks, `module %s is not marked as a livepatch module`, then per object: sysfs names,
//!    and for loaded objects `klp_init_object_loaded()`: the object's klp sections (modules
//!    only since 5.8), then `klp_find_object_symbol()` for each function.
//!    Then `__klp_enable_patch()` ([`ftrace`]): each vmlinux function needs an ftrace call
//!    site (`klp_patch_func()`), or the enable fails with -EINVAL.
//! 3. **module coming** ([`coming`]) — for each object whose module is not loaded, the same
//!    `klp_init_object_loaded()` when it loads; failure refuses that module.
//!
//! The kernel stops at the first fatal problem of a step; this walk goes on and marks later
//! problems `reached: false`, so an author sees everything at once. Not modelled: the kallsyms
//! size lookups after a successful function lookup (they fail only for symbols outside the
//! kallsyms text ranges), ordinary relocation sections (values depend on the module layout),
//! `klp_is_patch_compatible()` (needs the other loaded patches).

mod coming;
mod enable;
mod ftrace;
mod klp_relocs;
mod loader;
mod module_relocs;
mod validity;

use std::collections::{HashMap, HashSet};

use crate::module::LivepatchModule;
use crate::report::*;
use crate::target::Target;
use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};

const EINVAL: i32 = 22;
const ENOENT: i32 = 2;
const ENOEXEC: i32 = 8;
const EEXIST: i32 = 17;
const MODULE_NAME_LEN: usize = 56;
/// Checks `module` against `target` and reports what the kernel would do.
pub fn check(module: &LivepatchModule<'_>, target: &Target<'_>) -> CheckReport {
    check_with(module, target, &mut Resched::none())
        .expect("a Resched without a cancel flag or callback never cancels")
}

/// [`check`], reaching reschedule points through `resched`: a tick per symbol, section,
/// relocation, object and function, and for every lookup against the target's tables (whose
/// name indexes are built first, with points; a patch asks no address, so no address index
/// is built). `Err(Cancelled)` when a point said stop.
pub fn check_with(
    module: &LivepatchModule<'_>,
    target: &Target<'_>,
    resched: &mut Resched,
) -> Result<CheckReport, Cancelled> {
    target.kernel.build_name_index(resched)?;
    for t in target.unplaced_modules.values() {
        t.build_name_index(resched)?;
    }
    resched.tick_step()?;
    let mut c = Ctx::new(module, target, resched);
    c.r.tick_step()?;
    // A file the module loader refuses by its ELF header (another architecture) is not
    // read further by the kernel: nothing after it is reported, not even as not reached.
    if c.elf_header_refused() {
        return c.finish();
    }
    // A clock read between the stages: each ends in steps that are not counted items.
    c.module_load()?;
    c.r.tick_step()?;
    c.patch_enable()?;
    c.r.tick_step()?;
    c.patch_functions()?;
    c.r.tick_step()?;
    c.modules_coming()?;
    c.r.tick_step()?;
    c.finish()
}

struct Ctx<'m, 'd, 't, 'r> {
    m: &'m LivepatchModule<'d>,
    t: &'m Target<'t>,
    r: &'r mut Resched,
    problems: Vec<Problem>,
    relocs: Vec<RelocationReport>,
    /// The module's ordinary (non-klp) relocations.
    ordinary: Vec<RelocationReport>,
    /// Where the loader may place the module (see [`Target::module_window`]).
    window: Option<[(u64, u64); 2]>,
    warnings: Vec<String>,
    /// The warnings already given, so each is given once without a walk over the list.
    warned: HashSet<String>,
    objects: Vec<ObjectReport>,
    /// The module loader's checks, in order.
    loader_checks: Vec<LoaderCheck>,
    /// Whether the kernel reaches the next loader check (no earlier failure of the load).
    loader_reached: bool,
    /// The ELF header check's line when it passed (listed after the signature, as the kernel
    /// runs it).
    header_check: Option<LoaderCheck>,
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
            ordinary: Vec::new(),
            window: t.module_window(),
            warnings: Vec::new(),
            warned: HashSet::with_capacity(names),
            objects: Vec::with_capacity(objects),
            loader_checks: Vec::with_capacity(8),
            loader_reached: true,
            header_check: None,
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

    /// The lines the kernel logs, in order (see [`CheckReport::kernel_log`]).
    fn kernel_log(&mut self, verdict: &PatchVerdict) -> Result<Vec<LogLine>, Cancelled> {
        let mut out = Vec::new();
        let name = self.m.name.clone();
        let push = |out: &mut Vec<LogLine>, stage: &Stage, line: String| {
            out.push(LogLine {
                stage: stage.clone(),
                line,
            })
        };
        for p in &self.problems {
            self.r.tick()?;
            if p.reached && matches!(p.stage, Stage::ModuleLoad | Stage::PatchEnable) {
                // A function without an ftrace location fails inside __klp_enable_patch(),
                // after its notice; klp_cancel_transition() then completes the unpatching.
                let enabling = p.kind == ProblemKind::NoFtraceLocation;
                if enabling {
                    push(
                        &mut out,
                        &p.stage,
                        format!("livepatch: enabling patch '{name}'"),
                    );
                }
                for l in &p.log {
                    push(&mut out, &p.stage, l.clone());
                }
                if enabling {
                    push(
                        &mut out,
                        &p.stage,
                        format!("livepatch: '{name}': unpatching complete"),
                    );
                }
            }
        }
        if !matches!(
            verdict.kind,
            PatchVerdictKind::Accepted
                | PatchVerdictKind::Unverified
                | PatchVerdictKind::RefusedWhenModuleLoads
        ) {
            return Ok(out);
        }
        // __klp_enable_patch() and the transition (kernel/livepatch/core.c, transition.c):
        // pr_notice in every supported version; the transition completes once every task
        // has switched, so the last line may come later.
        let e = Stage::PatchEnable;
        push(&mut out, &e, format!("livepatch: enabling patch '{name}'"));
        push(
            &mut out,
            &e,
            format!("livepatch: '{name}': starting patching transition"),
        );
        push(
            &mut out,
            &e,
            format!("livepatch: '{name}': patching complete"),
        );
        for o in &self.objects {
            self.r.tick()?;
            if o.state != ObjectState::DeferredChecked {
                continue;
            }
            let stage = Stage::ModuleComing {
                module: o.name.clone(),
            };
            let failed: Vec<&Problem> = self
                .problems
                .iter()
                .filter(|p| p.reached && p.stage == stage)
                .collect();
            if failed.is_empty() {
                push(
                    &mut out,
                    &stage,
                    format!(
                        "livepatch: applying patch '{name}' to loading module '{}'",
                        o.name
                    ),
                );
            } else {
                for p in failed {
                    for l in &p.log {
                        push(&mut out, &stage, l.clone());
                    }
                }
            }
        }
        Ok(out)
    }

    fn finish(mut self) -> Result<CheckReport, Cancelled> {
        self.orphan_sections()?;
        self.r.tick_step()?;
        let ordinary = self.m.is_ordinary_module();
        let verdict = PatchVerdict::of_module(&self.problems, &self.objects, ordinary, self.r)?;
        self.r.tick_step()?;
        let kernel_log = self.kernel_log(&verdict)?;
        self.r.tick_step()?;
        let layouts_source = match &self.m.patch {
            Ok(p) => p.layouts.source.to_string(),
            Err(_) => "none".into(),
        };
        // The temporaries: section copies (big buffers), the warning set and the hints.
        for (_, o) in std::mem::take(&mut self.overlay) {
            bulk::free_with_points(o, self.r)?;
        }
        self.r.tick_step()?;
        drop_set_with_points(std::mem::take(&mut self.warned), self.r)?;
        self.r.tick_step()?;
        for h in std::mem::take(&mut self.hints) {
            drop(h);
            self.r.tick()?;
        }
        self.r.tick_step()?;
        Ok(CheckReport {
            module: self.m.name.clone(),
            arch: self.m.arch,
            kernel_version: format!("{}.{}", self.t.rules.version.0, self.t.rules.version.1),
            ksym_name_len: self.t.rules.ksym_name_len,
            layouts_source,
            verdict,
            kernel_log,
            loader_checks: self.loader_checks,
            problems: self.problems,
            objects: self.objects,
            relocations: self.relocs,
            ordinary_relocations: self.ordinary,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of names owns an allocation per element: each is dropped with a point after it,
    /// never the whole set in one stretch.
    #[test]
    fn a_set_is_dropped_with_a_point_per_element() {
        let set: HashSet<String> = (0..1000).map(|i| format!("name{i}")).collect();
        let mut r = Resched::none();
        drop_set_with_points(set, &mut r).expect("never cancels");
        assert_eq!(r.stats().items, 1000);
    }
}
