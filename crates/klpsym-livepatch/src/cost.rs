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

use std::collections::HashMap;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{normalize_module_name, ObjectId, ObjectKind, SymbolTable};
use serde::Serialize;

use crate::module::LivepatchModule;
use crate::names::{parse_klp_section, parse_klp_symbol};
use crate::target::{Fact, Target};

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

/// The target's tables arranged the way the kernel walks them.
struct Walks<'t> {
    /// Number of vmlinux symbols.
    vmlinux_len: usize,
    /// name -> indexes in `vmlinux`, for the names looked up.
    positions: HashMap<&'t str, Vec<u32>>,
    /// Where each looked-up name falls in `kallsyms_seqs_of_names` (vmlinux sorted by name):
    /// how many names sort below it and how many equal it. That is all a binary search over
    /// the sorted table depends on, so the table is never sorted here (a name-sorted kernel
    /// has 100,000-200,000 names; sorting them cost a warm check 200 ms).
    ranks: HashMap<String, (u32, u32)>,
    /// Loaded modules, newest first: (name, symbol names in symtab order).
    modules: Vec<(String, Vec<&'t str>)>,
    /// Modules that are not loaded, read from their `.ko`: (name, table, each symbol's place
    /// in the walk made while the module loads).
    loading: Vec<(String, &'t SymbolTable, &'t [u32])>,
}

impl<'t> Walks<'t> {
    /// The walks' views of `t`: a tick per symbol, the name sort in steps (a kernel has
    /// 100,000-200,000 names); positions of the `wanted` names only.
    fn new(
        t: &'t SymbolTable,
        name_sorted: bool,
        wanted: &std::collections::HashSet<&str>,
        r: &mut Resched,
    ) -> Result<Self, Cancelled> {
        let mut vmlinux = Vec::new();
        let mut modules: Vec<(String, Vec<&'t str>)> = Vec::new();
        let vm_count = t
            .objects()
            .first()
            .filter(|o| o.kind == ObjectKind::Vmlinux)
            .map_or(0, |o| o.symbol_count as usize);
        // vmlinux's symbols come first in a kernel's table; then a symbol's position among
        // them is its id, and a few index lookups find the wanted names' positions.
        let prefix = t.object_range(ObjectId::VMLINUX) == Some(0..vm_count as u32);
        let by_index = prefix && (t.name_indexed() || wanted.len() <= 8);
        // Each module's symbols as one run, in kernel order (as a kernel's table has them).
        let module_runs: Option<Vec<(std::ops::Range<u32>, &str)>> = by_index
            .then(|| {
                let mut runs = Vec::new();
                for (i, info) in t.objects().iter().enumerate() {
                    if info.kind == ObjectKind::Module && info.symbol_count > 0 {
                        runs.push((t.object_range(ObjectId(i as u32))?, info.name.as_str()));
                    }
                }
                runs.sort_by_key(|(r, _)| r.start);
                Some(runs)
            })
            .flatten();
        if let Some(runs) = module_runs {
            // No vmlinux name is read: only the modules', object by object.
            for (range, name) in runs {
                let mut names = Vec::with_capacity(range.len());
                for id in range {
                    r.tick()?;
                    names.push(t.symbol(klpsym_core::SymbolId(id)).name);
                }
                modules.push((name.to_string(), names));
            }
        } else {
            let mut module_of: HashMap<ObjectId, usize> = HashMap::new();
            for s in t.iter() {
                r.tick()?;
                if s.object == ObjectId::VMLINUX {
                    vmlinux.push(s.name);
                    continue;
                }
                let info = t.object_info(s.object);
                if info.kind != ObjectKind::Module {
                    continue;
                }
                let i = *module_of.entry(s.object).or_insert_with(|| {
                    modules.push((info.name.clone(), Vec::new()));
                    modules.len() - 1
                });
                modules[i].1.push(s.name);
            }
        }
        let mut positions: HashMap<&str, Vec<u32>> = HashMap::with_capacity(wanted.len());
        if by_index {
            for &n in wanted {
                r.tick()?;
                let ids: Vec<u32> = t.by_name_in(n, ObjectId::VMLINUX).map(|s| s.id.0).collect();
                if let Some(&first) = ids.first() {
                    positions.insert(t.symbol(klpsym_core::SymbolId(first)).name, ids);
                }
            }
        } else {
            for (i, n) in vmlinux.iter().enumerate() {
                r.tick()?;
                if wanted.contains(n) {
                    positions.entry(n).or_default().push(i as u32);
                }
            }
        }
        let mut ranks = HashMap::new();
        if name_sorted {
            let mut sorted_wanted: Vec<&str> = wanted.iter().copied().collect();
            sorted_wanted.sort_unstable();
            let names: Box<dyn Iterator<Item = &[u8]>> = if vmlinux.is_empty() {
                Box::new((0..vm_count as u32).map(|i| t.raw_name(klpsym_core::SymbolId(i))))
            } else {
                Box::new(vmlinux.iter().map(|n| n.as_bytes()))
            };
            let counted = rank_names(names, &sorted_wanted, r)?;
            for (n, rank) in sorted_wanted.iter().zip(counted) {
                ranks.insert(n.to_string(), rank);
            }
        }
        Ok(Walks {
            vmlinux_len: if vmlinux.is_empty() {
                vm_count
            } else {
                vmlinux.len()
            },
            positions,
            ranks,
            modules,
            loading: Vec::new(),
        })
    }
}

/// For each of `wanted` (sorted, distinct), how many of `names` sort below it and how many
/// equal it (byte order, as the kernel's `strcmp` orders `kallsyms_seqs_of_names`): one pass,
/// a binary search among the wanted names per name. Names are compared by their first eight
/// bytes as one integer first ([`prefix_key`]); only equal prefixes compare the rest.
fn rank_names<'n>(
    names: impl Iterator<Item = &'n [u8]>,
    wanted: &[&str],
    r: &mut Resched,
) -> Result<Vec<(u32, u32)>, Cancelled> {
    let keys: Vec<u64> = wanted.iter().map(|w| prefix_key(w.as_bytes())).collect();
    // below[i]: names sorting below wanted[i] and not below wanted[i - 1].
    let mut below = vec![0u32; wanted.len() + 1];
    let mut equal = vec![0u32; wanted.len()];
    for y in names {
        r.tick()?;
        let yk = prefix_key(y);
        // wanted[i] <= y
        let at_or_below = |i: usize| match keys[i].cmp(&yk) {
            std::cmp::Ordering::Equal => wanted[i].as_bytes() <= y,
            o => o == std::cmp::Ordering::Less,
        };
        let (mut lo, mut hi) = (0, wanted.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if at_or_below(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        below[lo] += 1;
        if lo > 0 && keys[lo - 1] == yk && wanted[lo - 1].as_bytes() == y {
            equal[lo - 1] += 1;
        }
    }
    let mut sum = 0;
    Ok(equal
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            sum += below[i];
            (sum, e)
        })
        .collect())
}

/// A name's first eight bytes as a big-endian integer, zero-padded: where two keys differ,
/// they order as the names do (a name that ends first pads with 0, below any byte but NUL,
/// and a NUL byte only makes keys equal, which then compare in full).
fn prefix_key(name: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name[..n]);
    u64::from_be_bytes(b)
}

/// Where the walk of one lookup stops: entries touched before and including the stop, or
/// None when it runs to the end (a unique name with sympos 0, a missing name, too few
/// matches).
fn stop_index(matches: &[u32], sympos: u64) -> Option<u32> {
    let want = if sympos == 0 { 2 } else { sympos };
    matches.get(want as usize - 1).copied()
}

/// Counts visits and the longest stretch between reschedule points.
struct Meter {
    preemption: Preemption,
    run: u64,
    longest: u64,
    total: u64,
    /// klp_match_callback() calls (6.2+).
    callbacks: u64,
}

impl Meter {
    fn visit(&mut self, n: u64) {
        self.run += n;
        self.total += n;
        self.longest = self.longest.max(self.run);
    }
    /// A `cond_resched()`.
    fn cond_resched(&mut self) {
        if self.preemption.cond_resched_yields() {
            self.run = 0;
        }
    }
    /// A `might_sleep()` (mutex_lock, GFP_KERNEL allocation).
    fn might_sleep(&mut self) {
        if self.preemption.might_sleep_yields() {
            self.run = 0;
        }
    }
    /// Work that certainly sleeps or returns to user space (between phases).
    fn boundary(&mut self) {
        self.run = 0;
    }
}

/// A klp symbol a relocation refers to: (object, name, sympos).
type KlpRef = (String, String, u64);

struct Lookup<'a> {
    object: &'a str,
    name: &'a str,
    sympos: u64,
}

/// The kernel's walk for one lookup; returns the entries it touched.
fn walk(
    w: &Walks<'_>,
    v: (u32, u32),
    sublevel: Option<u32>,
    list: &[(String, usize)],
    l: &Lookup<'_>,
    m: &mut Meter,
) -> u64 {
    let before = m.total;
    // 5.10.y took module_mutex for every lookup until 5.10.220, mainline until 5.12.
    let old_locking = v < (5, 12) && !(v == (5, 10) && sublevel.is_some_and(|s| s >= 220));
    if l.object == "vmlinux" {
        if old_locking {
            m.might_sleep();
        }
        let empty = Vec::new();
        let matches = w.positions.get(l.name).unwrap_or(&empty);
        if v >= (6, 2) {
            // kallsyms_lookup_names(): binary search, then the equal names both ways plus
            // the first different entry at each end that exists.
            // The kernel's bounds are inclusive: low = 0, high = n - 1.
            // Where the name falls in the sorted table decides every compare: an entry
            // before `less` sorts below it, the next `equal` entries equal it.
            let n = w.vmlinux_len;
            let (less, equal) = w
                .ranks
                .get(l.name)
                .map_or((0, 0), |&(a, b)| (a as i64, b as i64));
            let (mut low, mut high, mut probes) = (0i64, n as i64 - 1, 0u64);
            let mut hit = false;
            while low <= high {
                let mid = low + (high - low) / 2;
                probes += 1;
                if mid < less {
                    low = mid + 1;
                } else if mid >= less + equal {
                    high = mid - 1;
                } else {
                    hit = true;
                    break;
                }
            }
            m.visit(probes);
            if hit {
                // The scan backwards and forwards stops at the ends of the equal run.
                let (lo, hi) = (less as usize, (less + equal - 1) as usize);
                let scanned = (hi - lo) as u64 + u64::from(lo > 0) + u64::from(hi + 1 < n);
                m.visit(scanned);
                // Callbacks on the matches up to the stop, a cond_resched() after each.
                let want = if l.sympos == 0 { 2 } else { l.sympos };
                for _ in 0..(matches.len() as u64).min(want) {
                    m.callbacks += 1;
                    m.cond_resched();
                }
            }
        } else {
            let walked = match stop_index(matches, l.sympos) {
                Some(i) => u64::from(i) + 1,
                None => w.vmlinux_len as u64,
            };
            let stopped = stop_index(matches, l.sympos).is_some();
            if v >= (5, 17) && m.preemption.cond_resched_yields() && walked > 0 {
                // cond_resched() after every entry but the one the callback stopped at: the
                // run never exceeds one entry, and a stopped walk leaves one behind.
                let followed = if stopped { walked - 1 } else { walked };
                if followed > 0 {
                    m.visit(1);
                    m.cond_resched();
                    m.total += followed - 1;
                }
                if stopped {
                    m.visit(1);
                }
            } else {
                m.visit(walked);
            }
            if old_locking && !stopped {
                // The module tail of kallsyms_on_each_symbol(): every formed module's
                // symbols, each rejected by the callback's object test.
                m.visit(list.iter().map(|(_, n)| *n as u64).sum());
            }
        }
        return m.total - before;
    }
    // A module lookup: module_mutex in every version.
    m.might_sleep();
    let target = normalize_module_name(l.object);
    if v >= (6, 2) {
        if let Some((name, count)) = list.iter().find(|(n, _)| *n == target) {
            let matches = module_matches(w, name, l.name);
            m.visit(match stop_index(&matches, l.sympos) {
                Some(i) => u64::from(i) + 1,
                None => *count as u64,
            });
        }
        return m.total - before;
    }
    // 5.10.220+ stops with a `break` that leaves only the inner loop: the walk stops inside
    // the target module and goes on through every module after it.
    let always_all = v == (5, 10) && sublevel.is_some_and(|s| s >= 220);
    for (name, n) in list {
        if *name != target {
            m.visit(*n as u64);
            continue;
        }
        let matches = module_matches(w, name, l.name);
        // Only this module matches (the callback compares the module name).
        if let Some(i) = stop_index(&matches, l.sympos) {
            m.visit(u64::from(i) + 1);
            if !always_all {
                return m.total - before;
            }
        } else {
            m.visit(*n as u64);
        }
    }
    m.total - before
}

/// Where `symbol` sits in the walk of module `module`: among a loaded module's symbols
/// (symtab order), or, for a module read from its `.ko` that is loading, among the defined
/// entries of its whole `.symtab` (the walk `klp_module_coming()` makes; it stops at the
/// match as any other). A module known by neither gives no matches: its whole walk counts.
fn module_matches(w: &Walks<'_>, module: &str, symbol: &str) -> Vec<u32> {
    if let Some((_, syms)) = w.modules.iter().find(|(n, _)| n == module) {
        return syms
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == symbol)
            .map(|(i, _)| i as u32)
            .collect();
    }
    w.loading
        .iter()
        .find(|(n, _, _)| n == module)
        .map(|(_, t, order)| {
            t.by_name(symbol)
                .filter_map(|s| order.get(s.id.0 as usize).copied())
                .collect()
        })
        .unwrap_or_default()
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
mod tests {
    use super::*;

    fn walks(names: &[&'static str]) -> Walks<'static> {
        let vmlinux: Vec<&str> = names.to_vec();
        let mut positions: HashMap<&str, Vec<u32>> = HashMap::new();
        for (i, n) in vmlinux.iter().enumerate() {
            positions.entry(n).or_default().push(i as u32);
        }
        // Brute force: every name of the table and a few absent ones.
        let mut ranks = HashMap::new();
        for x in vmlinux.iter().copied().chain(["zz", "", "0", "dupa"]) {
            let less = vmlinux.iter().filter(|y| **y < x).count() as u32;
            let equal = vmlinux.iter().filter(|y| **y == x).count() as u32;
            ranks.insert(x.to_string(), (less, equal));
        }
        Walks {
            vmlinux_len: vmlinux.len(),
            positions,
            ranks,
            modules: vec![("ext4".into(), vec!["a", "x", "b", "x"])],
            loading: Vec::new(),
        }
    }

    /// The kernel's `kallsyms_lookup_names()` over a table really sorted: entries touched.
    fn sorted_search(table: &[&str], name: &str) -> u64 {
        let mut sorted = table.to_vec();
        sorted.sort();
        let n = sorted.len() as i64;
        let (mut low, mut high, mut probes) = (0i64, n - 1, 0u64);
        while low <= high {
            let mid = low + (high - low) / 2;
            probes += 1;
            match name.cmp(sorted[mid as usize]) {
                std::cmp::Ordering::Greater => low = mid + 1,
                std::cmp::Ordering::Less => high = mid - 1,
                std::cmp::Ordering::Equal => {
                    let (mut lo, mut hi) = (mid, mid);
                    while lo > 0 && sorted[lo as usize - 1] == name {
                        lo -= 1;
                    }
                    while hi + 1 < n && sorted[hi as usize + 1] == name {
                        hi += 1;
                    }
                    return probes + (hi - lo) as u64 + u64::from(lo > 0) + u64::from(hi + 1 < n);
                }
            }
        }
        probes
    }

    #[test]
    fn ranks_count_as_byte_order_does() {
        // Names around the eight-byte prefix: shared prefixes longer and shorter than eight,
        // names that end at seven, eight and nine bytes, NUL and high bytes.
        const POOL: &[&[u8]] = &[
            b"",
            b"a",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefghi",
            b"abcdefgha",
            b"abcdefgg",
            b"abcdefg\0",
            b"abcdefg\0z",
            b"abcdefgh\xff",
            b"abcdefgi",
            b"\xff",
            b"zzzzzzzzzz",
            b"abcdefghij_long_name",
            b"abcdefghij_long_namf",
        ];
        let mut seed = 0x853c49e6748fea9bu64;
        for len in [0usize, 1, 7, 30, 200] {
            let table: Vec<&[u8]> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    POOL[(seed % POOL.len() as u64) as usize]
                })
                .collect();
            // Every name wanted, as strings (the NUL and 0xff ones as lossless UTF-8 where
            // they are; the rest left out).
            let mut wanted: Vec<&str> = POOL
                .iter()
                .filter_map(|n| std::str::from_utf8(n).ok())
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            let got = rank_names(table.iter().copied(), &wanted, &mut Resched::none()).unwrap();
            for (w, (less, eq)) in wanted.iter().zip(got) {
                let want_less = table.iter().filter(|y| **y < w.as_bytes()).count() as u32;
                let want_eq = table.iter().filter(|y| **y == w.as_bytes()).count() as u32;
                assert_eq!((less, eq), (want_less, want_eq), "{w:?} in {len} names");
            }
        }
    }

    #[test]
    fn ranks_give_the_sorted_tables_binary_search() {
        // Tables of every size up to 40 over a small alphabet (many duplicates), each name
        // and some absent ones looked up: the visits equal a search of the sorted table.
        const POOL: &[&str] = &["a", "b", "bb", "c", "d", "e", "f", "g", "zz"];
        let mut seed = 0x2545f4914f6cdd1du64;
        for len in 0..40 {
            let table: Vec<&'static str> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    POOL[(seed % 8) as usize]
                })
                .collect();
            let wanted: std::collections::HashSet<&str> = POOL.iter().copied().collect();
            let mut sorted_wanted: Vec<&str> = wanted.iter().copied().collect();
            sorted_wanted.sort_unstable();
            let ranks = rank_names(
                table.iter().map(|n| n.as_bytes()),
                &sorted_wanted,
                &mut Resched::none(),
            )
            .unwrap();
            let mut w = walks(&table);
            w.ranks = sorted_wanted
                .iter()
                .zip(ranks)
                .map(|(n, r)| (n.to_string(), r))
                .collect();
            for name in POOL {
                let mut m = meter(Preemption::Voluntary);
                assert_eq!(
                    w.at((6, 12), None, &[], &look("vmlinux", name, 1), &mut m),
                    sorted_search(&table, name),
                    "{table:?} {name}"
                );
            }
        }
    }

    #[test]
    fn walks_read_through_the_name_index_equal_the_full_listing() {
        use klpsym_core::{ObjectId, SymbolTableBuilder};
        let mut b = SymbolTableBuilder::new();
        let mut addr = 0x1000;
        let mut push = |b: &mut SymbolTableBuilder, o: ObjectId, n: &str| {
            addr += 16;
            b.push(o, addr, b't', n).unwrap();
        };
        for i in 0..40 {
            push(&mut b, ObjectId::VMLINUX, &format!("f{}", i % 13));
        }
        // Modules newest first, as /proc/kallsyms lists them; one declared with no symbols.
        let empty = b.object("empty", ObjectKind::Module);
        let _ = empty;
        for m in ["xfs", "ext4"] {
            let o = b.object(m, ObjectKind::Module);
            for i in 0..5 {
                push(&mut b, o, &format!("{m}_{}", i % 3));
            }
        }
        let t = b.build();
        let wanted: std::collections::HashSet<&str> = (0..15)
            .map(|i| {
                [
                    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11",
                    "f12", "nope", "xfs_1",
                ][i]
            })
            .collect();
        type View = (usize, Vec<(String, Vec<u32>)>, Vec<(String, Vec<String>)>);
        fn view(w: &Walks<'_>) -> View {
            let mut p: Vec<(String, Vec<u32>)> = w
                .positions
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            p.sort();
            let m = w
                .modules
                .iter()
                .map(|(n, s)| (n.clone(), s.iter().map(|x| x.to_string()).collect()))
                .collect();
            (w.vmlinux_len, p, m)
        }
        let mut r = Resched::none();
        // More than 8 names and no index: every name is listed.
        let full = Walks::new(&t, false, &wanted, &mut r).unwrap();
        let full_sorted = Walks::new(&t, true, &wanted, &mut r).unwrap();
        t.build_name_index(&mut r).unwrap();
        let fast = Walks::new(&t, false, &wanted, &mut r).unwrap();
        let fast_sorted = Walks::new(&t, true, &wanted, &mut r).unwrap();
        assert_eq!(view(&fast_sorted), view(&full_sorted));
        assert_eq!(fast_sorted.ranks, full_sorted.ranks);
        // f0 is at 0, 13, 26, 39 of 40; the names below it: none ("f0" < "f1" < "f10"...).
        assert_eq!(fast_sorted.ranks["f0"], (0, 4));
        assert_eq!(fast_sorted.ranks["nope"].1, 0);
        assert_eq!(view(&fast), view(&full));
        assert_eq!(view(&fast).2.len(), 2, "the empty module is not walked");
        assert_eq!(view(&fast).2[0].0, "xfs");
        assert_eq!(view(&fast).1[0], ("f0".to_string(), vec![0, 13, 26, 39]));
    }

    fn meter(p: Preemption) -> Meter {
        Meter {
            preemption: p,
            run: 0,
            longest: 0,
            total: 0,
            callbacks: 0,
        }
    }

    fn look<'a>(object: &'a str, name: &'a str, sympos: u64) -> Lookup<'a> {
        Lookup {
            object,
            name,
            sympos,
        }
    }

    impl Walks<'_> {
        /// The entries one lookup visits on version `v`.
        fn at(
            &self,
            v: (u32, u32),
            sublevel: Option<u32>,
            list: &[(String, usize)],
            l: &Lookup<'_>,
            m: &mut Meter,
        ) -> u64 {
            walk(self, v, sublevel, list, l, m)
        }
    }

    const NAMES: &[&str] = &["a", "dup", "b", "c", "dup", "d", "u", "e"];

    #[test]
    fn linear_walks_stop_where_the_callback_does() {
        let w = walks(NAMES);
        let list = vec![("ext4".to_string(), 4)];
        let mut m = meter(Preemption::Voluntary);
        // unique: the whole table (8); 6.1 has no module tail.
        assert_eq!(
            w.at((6, 1), None, &list, &look("vmlinux", "u", 0), &mut m),
            8
        );
        // sympos 0 on a duplicate: stops at the second match (index 4).
        assert_eq!(
            w.at((6, 1), None, &list, &look("vmlinux", "dup", 0), &mut m),
            5
        );
        assert_eq!(
            w.at((6, 1), None, &list, &look("vmlinux", "dup", 1), &mut m),
            2
        );
        // missing: whole table.
        assert_eq!(
            w.at((6, 1), None, &list, &look("vmlinux", "zz", 0), &mut m),
            8
        );
        // 6.1 reschedules after every entry but the one a walk stops at: a stopped walk and
        // the first entry of the next make the longest run.
        assert_eq!(m.longest, 2);
        // 5.10 before .220: the module tail after an unstopped walk, no point inside.
        let mut m = meter(Preemption::Voluntary);
        assert_eq!(
            w.at((5, 10), Some(219), &list, &look("vmlinux", "u", 0), &mut m),
            12
        );
        assert_eq!(
            w.at(
                (5, 10),
                Some(219),
                &list,
                &look("vmlinux", "dup", 0),
                &mut m
            ),
            5
        );
        // module_mutex per lookup: the longest run is one lookup.
        assert_eq!(m.longest, 12);
        // 5.10.220+: no tail, and no point between vmlinux lookups.
        let mut m = meter(Preemption::Voluntary);
        assert_eq!(
            w.at((5, 10), Some(223), &list, &look("vmlinux", "u", 0), &mut m),
            8
        );
        assert_eq!(
            w.at((5, 10), Some(223), &list, &look("vmlinux", "u", 0), &mut m),
            8
        );
        assert_eq!(m.longest, 16);
    }

    #[test]
    fn name_sorted_lookups_cost_a_binary_search() {
        let w = walks(NAMES);
        let list = vec![];
        let mut m = meter(Preemption::Voluntary);
        // sorted: a b c d dup dup e u (8), bounds 0..=7. "u": mid 3 (d), 5 (dup), 6 (e),
        // 7 (u) = 4 probes; then one entry before (e), none after (the end): 5.
        assert_eq!(
            w.at((6, 12), None, &list, &look("vmlinux", "u", 0), &mut m),
            5
        );
        // "dup": mid 3 (d), 5 (dup) = 2 probes; back over 4 (dup) to 3 (d, differs), forward
        // to 6 (e, differs): 3 more.
        assert_eq!(
            w.at((6, 12), None, &list, &look("vmlinux", "dup", 0), &mut m),
            5
        );
        // missing: the probes only (mid 3, 5, 6, 7).
        assert_eq!(
            w.at((6, 12), None, &list, &look("vmlinux", "zz", 0), &mut m),
            4
        );
        // The search has no point; each match's callback is followed by one.
        assert_eq!(m.longest, 5);
    }

    #[test]
    fn module_walks_follow_each_versions_order_and_stop() {
        let w = walks(NAMES);
        let list = vec![("patch".to_string(), 10), ("ext4".to_string(), 4)];
        let mut m = meter(Preemption::Voluntary);
        // 6.1: the patch's 10 symbols first, then ext4 up to the second "x" (index 3).
        assert_eq!(w.at((6, 1), None, &list, &look("ext4", "x", 0), &mut m), 14);
        // unique in ext4 ("a"): every module to the end.
        assert_eq!(w.at((6, 1), None, &list, &look("ext4", "a", 0), &mut m), 14);
        // sympos 1: stops at index 1.
        assert_eq!(w.at((6, 1), None, &list, &look("ext4", "x", 1), &mut m), 12);
        // 6.2+: only ext4.
        assert_eq!(w.at((6, 12), None, &list, &look("ext4", "x", 1), &mut m), 2);
        assert_eq!(w.at((6, 12), None, &list, &look("ext4", "a", 0), &mut m), 4);
        // 5.10.220+: the walk stops inside ext4 (index 1) but would go on through the modules
        // after it; with ext4 first it walks ext4 to the stop, then the patch to its end.
        let list2 = vec![("ext4".to_string(), 4), ("patch".to_string(), 10)];
        assert_eq!(
            w.at((5, 10), Some(223), &list2, &look("ext4", "x", 1), &mut m),
            12
        );
        // 6.1 stops there.
        assert_eq!(w.at((6, 1), None, &list2, &look("ext4", "x", 1), &mut m), 2);
    }

    #[test]
    fn preemption_models_from_config() {
        let cfg = |on: &'static [&'static str]| move |o: &str| on.contains(&o);
        assert_eq!(
            Preemption::from_config(cfg(&["CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT_DYNAMIC"])),
            Some(Preemption::Voluntary)
        );
        assert_eq!(
            Preemption::from_config(cfg(&["CONFIG_PREEMPT_LAZY", "CONFIG_PREEMPT_DYNAMIC"])),
            Some(Preemption::Lazy)
        );
        assert_eq!(Preemption::from_config(cfg(&[])), None);
        assert_eq!(Preemption::assumed((7, 2)), Preemption::Lazy);
        assert_eq!(Preemption::assumed((5, 10)), Preemption::Voluntary);
    }
}
