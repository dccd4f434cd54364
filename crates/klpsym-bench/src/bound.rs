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
use klpsym_core::SymbolTable;
use klpsym_io::{load, LoadOptions};

use crate::judge::{self, Calibration, Finding, Fitness, NoisePool, Rule, Run};

mod ops;
use ops::operations;
pub(crate) use ops::{random_addresses, resolve_job};

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
    /// The threshold on a machine unfit to judge the bound ([`Fitness`]).
    pub gross: Duration,
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
    /// `ok`, `OVER`, `too noisy to judge` or `not judged (unfit machine)`.
    pub verdict: String,
    /// The median first-touch stretch of the probe before the operation, and whether that
    /// let the machine judge the bound (else only overruns past the gross threshold were).
    pub touch_p50_us: f64,
    pub fit: bool,
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
const VERDICT_UNFIT: &str = "not judged (unfit machine)";

struct Gate {
    args: BoundArgs,
    /// The saved kallsyms' table, walked by a calibration.
    walk: SymbolTable,
    rule: Rule,
    pool: NoisePool,
    recorder: Recorder,
    results: Vec<OpResult>,
    /// The machine's fitness, probed before the operation under way.
    fitness: Fitness,
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
            .with_fault_counter(crate::sys::thread_fresh_pages);
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
        let (touch, touch_faults) = self.touch(pages)?;
        Ok(Calibration {
            compute,
            walk,
            touch,
            touch_faults,
        })
    }

    /// First touches of `pages` fresh pages, one per step: their stretches (1 µs buckets)
    /// and the page faults they took.
    fn touch(&self, pages: usize) -> Result<(Vec<u64>, u64), BoxError> {
        let rec = Recorder::new(crate::sys::thread_cpu_time, Duration::MAX)
            .with_fault_counter(crate::sys::thread_fresh_pages);
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
        let touch = records
            .last()
            .map_or_else(|| vec![0; HISTOGRAM_US + 1], |r| r.histogram.clone());
        let faults = records
            .iter()
            .flat_map(|r| r.sites.values())
            .map(|s| s.faults)
            .sum();
        Ok((touch, faults))
    }

    /// Before an operation: is the machine fit to judge the bound? 64 MiB of first touches
    /// (their stretches join the noise pool), judged by [`Fitness::from_touch`].
    fn probe(&mut self) -> Result<Fitness, BoxError> {
        let (touch, touch_faults) = self.touch(16 << 10)?;
        let fitness = Fitness::from_touch(&touch, self.rule.bound);
        self.pool.add(&Calibration {
            compute: Vec::new(),
            walk: Vec::new(),
            touch,
            touch_faults,
        });
        Ok(fitness)
    }

    /// One run: its calibration, then the operation with every driver recording.
    fn one_run<P, T>(
        &mut self,
        driver: Driver,
        prepare: &mut impl FnMut() -> Result<P, BoxError>,
        op: &mut impl FnMut(P, &mut Resched) -> Result<T, BoxError>,
    ) -> Result<Run, BoxError> {
        // 4 MiB of first touches: with 64 MiB here (as before 2026-12-07), the operation's
        // first system call right after (a stat of its input) took 150-1,050 µs of CPU time
        // in 3 of 10 tries on this project's VM; with 4 MiB, 4-19 µs (a C program: touch,
        // unmap, sleep 5 ms, stat; the host reclaims what a large touch pushes out). The
        // probe before each operation measures large touches; its churn is absorbed by the
        // operation's warm-up run.
        let calibration = self.calibrate(self.args.calibrate, 1 << 10)?;
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
            fit: self.fitness.fit,
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
        // Is the machine fit to judge the bound now? Then one run of the operation, not
        // measured: its first stretches are not charged with the probe's or the last
        // operation's churn (what is cold for a user is cold here too: fresh pages stay
        // fresh, the buffers of a run are freed before the next).
        self.fitness = self.probe()?;
        {
            let input = prepare()?;
            drop(op(input, &mut Resched::none())?);
            let _ = self.recorder.take();
        }
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
        } else if !self.fitness.fit {
            VERDICT_UNFIT
        } else {
            VERDICT_OK
        };
        OpResult {
            op: name.to_string(),
            verdict: verdict.to_string(),
            touch_p50_us: us(self.fitness.touch_p50),
            fit: self.fitness.fit,
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
    if !res.fit {
        println!(
            "    the machine could not judge the bound: the probe before this operation found a median first-touch stretch of {:.0} µs, over the {:.0} µs bound itself; only overruns past {:.0} µs were judged{}",
            res.touch_p50_us,
            us(rule.bound),
            us(rule.gross),
            if res.verdict == VERDICT_OVER { "" } else { ", and none was the code's" }
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
            "    {what} {:.1} µs; {} overrun{} in {} of {} runs, {} stretches ({:.1} fresh pages each), noise p={:.1e}: {}",
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

/// The gate's outcome over every operation.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every operation judged within the bound.
    Within,
    /// Operations over the bound (named): the code's, whatever else was not judged.
    Over(String),
    /// Nothing over, but operations not judged at the bound (named): the machine too noisy
    /// or unfit while they ran.
    NotJudged(String),
}

/// Runs every operation and prints the verdicts.
pub fn run(args: BoundArgs) -> Result<(Vec<OpResult>, Verdict), BoxError> {
    let rule = Rule {
        bound: args.bound,
        interval: args.interval,
        cap: args.cap,
        runs: args.runs.max(2),
        extra_runs: args.extra_runs,
        noisy_retries: args.noisy_retries,
        gross: args.gross,
    };
    println!(
        "interval {} µs, bound {} µs, allowance capped at {} µs ({} µs on a machine unfit to judge the bound); {} judged runs per operation (up to {} more for an overrun seen once; up to {} noisy runs redone); points: {}. A stretch is a thread's CPU time between two points; the figures per run are longest/threshold in µs.",
        args.interval.as_micros(),
        args.bound.as_micros(),
        args.cap.as_micros(),
        args.gross.as_micros(),
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
            .with_fault_counter(crate::sys::thread_fresh_pages),
        results: Vec::new(),
        fitness: Fitness {
            touch_p50: Duration::ZERO,
            fit: true,
        },
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
    let named = |which: &dyn Fn(&str) -> bool| -> Vec<String> {
        x.results
            .iter()
            .filter(|r| which(&r.verdict))
            .map(|r| format!("{} ({})", r.op, r.verdict))
            .collect()
    };
    let over = named(&|v| v == VERDICT_OVER);
    let not_judged = named(&|v| v == VERDICT_NOISY || v == VERDICT_UNFIT);
    println!(
        "{} operations in {:.0} s; the noise pool ({} calibrated stretches): {}",
        x.results.len(),
        t0.elapsed().as_secs_f64(),
        x.pool.stretches(),
        x.pool.describe()
    );
    let verdict = if !over.is_empty() {
        Verdict::Over(over.join("; "))
    } else if !not_judged.is_empty() {
        Verdict::NotJudged(not_judged.join("; "))
    } else {
        Verdict::Within
    };
    Ok((x.results, verdict))
}
