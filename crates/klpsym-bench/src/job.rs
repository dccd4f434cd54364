//! The resolution job and the four strategies that run it.
//!
//! A job is a generated patch: `lookups` (name, sympos) pairs against vmlinux, every one
//! resolvable. The strategies are the kernel's historic ones and klpsym's:
//! 1. `Walk`: before 5.17 — one full walk of the symbol table per lookup, no reschedule point.
//! 2. `WalkResched`: 5.17 (the seed) — the same walk, `cond_resched()` per symbol. In the kernel
//!    that call is a flag test that only gives the CPU away when the scheduler asked for it
//!    (at a tick); here a per-symbol clock-strided check gives it away every `kernel_tick`.
//! 3. `Sorted`: 6.2 — a name-sorted index (kallsyms_seqs_of_names), binary search, no points.
//! 4. `Klpsym`: the hash index and bounded reschedule points (default 50 µs).

use std::time::Duration;

use klpsym_core::resched::{Cancelled, Resched, ReschedPolicy};
use klpsym_core::{
    find_object_symbol, LookupRequest, LookupVerdict, ObjectId, SymbolId, SymbolTable,
};

/// One of the four strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Walk,
    WalkResched,
    Sorted,
    Klpsym,
}

impl Strategy {
    pub const ALL: [Strategy; 4] = [
        Strategy::Walk,
        Strategy::WalkResched,
        Strategy::Sorted,
        Strategy::Klpsym,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Strategy::Walk => "1. full walk, no resched (<5.17)",
            Strategy::WalkResched => "2. full walk, resched per symbol (5.17)",
            Strategy::Sorted => "3. name-sorted binary search (6.2)",
            Strategy::Klpsym => "4. klpsym index + bounded points",
        }
    }
}

/// A generated patch: lookups that all resolve.
#[derive(Debug, Clone)]
pub struct Job {
    pub lookups: Vec<(String, u64)>,
}

impl Job {
    /// `n` lookups of vmlinux symbols spread over the table (deterministic), each with the
    /// position that makes it resolve (0 when unique).
    pub fn generate(t: &SymbolTable, n: usize) -> Job {
        let vml: Vec<SymbolId> = t
            .iter()
            .filter(|s| s.object == ObjectId::VMLINUX && s.addr != 0)
            .map(|s| s.id)
            .collect();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut lookups = Vec::with_capacity(n);
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = t.symbol(vml[(x % vml.len() as u64) as usize]);
            let same: Vec<SymbolId> = t
                .by_name_in(s.name, ObjectId::VMLINUX)
                .map(|m| m.id)
                .collect();
            let pos = if same.len() == 1 {
                0
            } else {
                same.iter().position(|&i| i == s.id).unwrap_or(0) as u64 + 1
            };
            lookups.push((s.name.to_string(), pos));
        }
        Job { lookups }
    }
}

/// The name-sorted index of the 6.2 kernel: vmlinux symbol ids sorted by (name, kallsyms order).
pub struct SortedIndex<'t> {
    t: &'t SymbolTable,
    ids: Vec<u32>,
}

impl<'t> SortedIndex<'t> {
    pub fn build(t: &'t SymbolTable) -> Self {
        let mut ids: Vec<u32> = t
            .iter()
            .filter(|s| s.object == ObjectId::VMLINUX)
            .map(|s| s.id.0)
            .collect();
        ids.sort_by(|&a, &b| {
            t.symbol(SymbolId(a))
                .name
                .cmp(t.symbol(SymbolId(b)).name)
                .then(a.cmp(&b))
        });
        SortedIndex { t, ids }
    }

    /// The kernel's klp_find_object_symbol over this index: the address, or None.
    pub fn resolve(&self, name: &str, sympos: u64) -> Option<u64> {
        let first = self
            .ids
            .partition_point(|&i| self.t.symbol(SymbolId(i)).name < name);
        let mut count = 0;
        let mut addr = 0;
        for &i in &self.ids[first..] {
            let s = self.t.symbol(SymbolId(i));
            if s.name != name {
                break;
            }
            addr = s.addr;
            count += 1;
            if (sympos != 0 && count == sympos) || (sympos == 0 && count > 1) {
                break;
            }
        }
        verdict(addr, count, sympos)
    }
}

/// The kernel's `klp_find_object_symbol` verdict from its walk's result: the address, or None.
pub fn verdict(addr: u64, count: u64, sympos: u64) -> Option<u64> {
    if addr == 0 || (count > 1 && sympos == 0) || (sympos > 0 && count != sympos) {
        None
    } else {
        Some(addr)
    }
}

/// One full walk over vmlinux for one lookup, calling `point` per symbol.
#[inline]
pub fn walk_one(
    t: &SymbolTable,
    vml_end: u32,
    name: &str,
    sympos: u64,
    mut point: impl FnMut() -> Result<(), Cancelled>,
) -> Result<Option<u64>, Cancelled> {
    let (mut count, mut addr) = (0u64, 0u64);
    let nb = name.as_bytes();
    for i in 0..vml_end {
        point()?;
        let s = t.symbol(SymbolId(i));
        if s.name.as_bytes() == nb {
            addr = s.addr;
            count += 1;
            if (sympos != 0 && count == sympos) || (sympos == 0 && count > 1) {
                break;
            }
        }
    }
    Ok(verdict(addr, count, sympos))
}

/// Runs the whole job with `strategy` on this thread. `yield_points` says whether points give
/// the CPU away (sched_yield) — the FIFO setting — or do nothing.
pub fn run_sync(
    t: &SymbolTable,
    sorted: &SortedIndex<'_>,
    job: &Job,
    strategy: Strategy,
    kernel_tick: Duration,
) -> usize {
    let vml_end = t.object_info(ObjectId::VMLINUX).symbol_count;
    let mut resolved = 0;
    match strategy {
        Strategy::Walk => {
            for (n, p) in &job.lookups {
                resolved += walk_one(t, vml_end, n, *p, || Ok(()))
                    .unwrap_or(None)
                    .is_some() as usize;
            }
        }
        Strategy::WalkResched => {
            let mut r = Resched::new(ReschedPolicy::Yield).with_interval(kernel_tick);
            for (n, p) in &job.lookups {
                resolved += walk_one(t, vml_end, n, *p, || r.tick())
                    .unwrap_or(None)
                    .is_some() as usize;
            }
        }
        Strategy::Sorted => {
            for (n, p) in &job.lookups {
                resolved += sorted.resolve(n, *p).is_some() as usize;
            }
        }
        Strategy::Klpsym => {
            let mut r = Resched::new(ReschedPolicy::Yield);
            for (n, p) in &job.lookups {
                let _ = r.tick();
                let o = find_object_symbol(
                    t,
                    &LookupRequest {
                        name: n,
                        object: None,
                        sympos: *p,
                    },
                );
                resolved += (o.verdict == LookupVerdict::Found) as usize;
            }
        }
    }
    resolved
}

/// The same job as an async task: reschedule points yield to the executor.
pub async fn run_async(
    t: &SymbolTable,
    sorted: &SortedIndex<'_>,
    job: &Job,
    strategy: Strategy,
    kernel_tick: Duration,
) -> usize {
    let vml_end = t.object_info(ObjectId::VMLINUX).symbol_count;
    let mut resolved = 0;
    match strategy {
        Strategy::Walk | Strategy::Sorted => {
            return run_sync(t, sorted, job, strategy, kernel_tick)
        }
        Strategy::WalkResched => {
            let mut r = Resched::none().with_interval(kernel_tick);
            for (n, p) in &job.lookups {
                let mut due = false;
                let res = walk_one(t, vml_end, n, *p, || {
                    due |= r.tick_due()?;
                    Ok(())
                });
                resolved += res.unwrap_or(None).is_some() as usize;
                // A walk of one lookup is ~100 µs here; the point is honoured between lookups.
                if due {
                    klpsym_core::yield_now().await;
                }
            }
        }
        Strategy::Klpsym => {
            let mut r = Resched::none();
            for (n, p) in &job.lookups {
                let _ = r.tick_async().await;
                let o = find_object_symbol(
                    t,
                    &LookupRequest {
                        name: n,
                        object: None,
                        sympos: *p,
                    },
                );
                resolved += (o.verdict == LookupVerdict::Found) as usize;
            }
        }
    }
    resolved
}
