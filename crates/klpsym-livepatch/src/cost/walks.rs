//! The kernel's walks for one lookup, per version (the rules in `cost`'s documentation): the
//! target's tables arranged as the kernel walks them, and a meter of entries and stretches.

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{normalize_module_name, ObjectId, ObjectKind, SymbolTable};

use super::Preemption;
use std::collections::HashMap;

/// The target's tables arranged the way the kernel walks them.
pub(super) struct Walks<'t> {
    /// Number of vmlinux symbols.
    pub(super) vmlinux_len: usize,
    /// name -> indexes in `vmlinux`, for the names looked up.
    pub(super) positions: HashMap<&'t str, Vec<u32>>,
    /// Where each looked-up name falls in `kallsyms_seqs_of_names` (vmlinux sorted by name):
    /// how many names sort below it and how many equal it. That is all a binary search over
    /// the sorted table depends on, so the table is never sorted here (a name-sorted kernel
    /// has 100,000-200,000 names; sorting them cost a warm check 200 ms).
    pub(super) ranks: HashMap<String, (u32, u32)>,
    /// Loaded modules, newest first: (name, symbol names in symtab order).
    pub(super) modules: Vec<(String, Vec<&'t str>)>,
    /// Modules that are not loaded, read from their `.ko`: (name, table, each symbol's place
    /// in the walk made while the module loads).
    pub(super) loading: Vec<(String, &'t SymbolTable, &'t [u32])>,
}

impl<'t> Walks<'t> {
    /// The walks' views of `t`: a tick per symbol, the name sort in steps (a kernel has
    /// 100,000-200,000 names); positions of the `wanted` names only.
    pub(super) fn new(
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
pub(super) fn rank_names<'n>(
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
pub(super) fn prefix_key(name: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name[..n]);
    u64::from_be_bytes(b)
}

/// Where the walk of one lookup stops: entries touched before and including the stop, or
/// None when it runs to the end (a unique name with sympos 0, a missing name, too few
/// matches).
pub(super) fn stop_index(matches: &[u32], sympos: u64) -> Option<u32> {
    let want = if sympos == 0 { 2 } else { sympos };
    matches.get(want as usize - 1).copied()
}

/// Counts visits and the longest stretch between reschedule points.
pub(super) struct Meter {
    pub(super) preemption: Preemption,
    pub(super) run: u64,
    pub(super) longest: u64,
    pub(super) total: u64,
    /// klp_match_callback() calls (6.2+).
    pub(super) callbacks: u64,
}

impl Meter {
    pub(super) fn visit(&mut self, n: u64) {
        self.run += n;
        self.total += n;
        self.longest = self.longest.max(self.run);
    }
    /// A `cond_resched()`.
    pub(super) fn cond_resched(&mut self) {
        if self.preemption.cond_resched_yields() {
            self.run = 0;
        }
    }
    /// A `might_sleep()` (mutex_lock, GFP_KERNEL allocation).
    pub(super) fn might_sleep(&mut self) {
        if self.preemption.might_sleep_yields() {
            self.run = 0;
        }
    }
    /// Work that certainly sleeps or returns to user space (between phases).
    pub(super) fn boundary(&mut self) {
        self.run = 0;
    }
}

/// A klp symbol a relocation refers to: (object, name, sympos).
pub(super) type KlpRef = (String, String, u64);

pub(super) struct Lookup<'a> {
    pub(super) object: &'a str,
    pub(super) name: &'a str,
    pub(super) sympos: u64,
}

/// The kernel's walk for one lookup; returns the entries it touched.
pub(super) fn walk(
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
pub(super) fn module_matches(w: &Walks<'_>, module: &str, symbol: &str) -> Vec<u32> {
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
