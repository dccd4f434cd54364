//! `klpsym-bench resched`: proof that the reschedule bound holds. Each operation (every
//! loader on real inputs, the index builds, queries, a large patch checked and converted) runs
//! several times with instrumented drivers: the operation's own and every helper thread's
//! (`Resched::sibling`) record each stretch between two points in thread CPU time, with the
//! points' file:line and the loader's phase. Every run is judged (see `judge.rs` for the rule
//! that tells the machine's noise from the code's overruns).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::record::{DriverRecord, Recorder, HISTOGRAM_US};
use klpsym_core::resched::{Resched, ReschedPolicy};
use klpsym_core::{find_object_symbol, write_kallsyms, LookupRequest, SymbolTable};
use klpsym_io::{load, LoadOptions};

use crate::job::Job;
use crate::judge::{self, Calibration, Finding, NoisePool, Rule, Run};

type BoxError = Box<dyn std::error::Error>;

/// What `klpsym-bench resched` measures.
#[derive(Debug, Clone)]
pub struct BoundArgs {
    /// A saved kallsyms: loaded, and the table of the index, query and patch operations.
    pub kernel: PathBuf,
    /// The live /proc/kallsyms: `Some` makes it required; `None` judges /proc/kallsyms when
    /// it can be read.
    pub live: Option<PathBuf>,
    pub no_live: bool,
    pub image: Option<PathBuf>,
    pub vmlinux: Option<PathBuf>,
    pub debug_vmlinux: Option<PathBuf>,
    pub image_deb: Option<PathBuf>,
    pub dbg_deb: Option<PathBuf>,
    pub modules: Option<PathBuf>,
    pub interval: Duration,
    pub bound: Duration,
    pub cap: Duration,
    pub runs: usize,
    pub extra_runs: usize,
    pub noisy_retries: usize,
    /// The compute calibration before each run.
    pub calibrate: Duration,
    pub policy_yield: bool,
    /// Only the operations whose name holds one of these (all when empty).
    pub only: Vec<String>,
}

/// One operation's verdict.
#[derive(Debug, serde::Serialize)]
pub struct OpResult {
    pub op: String,
    /// `ok`, `OVER` or `too noisy to judge`.
    pub verdict: String,
    pub runs_judged: usize,
    pub runs_noisy: usize,
    pub median_ms: f64,
    /// Points per judged run (median), all drivers.
    pub points: u64,
    /// Per judged run: the longest stretch and the run's threshold (bound + allowance).
    pub longest_us: Vec<f64>,
    pub threshold_us: Vec<f64>,
    /// Places with overruns: over (the code's), lone (seen in one run), noise.
    pub findings: Vec<FindingOut>,
    /// Per helper driver (by where it was made): its longest stretch over all runs.
    pub helpers: Vec<(String, f64)>,
}

/// A place with overruns.
#[derive(Debug, serde::Serialize)]
pub struct FindingOut {
    pub kind: String,
    pub place: String,
    pub longest_us: f64,
    pub overruns: u64,
    pub runs_with_overruns: usize,
    pub stretches: u64,
    pub faults_per_stretch: f64,
    /// How likely noise alone puts these overruns there.
    pub p_noise: f64,
}

const VERDICT_OK: &str = "ok";
const VERDICT_OVER: &str = "OVER";
const VERDICT_NOISY: &str = "too noisy to judge";

struct Gate {
    args: BoundArgs,
    /// The saved kallsyms' table, walked by a calibration.
    walk: SymbolTable,
    rule: Rule,
    pool: NoisePool,
    recorder: Recorder,
    results: Vec<OpResult>,
}

/// How an operation is handed its driver.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// The gate's instrumented driver; the operation's end is a point.
    Given,
    /// The operation makes its own from options carrying the gate's recorder (the library's
    /// `open_all`); it is handed a driver that records nothing.
    Own,
}

impl Gate {
    fn policy(&self) -> ReschedPolicy {
        if self.args.policy_yield {
            ReschedPolicy::Yield
        } else {
            ReschedPolicy::Nothing
        }
    }

    /// The machine alone: `compute` of uniform 50 ns items, then `pages` first touches of
    /// fresh memory, one per step, both with points as klpsym's loops reach them.
    fn calibrate(&self, compute_time: Duration, pages: usize) -> Result<Calibration, BoxError> {
        let rec = Recorder::new(crate::sys::thread_cpu_time, Duration::MAX)
            .with_fault_counter(crate::sys::thread_minor_faults);
        let histogram = |records: &[DriverRecord]| {
            records
                .last()
                .map_or_else(|| vec![0; HISTOGRAM_US + 1], |r| r.histogram.clone())
        };
        {
            let mut r = Resched::new(self.policy())
                .with_interval(self.args.interval)
                .with_recorder(rec.clone());
            let mut acc = 0u64;
            let t0 = Instant::now();
            while t0.elapsed() < compute_time {
                for i in 0..64u64 {
                    acc =
                        std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
                r.tick()?;
            }
            std::hint::black_box(acc);
        }
        let compute = histogram(&rec.take());
        {
            // The table walked again and again, a tick per symbol.
            let mut r = Resched::new(self.policy())
                .with_interval(self.args.interval)
                .with_recorder(rec.clone());
            let t0 = Instant::now();
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            'walk: loop {
                for s in self.walk.iter() {
                    for &b in s.name.as_bytes() {
                        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
                    }
                    h ^= s.addr;
                    r.tick()?;
                    if t0.elapsed() >= compute_time / 2 {
                        break 'walk;
                    }
                }
            }
            std::hint::black_box(h);
        }
        let walk = histogram(&rec.take());
        {
            let mut v = Vec::<u8>::with_capacity(pages << 12);
            let mut r = Resched::new(self.policy())
                .with_interval(self.args.interval)
                .with_recorder(rec.clone());
            let spare = v.spare_capacity_mut();
            for i in (0..spare.len()).step_by(4096) {
                // black_box: the write must happen (nothing reads it back).
                std::hint::black_box(spare[i].write(1));
                r.tick_step()?;
            }
            drop(r);
            drop(v);
        }
        let records = rec.take();
        let touch = histogram(&records);
        let touch_faults = records
            .iter()
            .flat_map(|r| r.sites.values())
            .map(|s| s.faults)
            .sum();
        Ok(Calibration {
            compute,
            walk,
            touch,
            touch_faults,
        })
    }

    /// One run: its calibration, then the operation with every driver recording.
    fn one_run<P, T>(
        &mut self,
        driver: Driver,
        prepare: &mut impl FnMut() -> Result<P, BoxError>,
        op: &mut impl FnMut(P, &mut Resched) -> Result<T, BoxError>,
    ) -> Result<Run, BoxError> {
        let calibration = self.calibrate(self.args.calibrate, 16 << 10)?;
        self.pool.add(&calibration);
        let input = prepare()?;
        let _ = self.recorder.take();
        // The operation starts on a settled machine, not in the wake of the calibration's
        // memory work: right after it, the first system calls of an operation (a stat, an
        // open) took 150-800 µs of the thread's CPU time in 3-5 of 5 runs (CI runs of
        // 2026-12-07; the same calls take 1-4 µs, 8 at the 99th percentile, on this machine).
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut r = match driver {
            Driver::Given => Resched::new(self.policy())
                .with_interval(self.args.interval)
                .with_recorder(self.recorder.clone()),
            Driver::Own => Resched::none(),
        };
        let t0 = Instant::now();
        let out = op(input, &mut r)?;
        if driver == Driver::Given {
            // The operation's end: the caller has the CPU back.
            r.point()?;
        }
        let took = t0.elapsed();
        drop(r);
        // What the output holds (a table keeps a driver for later work) hands in its record.
        drop(out);
        let records = self.recorder.take();
        let allowance = calibration.allowance(self.rule.interval);
        Ok(Run {
            noisy: allowance > self.rule.cap,
            records,
            took,
            allowance,
        })
    }

    /// Runs `op` until [`Rule::runs`] runs are judged (and more for lone overruns), each after
    /// `prepare` (not measured), and prints the verdict.
    fn measure<P, T>(
        &mut self,
        name: &str,
        driver: Driver,
        mut prepare: impl FnMut() -> Result<P, BoxError>,
        mut op: impl FnMut(P, &mut Resched) -> Result<T, BoxError>,
    ) -> Result<(), BoxError> {
        if !self.args.only.is_empty() && !self.args.only.iter().any(|o| name.contains(o.as_str())) {
            return Ok(());
        }
        let rule = self.rule.clone();
        let mut runs: Vec<Run> = Vec::new();
        let judged = |runs: &[Run]| runs.iter().filter(|r| !r.noisy).count();
        let noisy = |runs: &[Run]| runs.iter().filter(|r| r.noisy).count();
        while judged(&runs) < rule.runs && noisy(&runs) <= rule.noisy_retries {
            runs.push(self.one_run(driver, &mut prepare, &mut op)?);
        }
        let mut extra = 0;
        while judged(&runs) >= rule.runs
            && extra < rule.extra_runs
            && noisy(&runs) <= rule.noisy_retries
            && judge::tally(&runs, &rule, &self.pool)
                .findings()
                .iter()
                .any(|f| f.0 == Finding::Lone)
        {
            let run = self.one_run(driver, &mut prepare, &mut op)?;
            extra += usize::from(!run.noisy);
            runs.push(run);
        }
        let res = self.verdict(name, &runs);
        print_result(&res, &runs, &rule);
        self.results.push(res);
        Ok(())
    }

    fn verdict(&self, name: &str, runs: &[Run]) -> OpResult {
        let rule = &self.rule;
        let j = judge::tally(runs, rule, &self.pool);
        let findings: Vec<FindingOut> = j
            .findings()
            .into_iter()
            .map(|(f, place, t)| FindingOut {
                kind: match f {
                    Finding::Over => "over",
                    Finding::Lone => "unconfirmed",
                    Finding::Noise => "noise",
                }
                .to_string(),
                place: place.describe(t.thread.as_deref()),
                longest_us: us(t.longest),
                overruns: t.over,
                runs_with_overruns: t.runs_over.len(),
                stretches: t.count,
                faults_per_stretch: t.faults as f64 / t.count.max(1) as f64,
                p_noise: t.p_noise,
            })
            .collect();
        let judged: Vec<&Run> = runs.iter().filter(|r| !r.noisy).collect();
        let mut times: Vec<Duration> = runs.iter().map(|r| r.took).collect();
        times.sort();
        let mut points: Vec<u64> = judged
            .iter()
            .map(|r| r.records.iter().map(|d| d.stats.points).sum())
            .collect();
        points.sort_unstable();
        let mut helpers: Vec<(String, f64)> = Vec::new();
        for r in runs {
            for d in &r.records {
                let Some(o) = d.origin else { continue };
                let label = format!(
                    "{}{}:{}",
                    d.thread
                        .as_deref()
                        .map_or(String::new(), |t| format!("'{t}' ")),
                    o.file(),
                    o.line()
                );
                let longest = us(d
                    .sites
                    .values()
                    .map(|s| s.longest)
                    .max()
                    .unwrap_or_default());
                match helpers.iter_mut().find(|h| h.0 == label) {
                    Some(h) => h.1 = h.1.max(longest),
                    None => helpers.push((label, longest)),
                }
            }
        }
        let verdict = if judged.len() < rule.runs {
            VERDICT_NOISY
        } else if findings.iter().any(|f| f.kind == "over") {
            VERDICT_OVER
        } else {
            VERDICT_OK
        };
        OpResult {
            op: name.to_string(),
            verdict: verdict.to_string(),
            runs_judged: judged.len(),
            runs_noisy: runs.len() - judged.len(),
            median_ms: times
                .get(times.len() / 2)
                .map_or(0.0, |t| t.as_secs_f64() * 1e3),
            points: points.get(points.len() / 2).copied().unwrap_or_default(),
            longest_us: judged
                .iter()
                .map(|r| r.longest().map_or(0.0, |l| us(l.0)))
                .collect(),
            threshold_us: judged.iter().map(|r| us(r.threshold(rule))).collect(),
            findings,
            helpers,
        }
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn print_result(res: &OpResult, runs: &[Run], rule: &Rule) {
    let per_run: Vec<String> = res
        .longest_us
        .iter()
        .zip(&res.threshold_us)
        .map(|(l, t)| format!("{l:.1}/{t:.0}"))
        .collect();
    println!(
        "{:<48} {:>9.1} {:>8} {:>3}+{:<2} {:<30} {}",
        res.op,
        res.median_ms,
        res.points,
        res.runs_judged,
        res.runs_noisy,
        per_run.join(" "),
        res.verdict
    );
    if res.verdict == VERDICT_NOISY {
        let allowances: Vec<String> = runs
            .iter()
            .map(|r| format!("{:.0}", us(r.allowance)))
            .collect();
        println!(
            "    the machine was too noisy to judge this: {} of {} runs' calibrations needed more than the {:.0} µs allowance cap (their allowances, µs: {})",
            res.runs_noisy,
            runs.len(),
            us(rule.cap),
            allowances.join(", ")
        );
    }
    let noise: Vec<&FindingOut> = res.findings.iter().filter(|f| f.kind == "noise").collect();
    if !noise.is_empty() {
        println!(
            "    noise: {} overrun{} at {} place{}, as the calibrations' noise explains (longest {:.1} µs)",
            noise.iter().map(|f| f.overruns).sum::<u64>(),
            if noise.iter().map(|f| f.overruns).sum::<u64>() == 1 { "" } else { "s" },
            noise.len(),
            if noise.len() == 1 { "" } else { "s" },
            noise.iter().map(|f| f.longest_us).fold(0.0, f64::max)
        );
    }
    for f in res.findings.iter().filter(|f| f.kind != "noise") {
        let what = if f.kind == "over" {
            "OVER       "
        } else {
            "unconfirmed"
        };
        println!(
            "    {what} {:.1} µs; {} overrun{} in {} of {} runs, {} stretches ({:.1} faults each), noise p={:.1e}: {}",
            f.longest_us,
            f.overruns,
            if f.overruns == 1 { "" } else { "s" },
            f.runs_with_overruns,
            res.runs_judged,
            f.stretches,
            f.faults_per_stretch,
            f.p_noise,
            f.place
        );
    }
    for (h, longest) in &res.helpers {
        println!("    helper {h}: longest {longest:.1} µs");
    }
}

pub(crate) fn loaded(path: &Path) -> Result<SymbolTable, BoxError> {
    Ok(load(path, &LoadOptions::default(), &mut Resched::none())?.table)
}

/// A folder holding links to `files`, removed when dropped.
struct LinkFolder(PathBuf);

impl LinkFolder {
    fn new(files: &[&Path]) -> Result<LinkFolder, BoxError> {
        let dir = tempfile::Builder::new()
            .prefix("klpsym-bench-folder.")
            .tempdir()?
            .keep();
        for f in files {
            let name = f.file_name().ok_or("a package path without a file name")?;
            std::os::unix::fs::symlink(std::fs::canonicalize(f)?, dir.join(name))?;
        }
        Ok(LinkFolder(dir))
    }
}

impl Drop for LinkFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// /proc/kallsyms (or the file given) when it can be read, or why not.
fn readable(p: &Path) -> Result<(), String> {
    let mut head = [0u8; 64];
    std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .map_err(|e| format!("{}: {e}", p.display()))
        .and_then(|n| {
            if n == 0 {
                Err(format!("{}: empty", p.display()))
            } else {
                Ok(())
            }
        })
}

/// The results of every operation, and the verdict: an error naming the operations over the
/// bound or too noisy to judge.
pub type Verdict = Result<(), BoxError>;

/// Runs every operation and prints the verdicts.
pub fn run(args: BoundArgs) -> Result<(Vec<OpResult>, Verdict), BoxError> {
    let rule = Rule {
        bound: args.bound,
        interval: args.interval,
        cap: args.cap,
        runs: args.runs.max(2),
        extra_runs: args.extra_runs,
        noisy_retries: args.noisy_retries,
    };
    println!(
        "interval {} µs, bound {} µs, allowance capped at {} µs; {} judged runs per operation (up to {} more for an overrun seen once; up to {} noisy runs redone); points: {}. A stretch is a thread's CPU time between two points; the figures per run are longest/threshold in µs.",
        args.interval.as_micros(),
        args.bound.as_micros(),
        args.cap.as_micros(),
        rule.runs,
        rule.extra_runs,
        rule.noisy_retries,
        if args.policy_yield { "sched_yield" } else { "nothing (measure only)" }
    );
    let mut x = Gate {
        walk: loaded(&args.kernel)?,
        rule,
        pool: NoisePool::default(),
        recorder: Recorder::new(crate::sys::thread_cpu_time, args.bound)
            .with_fault_counter(crate::sys::thread_minor_faults),
        results: Vec::new(),
        args: args.clone(),
    };
    // The noise pool starts with a long calibration: 1 s of compute, 256 MiB of fresh pages.
    let t0 = Instant::now();
    let first = x.calibrate(Duration::from_secs(1), 64 << 10)?;
    x.pool.add(&first);
    let q = |h: &[u64], s: f64| us(klpsym_core::record::quantile(h, s).unwrap_or_default());
    println!(
        "the machine alone ({:.1} s): compute stretches p50 {:.0} µs, p99.9 {:.0} µs, longest {:.0} µs; table walk p50 {:.0} µs, p99.9 {:.0} µs, longest {:.0} µs; first-touch p50 {:.0} µs, p99.9 {:.0} µs, longest {:.0} µs; allowance now {:.0} µs",
        t0.elapsed().as_secs_f64(),
        q(&first.compute, 0.5),
        q(&first.compute, 0.999),
        q(&first.compute, 1.0),
        q(&first.walk, 0.5),
        q(&first.walk, 0.999),
        q(&first.walk, 1.0),
        q(&first.touch, 0.5),
        q(&first.touch, 0.999),
        q(&first.touch, 1.0),
        us(first.allowance(args.interval))
    );
    println!(
        "{:<48} {:>9} {:>8} {:>6} {:<30} verdict",
        "operation", "median ms", "points", "runs", "longest/threshold per run"
    );
    let t0 = Instant::now();
    operations(&mut x, &args)?;
    let bad: Vec<String> = x
        .results
        .iter()
        .filter(|r| r.verdict != VERDICT_OK)
        .map(|r| format!("{} ({})", r.op, r.verdict))
        .collect();
    println!(
        "{} operations in {:.0} s; the noise pool ({} calibrated stretches): {}",
        x.results.len(),
        t0.elapsed().as_secs_f64(),
        x.pool.stretches(),
        x.pool.describe()
    );
    let verdict = if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("not within the bound: {}", bad.join("; ")).into())
    };
    Ok((x.results, verdict))
}

fn operations(x: &mut Gate, args: &BoundArgs) -> Result<(), BoxError> {
    let none = || Ok(());
    let kernel = args.kernel.clone();
    x.measure(
        &format!("load {}", file_name(&kernel)),
        Driver::Given,
        none,
        |(), r| Ok(load(&kernel, &LoadOptions::default(), r)?),
    )?;
    let live = match (&args.live, args.no_live) {
        (_, true) => None,
        (Some(p), false) => {
            readable(p)?;
            Some(p.clone())
        }
        (None, false) => {
            let p = PathBuf::from("/proc/kallsyms");
            match readable(&p) {
                Ok(()) if p != kernel => Some(p),
                Ok(()) => None,
                Err(e) => {
                    println!("not judged: the live kallsyms ({e})");
                    None
                }
            }
        }
    };
    if let Some(p) = live {
        x.measure(
            &format!("load {} (live)", p.display()),
            Driver::Given,
            none,
            |(), r| Ok(load(&p, &LoadOptions::default(), r)?),
        )?;
    }
    x.measure(
        "build name + address indexes",
        Driver::Given,
        || loaded(&kernel),
        |t, r| {
            t.build_indexes(r)?;
            Ok(t)
        },
    )?;
    queries(x, &kernel)?;
    loaders(x, args)
}

/// The operations over one table: dump, symbolize, resolve, check and convert a large patch.
fn queries(x: &mut Gate, kernel: &Path) -> Result<(), BoxError> {
    let none = || Ok(());
    let t = loaded(kernel)?;
    t.build_indexes(&mut Resched::none())?;
    x.measure(
        "dump (/proc/kallsyms format)",
        Driver::Given,
        none,
        |(), r| Ok(write_kallsyms(&t, &mut std::io::sink(), r)?),
    )?;
    let starts: Vec<u64> = t.iter().map(|s| s.addr).collect();
    x.measure(
        &format!("symbolize {} addresses one by one", starts.len()),
        Driver::Given,
        none,
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
        Driver::Given,
        none,
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
        Driver::Given,
        none,
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
        Driver::Given,
        none,
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
        Driver::Given,
        none,
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
    )
}

/// The loaders of a kernel's files: image, vmlinux (stripped and with debug info), packages,
/// module tree, and a folder of packages opened as the library opens one.
fn loaders(x: &mut Gate, args: &BoundArgs) -> Result<(), BoxError> {
    let none = || Ok(());
    let files = [
        ("image", &args.image),
        ("stripped vmlinux", &args.vmlinux),
        ("debug vmlinux", &args.debug_vmlinux),
        ("image package", &args.image_deb),
    ];
    for (what, path) in files {
        let Some(p) = path.clone() else { continue };
        // Freed in steps (a -dbg vmlinux's table is tens of megabytes): part of the run.
        x.measure(
            &format!("load {what} {}", file_name(&p)),
            Driver::Given,
            none,
            |(), r| {
                let k = load(&p, &LoadOptions::default(), r)?;
                let n = k.table.len();
                k.free_with(r)?;
                Ok(n)
            },
        )?;
    }
    if let Some(elf) = args.debug_vmlinux.clone() {
        copies(x, &elf)?;
    }
    if let Some(dir) = args.modules.clone() {
        x.measure(
            &format!("scan the module tree {}", file_name(&dir)),
            Driver::Given,
            none,
            |(), r| {
                let tree = klpsym_io::ModuleTree::scan_with(&dir, r)?;
                let n = tree.len();
                tree.free_with(r)?;
                Ok(n)
            },
        )?;
        let tree = klpsym_io::ModuleTree::scan(&dir)?;
        let files: Vec<&Path> = tree.files().map(klpsym_io::ModuleFile::label).collect();
        x.measure(
            &format!("load {} modules", files.len()),
            Driver::Given,
            none,
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
    let packages: Vec<&Path> = [&args.image_deb, &args.dbg_deb]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    if !packages.is_empty() {
        let folder = LinkFolder::new(&packages)?;
        let mut opts = klpsym::Options::new().cache(klpsym::CacheDir::Off);
        opts.interval = args.interval;
        opts.recorder = Some(x.recorder.clone());
        if args.policy_yield {
            opts = opts.yield_cpu(true);
        }
        if let Some(m) = &args.modules {
            opts = opts.modules(m);
        }
        let folder_path = folder.0.clone();
        x.measure(
            &format!(
                "open a folder of {} package{}{}",
                packages.len(),
                if packages.len() == 1 { "" } else { "s" },
                if args.modules.is_some() {
                    " and the module tree"
                } else {
                    ""
                }
            ),
            Driver::Own,
            none,
            |(), _| {
                let opened = klpsym::open_all(std::slice::from_ref(&folder_path), &opts)?;
                let mut symbols = 0;
                for o in opened {
                    symbols += o.kernel?.table().len();
                }
                Ok(symbols)
            },
        )?;
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
pub(crate) fn resolve_job(
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
pub(crate) fn random_addresses(starts: &[u64], n: usize) -> Vec<u64> {
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

/// The DWARF walks of a vmlinux with debug info: every copy of a spread of its static
/// functions (what a check's coverage reads), and the index of all of it (one walk of every
/// unit, what `copies NAME` needs once).
fn copies(x: &mut Gate, elf: &Path) -> Result<(), BoxError> {
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
        Driver::Given,
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
        Driver::Given,
        || Ok(()),
        |(), r| Ok(lines.copies_index(r)?.free_with_points(r)?),
    )?;
    Ok(())
}
