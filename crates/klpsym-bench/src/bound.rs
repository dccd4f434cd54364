//! Proof that the reschedule bound holds: run each long operation with an instrumented
//! [`Resched`] several times and report the longest stretch between two points (thread CPU
//! time), where it began and ended, and how stretches are distributed.
//!
//! A stretch that comes from the code (work without a point) shows up in every run at the same
//! place; one that comes from the machine (an interrupt, the hypervisor) shows up in some runs
//! anywhere. So the verdict uses the best of the runs, and the worst run is shown beside it,
//! with a calibration loop that measures the machine's own noise floor.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::resched::{Resched, ReschedPolicy, ReschedStats, STRETCH_BUCKET_EDGES_US};
use klpsym_core::{find_object_symbol, write_kallsyms, LookupRequest, SymbolTable};
use klpsym_io::{load, LoadOptions};

use crate::job::Job;

type BoxError = Box<dyn std::error::Error>;

/// What `klpsym-bench resched` measures.
#[derive(Debug, Clone)]
pub struct BoundArgs {
    pub kernel: PathBuf,
    pub image: Option<PathBuf>,
    pub vmlinux_elf: Option<PathBuf>,
    pub modules: Option<PathBuf>,
    pub interval: Duration,
    pub bound: Duration,
    pub runs: usize,
    pub policy_yield: bool,
}

/// One operation's result over all runs.
#[derive(Debug, serde::Serialize)]
pub struct OpResult {
    pub op: String,
    pub runs: usize,
    pub median_ms: f64,
    pub points: u64,
    /// Longest stretch of the run whose longest stretch was shortest, and where it was.
    pub best_longest_us: f64,
    pub best_at: String,
    /// Longest stretch over all runs, and where it was.
    pub worst_longest_us: f64,
    pub worst_at: String,
    /// Share of all stretches (all runs) shorter than the bound.
    pub within_bound_pct: f64,
    pub within_bound: bool,
}

fn at(s: &ReschedStats) -> String {
    let loc = |l: Option<&std::panic::Location<'_>>| match l {
        Some(l) => format!("{}:{}", l.file(), l.line()),
        None => "-".to_string(),
    };
    format!("{} -> {}", loc(s.longest_from), loc(s.longest_to))
}

struct Runner {
    args: BoundArgs,
    results: Vec<OpResult>,
    /// What the machine adds to the longest stretch of a run on its own (interrupts, the
    /// hypervisor): the calibration's best-run longest stretch minus the interval.
    noise: Duration,
}

impl Runner {
    fn driver(&self) -> Resched {
        let policy = if self.args.policy_yield {
            ReschedPolicy::Yield
        } else {
            ReschedPolicy::Nothing
        };
        Resched::new(policy)
            .with_interval(self.args.interval)
            .with_work_clock(crate::sys::thread_cpu_time)
    }

    /// Runs `op` `runs` times, each time after `prepare` (not measured).
    fn measure<P, T>(
        &mut self,
        name: &str,
        runs: usize,
        mut prepare: impl FnMut() -> Result<P, BoxError>,
        mut op: impl FnMut(P, &mut Resched) -> Result<T, BoxError>,
    ) -> Result<(), BoxError> {
        let mut all: Vec<(ReschedStats, Duration)> = Vec::with_capacity(runs);
        for _ in 0..runs {
            let input = prepare()?;
            let mut r = self.driver();
            let t0 = Instant::now();
            let out = op(input, &mut r)?;
            let took = t0.elapsed();
            let stats = r.stats();
            drop(out);
            all.push((stats, took));
        }
        let mut times: Vec<Duration> = all.iter().map(|a| a.1).collect();
        times.sort();
        let best = all
            .iter()
            .min_by_key(|a| a.0.longest_stretch)
            .map(|a| a.0)
            .unwrap_or_default();
        let worst = all
            .iter()
            .max_by_key(|a| a.0.longest_stretch)
            .map(|a| a.0)
            .unwrap_or_default();
        let bound_us = self.args.bound.as_micros() as u64;
        let (mut within, mut total) = (0u64, 0u64);
        for (s, _) in &all {
            total += s.buckets.iter().sum::<u64>();
            within += s
                .stretches_within(bound_us)
                .unwrap_or_else(|| s.buckets.iter().sum());
        }
        let res = OpResult {
            op: name.to_string(),
            runs,
            median_ms: times[times.len() / 2].as_secs_f64() * 1e3,
            points: all.iter().map(|a| a.0.points).sum::<u64>() / runs as u64,
            best_longest_us: best.longest_stretch.as_secs_f64() * 1e6,
            best_at: at(&best),
            worst_longest_us: worst.longest_stretch.as_secs_f64() * 1e6,
            worst_at: at(&worst),
            within_bound_pct: if total == 0 {
                100.0
            } else {
                within as f64 * 100.0 / total as f64
            },
            // Calibrations measure the machine: floors, not verdicts.
            within_bound: name.starts_with("calibration")
                || best.longest_stretch <= self.args.bound + self.noise,
        };
        println!(
            "{:<40} {:>9.1} {:>8} {:>10.1} {:>10.1} {:>9.3}%  {}",
            res.op,
            res.median_ms,
            res.points,
            res.best_longest_us,
            res.worst_longest_us,
            res.within_bound_pct,
            if name.starts_with("calibration") {
                "floor"
            } else if res.within_bound {
                "ok"
            } else {
                "OVER"
            }
        );
        println!("{:<40}   best run:  {}", "", res.best_at);
        if res.worst_at != res.best_at {
            println!("{:<40}   worst run: {}", "", res.worst_at);
        }
        self.results.push(res);
        Ok(())
    }
}

fn loaded(path: &Path) -> Result<SymbolTable, BoxError> {
    Ok(load(path, &LoadOptions::default(), &mut Resched::none())?.table)
}

/// Runs every operation and prints the table; the error says which operations are over.
pub fn run(args: BoundArgs) -> Result<Vec<OpResult>, BoxError> {
    let bound_us = args.bound.as_micros() as u64;
    if !STRETCH_BUCKET_EDGES_US.contains(&bound_us) {
        return Err(format!(
            "--bound-us must be one of {STRETCH_BUCKET_EDGES_US:?} (the histogram's edges)"
        )
        .into());
    }
    println!(
        "interval {} µs, bound {} µs, {} runs per operation, points: {}. A stretch is the thread's CPU time between two points.",
        args.interval.as_micros(),
        bound_us,
        args.runs,
        if args.policy_yield { "sched_yield" } else { "nothing (measure only)" }
    );
    println!(
        "{:<40} {:>9} {:>8} {:>10} {:>10} {:>10}",
        "operation", "median ms", "points", "best µs", "worst µs", "< bound"
    );
    let runs = args.runs.max(1);
    let mut x = Runner {
        args: args.clone(),
        results: Vec::new(),
        noise: Duration::MAX / 4,
    };

    // The machine's noise floor: uniform 50 ns items, nothing else, for as long as the longest
    // operations run (the longer a run, the further into the noise's tail its longest stretch
    // reaches). What its best run shows over the interval is what interrupts and the
    // hypervisor add to any stretch.
    x.measure(
        "calibration: 1 s of 50 ns items",
        runs,
        || Ok(()),
        |(), r| {
            let mut acc = 0u64;
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(1) {
                for i in 0..64u64 {
                    acc =
                        std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
                r.tick()?;
            }
            Ok(acc)
        },
    )?;
    let calibration = x.results.pop().expect("calibration ran");
    // The other floor: first touches of fresh memory, one page per item. Every operation that
    // reads or decompresses big inputs touches tens of thousands of fresh pages, and a single
    // page fault is one kernel entry no user code can cut; this row shows their tail here.
    x.measure(
        "calibration: first touch of 65,536 pages",
        runs,
        || Ok(Vec::<u8>::with_capacity(256 << 20)),
        |mut v, r| {
            let spare = v.spare_capacity_mut();
            for i in (0..spare.len()).step_by(4096) {
                // black_box: the write must happen (nothing reads it back).
                std::hint::black_box(spare[i].write(1));
                r.tick_step()?;
            }
            Ok(v)
        },
    )?;

    x.noise =
        Duration::from_secs_f64(calibration.best_longest_us / 1e6).saturating_sub(args.interval);
    println!(
        "{:<40}   noise floor: uniform work shows {:.1} µs in its best run; {:.1} µs over the interval is allowed to every operation",
        "",
        calibration.best_longest_us,
        x.noise.as_secs_f64() * 1e6
    );

    let kernel = args.kernel.clone();
    x.measure(
        &format!("load {}", kernel.display()),
        runs,
        || Ok(()),
        |(), r| Ok(load(&kernel, &LoadOptions::default(), r)?),
    )?;
    x.measure(
        "build name + address indexes",
        runs,
        || loaded(&kernel),
        |t, r| {
            t.build_indexes(r)?;
            Ok(t)
        },
    )?;
    let t = loaded(&kernel)?;
    t.build_indexes(&mut Resched::none())?;
    x.measure(
        "dump (/proc/kallsyms format)",
        runs,
        || Ok(()),
        |(), r| Ok(write_kallsyms(&t, &mut std::io::sink(), r)?),
    )?;
    let starts: Vec<u64> = t.iter().map(|s| s.addr).collect();
    x.measure(
        &format!("symbolize {} addresses one by one", starts.len()),
        runs,
        || Ok(()),
        |(), r| {
            let mut found = 0usize;
            for &a in &starts {
                r.tick()?;
                found += matches!(t.symbolize(a), klpsym_core::SymbolizeOutcome::Found(_)) as usize;
            }
            Ok(found)
        },
    )?;
    let random = random_addresses(&starts, 500_000);
    x.measure(
        "symbolize a batch of 500,000 addresses",
        runs,
        || Ok(()),
        |(), r| {
            let mut out = Vec::new();
            t.symbolize_batch_with(&random, &mut out, r)?;
            let n = out.len();
            // 24 MB of results: the caller frees them in steps too.
            klpsym_core::bulk::free_with_points(out, r)?;
            Ok(n)
        },
    )?;
    let job = Job::generate(&t, 20_000);
    x.measure(
        "resolve a 20,000-lookup patch",
        runs,
        || Ok(()),
        |(), r| Ok(resolve_job(&t, &job, r)?),
    )?;
    // A large generated patch against this table: 20,000 klp relocations and 1,000 replaced
    // functions over names that are unique in it; and the same references as an ordinary
    // module for convert.
    let names = unique_function_names(&t, 5_000);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let patch = klpsym_testkit::patches::large_patch(&names, 20_000, 1_000);
    let module = klpsym_testkit::patches::large_module(&names, 20_000);
    let target = klpsym_livepatch::Target::new(
        &t,
        klpsym_livepatch::KernelRules::for_version(6, 1),
        klpsym_livepatch::Arch::X86_64,
    );
    x.measure(
        "check a 20,000-relocation patch",
        runs,
        || Ok(()),
        |(), r| {
            let layouts = klpsym_livepatch::StructLayouts::fallback(6, 1);
            let m = klpsym_livepatch::LivepatchModule::parse_with(&patch, &layouts, r)?;
            let report = klpsym_livepatch::check_with(&m, &target, r)?;
            let verdict = format!("{:?}", report.verdict.kind);
            report.drop_with_points(r)?;
            m.drop_with_points(r)?;
            Ok(verdict)
        },
    )?;
    x.measure(
        "convert a 20,000-relocation module",
        runs,
        || Ok(()),
        |(), r| {
            // klp_enable_patch is exported (and absent from kernels without livepatch).
            let exported = |n: &str| n == "klp_enable_patch";
            let (out, report) =
                klpsym_livepatch::convert_with(&module, &target, &[], &exported, r)?;
            let n = out.len();
            report.drop_with_points(r)?;
            klpsym_core::bulk::free_with_points(out, r)?;
            Ok(n)
        },
    )?;
    if let Some(img) = args.image.clone() {
        x.measure(
            &format!("load image {}", file_name(&img)),
            runs,
            || Ok(()),
            |(), r| Ok(load(&img, &LoadOptions::default(), r)?),
        )?;
    }
    if let Some(elf) = args.vmlinux_elf.clone() {
        x.measure(
            &format!("load vmlinux ELF {}", file_name(&elf)),
            runs,
            || Ok(()),
            |(), r| Ok(load(&elf, &LoadOptions::default(), r)?),
        )?;
        copies(&mut x, &elf, runs)?;
    }
    if let Some(dir) = args.modules.clone() {
        let tree = klpsym_io::ModuleTree::scan(&dir)?;
        let files: Vec<&Path> = tree.files().map(klpsym_io::ModuleFile::label).collect();
        x.measure(
            &format!("load {} modules", files.len()),
            runs,
            || Ok(()),
            |(), r| {
                let mut symbols = 0usize;
                for f in &files {
                    let k = load(f, &LoadOptions::default(), r)?;
                    symbols += k.table.len();
                    k.free_with(r)?;
                }
                Ok(symbols)
            },
        )?;
    }
    x.results.insert(0, calibration);
    let over: Vec<&str> = x
        .results
        .iter()
        .filter(|r| !r.within_bound)
        .map(|r| r.op.as_str())
        .collect();
    if !over.is_empty() {
        println!("over the bound in every run: {}", over.join("; "));
    }
    Ok(x.results)
}

/// The DWARF walks of a vmlinux with debug info: every copy of a spread of its static
/// functions (what a check's coverage reads), and the index of all of it (one walk of every
/// unit, what `copies NAME` needs once).
fn copies(x: &mut Runner, elf: &Path, runs: usize) -> Result<(), BoxError> {
    let bytes = std::fs::read(elf)?;
    let t = klpsym_elf::vmlinux_kallsyms(&bytes, None)?;
    let statics: Vec<u64> = t
        .entries
        .iter()
        .filter(|e| e.kind == b't')
        .map(|e| e.addr)
        .step_by(997)
        .take(40)
        .collect();
    drop(t);
    let shared: klpsym_elf::Shared = std::sync::Arc::new(bytes);
    let lines = klpsym_elf::DebugLines::vmlinux(shared).ok_or("the vmlinux has no DWARF")?;
    x.measure(
        &format!("DWARF copies of {} functions", statics.len()),
        runs,
        || Ok(()),
        |(), r| {
            let mut copies = 0usize;
            for &a in &statics {
                copies += lines.copies_at(a, None, r)?.map_or(0, |f| f.copies.len());
            }
            Ok(copies)
        },
    )?;
    x.measure(
        "DWARF copies index (every unit)",
        runs.min(3),
        || Ok(()),
        |(), r| Ok(lines.copies_index(r)?.free_with_points(r)?),
    )?;
    Ok(())
}

/// Interval sweep: for each interval, the CPU cost of points that yield (against points that
/// do nothing) on the same work, and the longest stretch. The default interval is the
/// smallest whose overhead stays small.
pub fn sweep(kernel: &Path, runs: usize) -> Result<(), BoxError> {
    let t = loaded(kernel)?;
    t.build_indexes(&mut Resched::none())?;
    let job = Job::generate(&t, 20_000);
    let starts: Vec<u64> = t.iter().map(|s| s.addr).collect();
    let random = random_addresses(&starts, 500_000);
    // The work: load + index + resolve + batch symbolize, as one job.
    let work = |r: &mut Resched| -> Result<(), BoxError> {
        let k = load(kernel, &LoadOptions::default(), r)?;
        k.table.build_indexes(r)?;
        k.table.free_with(r)?;
        resolve_job(&t, &job, r)?;
        let mut out = Vec::new();
        t.symbolize_batch_with(&random, &mut out, r)?;
        klpsym_core::bulk::free_with_points(out, r)?;
        Ok(())
    };
    // The cost of one point that yields, measured alone (nothing else runnable here, so
    // sched_yield returns at once): with the number of points it gives the overhead without
    // the run-to-run noise of whole jobs.
    let per_point = {
        let mut r = Resched::new(ReschedPolicy::Yield);
        let c0 = crate::sys::thread_cpu_time();
        for _ in 0..100_000 {
            r.point()?;
        }
        (crate::sys::thread_cpu_time() - c0) / 100_000
    };
    println!(
        "one point that yields costs {:.2} µs of CPU here (100,000 points, alone)",
        per_point.as_secs_f64() * 1e6
    );
    println!(
        "{:>11} {:>20} {:>18} {:>16} {:>8} {:>19} {:>12}",
        "interval µs",
        "min cpu ms, nothing",
        "min cpu ms, yield",
        "overhead, jobs",
        "points",
        "overhead, computed",
        "longest µs"
    );
    for us in [10u64, 25, 50, 100, 200] {
        let interval = Duration::from_micros(us);
        let (mut base, mut with_yield) = (Vec::new(), Vec::new());
        let mut longest = Duration::MAX;
        let mut points = 0;
        // Interleaved so drift in the machine's load hits both alike.
        for _ in 0..runs.max(1) {
            for yielding in [false, true] {
                let policy = if yielding {
                    ReschedPolicy::Yield
                } else {
                    ReschedPolicy::Nothing
                };
                let mut r = Resched::new(policy)
                    .with_interval(interval)
                    .with_work_clock(crate::sys::thread_cpu_time);
                let c0 = crate::sys::thread_cpu_time();
                work(&mut r)?;
                let cpu = crate::sys::thread_cpu_time() - c0;
                if yielding {
                    with_yield.push(cpu);
                    points = r.stats().points;
                } else {
                    base.push(cpu);
                }
                longest = longest.min(r.stats().longest_stretch);
            }
        }
        // The least disturbed run of each: the machine's noise only ever adds time.
        let b = base.iter().min().copied().unwrap_or_default();
        let y = with_yield.iter().min().copied().unwrap_or_default();
        println!(
            "{:>11} {:>20.1} {:>18.1} {:>15.1}% {:>8} {:>18.1}% {:>12.1}",
            us,
            b.as_secs_f64() * 1e3,
            y.as_secs_f64() * 1e3,
            (y.as_secs_f64() / b.as_secs_f64() - 1.0) * 100.0,
            points,
            per_point.as_secs_f64() * points as f64 / b.as_secs_f64() * 100.0,
            longest.as_secs_f64() * 1e6
        );
    }
    Ok(())
}

/// Up to `n` names of function symbols that occur once in `t` (deterministic).
fn unique_function_names(t: &SymbolTable, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for s in t.iter() {
        if out.len() >= n {
            break;
        }
        if matches!(s.kind, 't' | 'T') && s.addr != 0 && t.by_name(s.name).count() == 1 {
            out.push(s.name.to_string());
        }
    }
    out
}

/// Resolves every lookup of `job` as klpsym does (a tick per lookup); the number found.
fn resolve_job(
    t: &SymbolTable,
    job: &Job,
    r: &mut Resched,
) -> Result<usize, klpsym_core::Cancelled> {
    let mut found = 0usize;
    for (name, sympos) in &job.lookups {
        r.tick()?;
        let o = find_object_symbol(
            t,
            &LookupRequest {
                name,
                object: None,
                sympos: *sympos,
            },
        );
        found += o.address.is_some() as usize;
    }
    Ok(found)
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `n` addresses spread over the table's range (deterministic), most inside symbols.
fn random_addresses(starts: &[u64], n: usize) -> Vec<u64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let nonzero: Vec<u64> = starts.iter().copied().filter(|&a| a != 0).collect();
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let base = nonzero[(x % nonzero.len() as u64) as usize];
            base + (x >> 40) % 64
        })
        .collect()
}
