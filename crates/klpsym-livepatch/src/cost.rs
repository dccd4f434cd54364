//! What loading a patch costs the target kernel: every `klp_find_object_symbol()` call the
//! kernel makes, the kallsyms entries its walks touch, and the longest stretch it spends
//! between two reschedule points, computed with the target version's own algorithm.
//!
//! The walks, per version (kernel/livepatch/core.c `klp_find_object_symbol`, kernel/kallsyms.c,
//! kernel/module.c or kernel/module/kallsyms.c `module_kallsyms_on_each_symbol`):
//! - **vmlinux before 6.2**: `kallsyms_on_each_symbol()` walks the table from index 0 in
//!   address order and stops at the `sympos`-th match (`sympos` > 0) or at the second match
//!   (`sympos` 0); a unique or missing name costs the whole table. Before 5.12 the walk then
//!   went on through every module's symbols unless it had stopped (5.10.y dropped that tail in
//!   5.10.220 with the backport of "kallsyms: refactor {,module_}kallsyms_on_each_symbol").
//!   `cond_resched()` after each entry since 5.17 ("livepatch: Avoid CPU hogging with
//!   cond_resched", f5bdb34bf0c9; never backported to 5.10.y or 5.15.y).
//! - **vmlinux since 6.2**: `kallsyms_on_each_match_symbol()` binary-searches the name-sorted
//!   `kallsyms_seqs_of_names` (`kallsyms_lookup_names()`: one compare per probe, then a scan
//!   backwards and forwards over the equal names and one entry past each end), then calls back
//!   on the matches with a `cond_resched()` after each. No point during the search itself.
//! - **modules before 6.2**: every formed module, newest first (new modules are added at the
//!   list head), every non-undefined symbol, no reschedule point; the stop rule as above.
//!   5.10.220+ stops only the module it is in (`break` instead of `goto out`): it always walks
//!   every module.
//! - **modules since 6.2**: `module_kallsyms_on_each_symbol(objname, ...)` walks only the named
//!   module's symbols (one name compare per module ahead of it, not counted as entries).
//! - A lookup of 5.x before 5.12 (and 5.10.y before 5.10.220) takes `module_mutex` first: under
//!   voluntary preemption its `might_sleep()` is a reschedule point. Since then only module
//!   lookups take it.
//!
//! When the kernel looks (5.8+): the `.klp.rela.vmlinux.*` relocations while the module loads
//! (`apply_relocations()`), one lookup per relocation entry, not per distinct symbol; then in
//! `klp_enable_patch()`, object by object, the object's own klp relocations (module objects)
//! and one lookup per function; an object whose module is not loaded yet is resolved when that
//! module loads (`klp_module_coming()`). Before 5.8 every klp section waited for the enable.

use klpsym_core::normalize_module_name;
use klpsym_core::resched::{Cancelled, Resched};
use serde::Serialize;

use crate::module::LivepatchModule;
use crate::names::{parse_klp_section, parse_klp_symbol};
use crate::target::{Fact, Target};

mod walks;
use walks::*;

/// How the target kernel preempts (its CONFIG_PREEMPT_* choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Preemption {
    /// CONFIG_PREEMPT_NONE: only `cond_resched()` gives the CPU away.
    None,
    /// CONFIG_PREEMPT_VOLUNTARY (also PREEMPT_DYNAMIC booted voluntary, Debian's 5.10-6.x
    /// default): `cond_resched()` and `might_sleep()` points; no preemption at the tick.
    Voluntary,
    /// CONFIG_PREEMPT (or dynamic full): preempted at any tick; `cond_resched()` is a no-op.
    Full,
    /// CONFIG_PREEMPT_LAZY (Debian 7.x): `cond_resched()` is a no-op; a runnable task gets the
    /// CPU at the next tick (the lazy flag is promoted in `sched_tick()`).
    Lazy,
}

impl Preemption {
    /// From a kernel config: the model it boots with.
    pub fn from_config(enabled: impl Fn(&str) -> bool) -> Option<Preemption> {
        Some(if enabled("CONFIG_PREEMPT_LAZY") {
            Preemption::Lazy
        } else if enabled("CONFIG_PREEMPT") || enabled("CONFIG_PREEMPT_RT") {
            Preemption::Full
        } else if enabled("CONFIG_PREEMPT_VOLUNTARY") {
            Preemption::Voluntary
        } else if enabled("CONFIG_PREEMPT_NONE") {
            Preemption::None
        } else {
            return None;
        })
    }

    /// What distributions build for `version` when the config is not known: voluntary up to
    /// 6.x, lazy since 7.0 (x86 and arm64 select ARCH_HAS_PREEMPT_LAZY, which leaves only
    /// full and lazy to choose from).
    pub fn assumed(version: (u32, u32)) -> Preemption {
        if version >= (7, 0) {
            Preemption::Lazy
        } else {
            Preemption::Voluntary
        }
    }

    fn preemptible(self) -> bool {
        matches!(self, Preemption::Full | Preemption::Lazy)
    }

    /// `cond_resched()` gives the CPU away (a no-op under full and lazy preemption).
    fn cond_resched_yields(self) -> bool {
        matches!(self, Preemption::None | Preemption::Voluntary)
    }

    /// `might_sleep()` (every `mutex_lock()`) is a reschedule point.
    fn might_sleep_yields(self) -> bool {
        self == Preemption::Voluntary
    }
}

/// The inputs of the estimate that do not come from the tables.
#[derive(Debug, Clone)]
pub struct CostModel {
    /// The target's preemption model and where it was learned.
    pub preemption: Fact<Preemption>,
    /// CONFIG_HZ (a tick bounds a hold under full and lazy preemption).
    pub hz: u32,
    /// Nanoseconds per kallsyms entry visited, and where that figure comes from.
    pub visit_ns: Fact<f64>,
    /// A longest hold above this many milliseconds is warned about.
    pub hold_warn_ms: f64,
}

/// When a group of lookups happens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// While the patch module loads (`apply_relocations()`).
    PatchLoad,
    /// In `klp_enable_patch()`.
    PatchEnable,
    /// When this module loads later (`klp_module_coming()`).
    ModuleLoad(String),
}

/// The lookups of one object in one phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectCost {
    /// The object whose symbols are looked up (`vmlinux` or a module).
    pub object: String,
    /// When.
    pub phase: Phase,
    /// One per klp relocation entry.
    pub relocation_lookups: u64,
    /// One per replaced function.
    pub function_lookups: u64,
    /// kallsyms entries the walks of these lookups touch.
    pub symbols_visited: u64,
}

/// The kernel's resolution cost for one patch on one kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolutionCost {
    /// False when the module loader refuses the patch before its first lookup: then the
    /// kernel walks nothing and every count below is zero.
    pub reached: bool,
    /// Which walks the version uses, in a few words.
    pub algorithm: String,
    /// The preemption model and its source.
    pub preemption: Preemption,
    /// Where the preemption model was learned.
    pub preemption_source: String,
    /// Every `klp_find_object_symbol()` call.
    pub lookups: u64,
    /// Split by object and phase, in the kernel's order.
    pub by_object: Vec<ObjectCost>,
    /// kallsyms entries all walks touch.
    pub symbols_visited: u64,
    /// 6.2+: calls of `klp_match_callback()`, one per vmlinux match the name-sorted lookups
    /// call back (up to the position sought, or the second match); 0 before 6.2.
    pub match_callbacks: u64,
    /// The most entries visited between two reschedule points.
    pub longest_unbroken_visits: u64,
    /// Nanoseconds per entry the estimate uses.
    pub visit_ns: f64,
    /// Where that figure comes from.
    pub visit_ns_source: String,
    /// `symbols_visited` x `visit_ns`.
    pub estimated_cpu_ms: f64,
    /// How long the CPU is held at most: `longest_unbroken_visits` x `visit_ns`, bounded by a
    /// tick under full and lazy preemption.
    pub estimated_longest_hold_ms: f64,
    /// Set when the longest hold exceeds the threshold: what it means and what shortens it.
    pub warning: Option<String>,
}

impl ResolutionCost {
    /// The cost of a patch the kernel refuses before its first lookup (the module loader's
    /// checks): nothing, said so.
    pub fn not_reached(&self) -> ResolutionCost {
        ResolutionCost {
            reached: false,
            algorithm: "not reached: the module loader refuses the module before any lookup".into(),
            lookups: 0,
            by_object: Vec::new(),
            symbols_visited: 0,
            match_callbacks: 0,
            longest_unbroken_visits: 0,
            estimated_cpu_ms: 0.0,
            estimated_longest_hold_ms: 0.0,
            warning: None,
            ..self.clone()
        }
    }

    /// True for [`ResolutionCost::not_reached`].
    pub fn is_reached(&self) -> bool {
        self.reached
    }
}

/// The resolution cost of `module` on `target`.
pub fn resolution_cost(
    module: &LivepatchModule<'_>,
    target: &Target<'_>,
    model: &CostModel,
) -> ResolutionCost {
    resolution_cost_with(module, target, model, &mut Resched::none())
        .expect("a Resched without a cancel flag or callback never cancels")
}

/// [`resolution_cost`], reaching reschedule points through `resched` while it builds its
/// views of the target's table (a tick per symbol; the name sort in steps).
pub fn resolution_cost_with(
    module: &LivepatchModule<'_>,
    target: &Target<'_>,
    model: &CostModel,
    resched: &mut Resched,
) -> Result<ResolutionCost, Cancelled> {
    let v = target.rules.version;
    let sublevel = target.rules.sublevel;
    let mut m = Meter {
        preemption: model.preemption.value,
        run: 0,
        longest: 0,
        total: 0,
        callbacks: 0,
    };
    let ksym = target.rules.ksym_name_len;
    // klp relocation lookups by the section's object: (object of the symbol, name, pos).
    let mut relocs: Vec<(String, Vec<KlpRef>)> = Vec::new();
    for sec in &module.klp_sections {
        let Some(sn) = parse_klp_section(sec.name.as_bytes()) else {
            continue;
        };
        let entry = match relocs.iter().position(|(o, _)| *o == sn.object) {
            Some(i) => i,
            None => {
                relocs.push((sn.object.clone(), Vec::new()));
                relocs.len() - 1
            }
        };
        for r in &sec.relocs {
            let Some(sym) = module.elf.symbols.get(r.sym as usize) else {
                continue;
            };
            if let Some(k) = parse_klp_symbol(sym.name.as_bytes(), ksym) {
                relocs[entry].1.push((k.object, k.name, k.sympos));
            }
        }
    }
    let relocs_of = |obj: &str| -> &[KlpRef] {
        relocs
            .iter()
            .find(|(o, _)| o == obj)
            .map_or(&[], |(_, l)| l.as_slice())
    };
    let funcs_of: Vec<(String, Vec<(String, u64)>)> = match &module.patch {
        Ok(p) => p
            .objects
            .iter()
            .map(|o| {
                (
                    o.object_name().to_string(),
                    o.funcs
                        .iter()
                        .filter_map(|f| Some((f.old_name.clone()?, f.old_sympos)))
                        .collect(),
                )
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    // Where each looked-up name sits in vmlinux; no other name needs a position.
    let wanted: std::collections::HashSet<&str> = relocs
        .iter()
        .flat_map(|(_, l)| l.iter().map(|(_, n, _)| n.as_str()))
        .chain(
            funcs_of
                .iter()
                .flat_map(|(_, f)| f.iter().map(|(n, _)| n.as_str())),
        )
        .collect();
    let mut w = Walks::new(target.kernel, v >= (6, 2), &wanted, resched)?;
    w.loading = target
        .unplaced_modules
        .iter()
        .filter_map(|(n, t)| Some((n.clone(), *t, *target.loading_order.get(n)?)))
        .collect();
    // The formed modules, newest first, with their symbol counts.
    let loaded: Vec<(String, usize)> = w
        .modules
        .iter()
        .map(|(n, s)| (n.clone(), s.len()))
        .collect();
    let patch_syms = module
        .elf
        .symbols
        .iter()
        .filter(|s| s.index != 0 && s.shndx != 0)
        .count();
    let mut by_object = Vec::new();
    let mut lookups = 0u64;
    let mut run_group = |object: &str,
                         phase: Phase,
                         list: &[(String, usize)],
                         rel: &[KlpRef],
                         funcs: &[(String, u64)],
                         m: &mut Meter| {
        let mut visited = 0;
        for (o, n, p) in rel {
            visited += walk(
                &w,
                v,
                sublevel,
                list,
                &Lookup {
                    object: o,
                    name: n,
                    sympos: *p,
                },
                m,
            );
        }
        for (n, p) in funcs {
            visited += walk(
                &w,
                v,
                sublevel,
                list,
                &Lookup {
                    object,
                    name: n,
                    sympos: *p,
                },
                m,
            );
        }
        if !rel.is_empty() || !funcs.is_empty() {
            lookups += (rel.len() + funcs.len()) as u64;
            by_object.push(ObjectCost {
                object: object.to_string(),
                phase,
                relocation_lookups: rel.len() as u64,
                function_lookups: funcs.len() as u64,
                symbols_visited: visited,
            });
        }
    };
    // 1. The module loads: vmlinux klp relocations (5.8+); the patch is still UNFORMED.
    if target.rules.vmlinux_relocs_at_load {
        run_group(
            "vmlinux",
            Phase::PatchLoad,
            &loaded,
            relocs_of("vmlinux"),
            &[],
            &mut m,
        );
    }
    // 2. klp_enable_patch() takes klp_mutex: a might_sleep() point.
    m.might_sleep();
    // The patch module is formed (COMING) and first in the list.
    let mut at_enable = vec![(module.name.clone(), patch_syms)];
    at_enable.extend(loaded.iter().cloned());
    let mut later = Vec::new();
    for (obj, funcs) in &funcs_of {
        m.might_sleep(); // klp_init_object(): kobject_add() allocates (GFP_KERNEL)
        if !target.is_loaded(obj) {
            later.push((obj.clone(), funcs.clone()));
            continue;
        }
        let rel: &[KlpRef] = if obj != "vmlinux" || !target.rules.vmlinux_relocs_at_load {
            relocs_of(obj)
        } else {
            &[]
        };
        run_group(obj, Phase::PatchEnable, &at_enable, rel, funcs, &mut m);
    }
    // 3. Each deferred module, when it loads: it is first in the list.
    for (obj, funcs) in later {
        m.boundary();
        // While it loads, the module's whole symbol table is walked (add_kallsyms() points
        // mod->kallsyms at it until do_init_module()); without that count, its kallsyms.
        let key = normalize_module_name(&obj);
        let count = match target.loading_symbols.get(&key) {
            Some(&n) => n as usize,
            None => target.unplaced_modules.get(&key).map_or(0, |t| t.len()),
        };
        let mut list = vec![(normalize_module_name(&obj), count)];
        list.extend(at_enable.iter().cloned());
        run_group(
            &obj,
            Phase::ModuleLoad(obj.clone()),
            &list,
            relocs_of(&obj),
            &funcs,
            &mut m,
        );
    }
    let ns = model.visit_ns.value;
    let cpu_ms = m.total as f64 * ns / 1e6;
    let mut hold_ms = m.longest as f64 * ns / 1e6;
    let tick_ms = 1000.0 / f64::from(model.hz.max(1));
    if model.preemption.value.preemptible() {
        hold_ms = hold_ms.min(tick_ms);
    }
    let warning = (hold_ms > model.hold_warn_ms).then(|| {
        let top = by_object
            .iter()
            .max_by_key(|o| o.symbols_visited)
            .map(|o| {
                format!(
                    "{} ({} lookups, {} entries)",
                    o.object,
                    o.relocation_lookups + o.function_lookups,
                    o.symbols_visited
                )
            })
            .unwrap_or_default();
        format!(
            "the kernel would hold a CPU for about {hold_ms:.0} ms without rescheduling (over {} ms): \
             other work on that CPU (softirqs, network) waits that long; most walking is for {top}; \
             split the patch or reduce its klp relocations (one lookup per relocation entry)",
            model.hold_warn_ms
        )
    });
    Ok(ResolutionCost {
        reached: true,
        algorithm: algorithm(v, sublevel),
        preemption: model.preemption.value,
        preemption_source: model.preemption.source.clone(),
        lookups,
        by_object,
        symbols_visited: m.total,
        match_callbacks: m.callbacks,
        longest_unbroken_visits: m.longest,
        visit_ns: ns,
        visit_ns_source: model.visit_ns.source.clone(),
        estimated_cpu_ms: cpu_ms,
        estimated_longest_hold_ms: hold_ms,
        warning,
    })
}

fn algorithm(v: (u32, u32), sublevel: Option<u32>) -> String {
    let vm = if v >= (6, 2) {
        "vmlinux: binary search of the name-sorted table"
    } else if v >= (5, 17) {
        "vmlinux: full walk, cond_resched per entry"
    } else {
        "vmlinux: full walk, no reschedule point"
    };
    let modules = if v >= (6, 2) {
        "modules: the named module only"
    } else if v == (5, 10) && sublevel.is_some_and(|s| s >= 220) {
        "modules: every module, always to the end"
    } else {
        "modules: every module, newest first"
    };
    format!("{vm}; {modules}")
}

#[cfg(test)]
mod tests;
