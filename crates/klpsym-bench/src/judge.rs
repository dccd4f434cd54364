//! The verdict of `klpsym-bench resched`: every run of every operation is judged, and the
//! machine's noise is told from the code's overruns by where they happen, not by keeping the
//! best run.
//!
//! - A stretch is a thread's CPU time between two reschedule points; its **place** is the
//!   driver it belongs to (the operation's own, or a helper's, by where `Resched::sibling`
//!   made it) and its [`Site`] (the two points, file:line, and the loader's phase at each).
//! - Before each run the machine is **calibrated** alone: uniform 50 ns items (compute), then
//!   first touches of fresh pages (what loaders of big inputs do), both ticking as klpsym's
//!   loops do. The run's **allowance** is the compute calibration's 99.9th percentile over
//!   the interval: the jitter the machine adds to an ordinary stretch. It is capped
//!   ([`Rule::cap`]); a run whose calibration needs more is **noisy**: it is not judged and
//!   is run again, and an operation that gets no [`Rule::runs`] judged runs within
//!   [`Rule::noisy_retries`] more attempts fails as *too noisy to judge*, never passes.
//! - In a judged run, a stretch longer than the bound plus the run's allowance is an
//!   **overrun**. Noise puts overruns anywhere, at rates the calibrations measure (all of this
//!   gate's so far): the share of their stretches at least as long as a given length, the
//!   compute calibration's for any stretch, the first-touch calibration's scaled by the fresh
//!   pages a place's stretches take (the thread's page faults and the pages its file reads
//!   and writes brought into the page cache, counted per stretch: each a page the kernel
//!   takes from free memory, as a first touch does). Code
//!   puts overruns at the same place run after run. A place is **over** when its overruns came
//!   in two runs or more and noise is too unlikely to have put them there: for each j, the
//!   j-th longest of its overruns against a Poisson law whose mean is the place's number of
//!   stretches times the noise rate at that length times [`SAFETY`]; the smallest of these
//!   probabilities below [`ALPHA`].
//! - A place whose overruns came in one run only, more than noise explains, is **lone**: the
//!   operation runs again (up to [`Rule::extra_runs`] more judged runs) and the place is
//!   judged with the new runs; one that never comes back is reported as seen once, not
//!   failed.
//! - Before each operation a probe tells whether the machine can judge the bound at all
//!   ([`Fitness`]): where its fresh pages alone take stretches past the bound, the runs are
//!   judged against [`Rule::gross`] only, and the operation is *not judged* unless a gross
//!   overrun is found.

use std::collections::{BTreeSet, HashMap};
use std::panic::Location;
use std::time::Duration;

use klpsym_core::record::{quantile, DriverRecord, Site};

/// The factor on the noise expected at a place: the machine's noise comes in bursts and
/// varies over a gate run (measured: see docs/performance.md), and an overrun judged real
/// must be more than that variation explains.
pub const SAFETY: f64 = 10.0;

/// How improbable a place's overruns must be as noise to be judged the code's.
pub const ALPHA: f64 = 1e-4;

/// A place's overruns in one run are worth running again for when noise explains them with
/// a probability under this.
pub const LONE_ALPHA: f64 = 0.01;

/// The share of a calibration's stretches its allowance covers.
pub const ALLOWANCE_QUANTILE: f64 = 0.999;

/// How runs are judged.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The bound every stretch must hold.
    pub bound: Duration,
    /// The interval between points under test.
    pub interval: Duration,
    /// The most allowance a run may get.
    pub cap: Duration,
    /// Judged runs per operation.
    pub runs: usize,
    /// More judged runs, at most, for lone overruns.
    pub extra_runs: usize,
    /// Noisy runs tolerated per operation before it fails as too noisy to judge.
    pub noisy_retries: usize,
    /// The threshold of every run on a machine unfit to judge the bound (see
    /// [`Fitness`]): only overruns past it are judged there, so a gross overrun (a loop left
    /// without points: milliseconds, in every run) still fails. 2 ms by default: the
    /// longest stretches an unfit machine showed alone were 0.9-1.1 ms (2026-12-07).
    pub gross: Duration,
}

/// Whether the machine can judge the bound at all: on some hosts every fresh page costs a
/// host-side fault (measured on this project's VM, 2026-12-07: a first-touch stretch's median
/// 132-145 µs on such an evening, 50 µs, the interval, on others), and then stretches of
/// ordinary loops and single system calls pass the bound with nothing in the code to blame.
#[derive(Debug, Clone, Copy)]
pub struct Fitness {
    /// The median first-touch stretch of the probe before the operation.
    pub touch_p50: Duration,
    /// True when that median holds the bound.
    pub fit: bool,
}

impl Fitness {
    /// Judged from a probe's first-touch stretches (1 µs buckets).
    pub fn from_touch(touch: &[u64], bound: Duration) -> Fitness {
        let p50 = quantile(touch, 0.5).unwrap_or_default();
        Fitness {
            touch_p50: p50,
            fit: p50 <= bound,
        }
    }
}

/// The machine alone, right before a run: the stretch lengths of both calibrations.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Uniform 50 ns items.
    pub compute: Vec<u64>,
    /// A walk over a real symbol table, a tick per symbol (its name hashed): the shape of
    /// klpsym's own loops, known to have no long item. The machine's noise hits such work
    /// harder than the compute loop (measured: see docs/performance.md).
    pub walk: Vec<u64>,
    /// First touches of fresh pages, one per step.
    pub touch: Vec<u64>,
    /// The page faults those took.
    pub touch_faults: u64,
}

impl Calibration {
    /// The jitter the machine adds to an ordinary stretch (uncapped).
    pub fn allowance(&self, interval: Duration) -> Duration {
        quantile(&self.compute, ALLOWANCE_QUANTILE)
            .unwrap_or_default()
            .saturating_sub(interval)
    }
}

/// All calibrations of this gate so far, added up: the noise rates come from them.
#[derive(Debug, Clone, Default)]
pub struct NoisePool {
    compute: Vec<u64>,
    walk: Vec<u64>,
    touch: Vec<u64>,
    touch_faults: u64,
}

/// The share of the stretches counted in `h` (1 µs buckets) that are `length` or longer,
/// counted as if one more was (a rate is never zero); 0 for an empty histogram.
fn share_at_least(h: &[u64], length: Duration) -> f64 {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return 0.0;
    }
    // Bucket i holds stretches of i µs (rounded down).
    let over: u64 = h.iter().skip(length.as_micros() as usize).sum();
    (over + 1) as f64 / (total + 1) as f64
}

impl NoisePool {
    /// Adds a calibration.
    pub fn add(&mut self, c: &Calibration) {
        add_into(&mut self.compute, &c.compute);
        add_into(&mut self.walk, &c.walk);
        add_into(&mut self.touch, &c.touch);
        self.touch_faults += c.touch_faults;
    }

    /// The share of the machine's stretches `length` or longer, for stretches that take
    /// `faults` fresh pages each on average (page faults, pages read or written: see
    /// `sys::thread_fresh_pages`): the compute or walk calibration's, or the first-touch
    /// calibration's scaled by those pages against its own per stretch,
    /// whichever is largest.
    pub fn rate(&self, length: Duration, faults: f64) -> f64 {
        let touch_stretches: u64 = self.touch.iter().sum();
        let per_stretch = self.touch_faults as f64 / touch_stretches.max(1) as f64;
        let scale = if per_stretch > 0.0 {
            (faults / per_stretch).min(1.0)
        } else {
            0.0
        };
        share_at_least(&self.compute, length)
            .max(share_at_least(&self.walk, length))
            .max(share_at_least(&self.touch, length) * scale)
    }

    /// The share of each calibration's stretches at least 100, 150, 200, 300 and 1000 µs.
    pub fn describe(&self) -> String {
        let lengths = [100u64, 150, 200, 300, 1000];
        let row = |what: &str, h: &[u64]| {
            let total: u64 = h.iter().sum();
            let shares: Vec<String> = lengths
                .iter()
                .map(|&l| {
                    let over: u64 = h.iter().skip(l as usize).sum();
                    format!("{:.4}%", over as f64 * 100.0 / total.max(1) as f64)
                })
                .collect();
            format!("{what} {}", shares.join("/"))
        };
        format!(
            "share of stretches of 100/150/200/300/1000 µs and more: {}; {}; {}",
            row("compute", &self.compute),
            row("walk", &self.walk),
            row("first touch", &self.touch)
        )
    }

    /// Stretches counted.
    pub fn stretches(&self) -> u64 {
        self.compute
            .iter()
            .chain(&self.walk)
            .chain(&self.touch)
            .sum()
    }
}

fn add_into(to: &mut Vec<u64>, from: &[u64]) {
    if to.len() < from.len() {
        to.resize(from.len(), 0);
    }
    for (t, f) in to.iter_mut().zip(from) {
        *t += f;
    }
}

/// One run of an operation.
#[derive(Debug)]
pub struct Run {
    /// What every driver of the run recorded (the operation's own and its helpers').
    pub records: Vec<DriverRecord>,
    /// The run's wall time.
    pub took: Duration,
    /// Its allowance (uncapped) and whether that made it noisy.
    pub allowance: Duration,
    pub noisy: bool,
    /// Whether the machine was fit to judge the bound (see [`Fitness`]).
    pub fit: bool,
}

impl Run {
    /// Its threshold: the bound plus its allowance; [`Rule::gross`] on an unfit machine.
    pub fn threshold(&self, rule: &Rule) -> Duration {
        let t = rule.bound + self.allowance.min(rule.cap);
        if self.fit {
            t
        } else {
            t.max(rule.gross)
        }
    }

    /// Its longest stretch, and where.
    pub fn longest(&self) -> Option<(Duration, Place, Option<String>)> {
        let mut best: Option<(Duration, Place, Option<String>)> = None;
        for r in &self.records {
            for (site, s) in &r.sites {
                if best.as_ref().is_none_or(|b| s.longest > b.0) {
                    best = Some((
                        s.longest,
                        Place {
                            origin: r.origin,
                            site: *site,
                        },
                        r.thread.clone(),
                    ));
                }
            }
        }
        best
    }
}

/// Where stretches end: a driver (by where it was made; `None`: the operation's own) and a
/// site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place {
    pub origin: Option<&'static Location<'static>>,
    pub site: Site,
}

impl Place {
    /// `thread T (made at F:L), phase "P": F:L -> F:L`.
    pub fn describe(&self, thread: Option<&str>) -> String {
        let loc = |l: Option<&'static Location<'static>>, none: &str| match l {
            Some(l) => format!("{}:{}", l.file(), l.line()),
            None => none.to_string(),
        };
        let who = match self.origin {
            None => "the operation's thread".to_string(),
            Some(o) => format!(
                "helper thread {}(made at {}:{})",
                thread.map_or(String::new(), |t| format!("'{t}' ")),
                o.file(),
                o.line()
            ),
        };
        let phase = |p: &str| {
            if p.is_empty() {
                "-".to_string()
            } else {
                format!("\"{p}\"")
            }
        };
        let phases = if self.site.from_phase == self.site.to_phase {
            format!("phase {}", phase(self.site.from_phase))
        } else {
            format!(
                "phases {} -> {}",
                phase(self.site.from_phase),
                phase(self.site.to_phase)
            )
        };
        format!(
            "{who}, {phases}, between {} -> {}",
            loc(self.site.from, "(start)"),
            loc(self.site.to, "(end: its last clock read)")
        )
    }
}

/// A place's stretches over the judged runs.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub thread: Option<String>,
    /// Stretches that ended there, and the page faults they took.
    pub count: u64,
    pub faults: u64,
    /// Overruns (longer than their run's threshold): how many, the runs they came in
    /// (0-based, judged runs only), their lengths (those kept one by one), the longest.
    pub over: u64,
    pub runs_over: BTreeSet<usize>,
    pub lengths: Vec<Duration>,
    pub longest: Duration,
    /// The least probability, over j, that noise puts j overruns at least as long as the
    /// j-th longest here (see the module's documentation); 1 without overruns.
    pub p_noise: f64,
}

impl Tally {
    /// [`Tally::p_noise`], computed from `pool`; `threshold` stands for the lengths of
    /// overruns not kept one by one.
    fn judge(&mut self, pool: &NoisePool, threshold: Duration) {
        self.lengths.sort_unstable_by(|a, b| b.cmp(a));
        let faults = self.faults as f64 / self.count.max(1) as f64;
        let n = self.count as f64;
        let mut p = 1.0f64;
        let mut j = 0u64;
        for &y in &self.lengths {
            j += 1;
            p = p.min(poisson_at_least(j, n * pool.rate(y, faults) * SAFETY));
        }
        if self.over > j {
            p = p.min(poisson_at_least(
                self.over,
                n * pool.rate(threshold, faults) * SAFETY,
            ));
        }
        self.p_noise = p;
    }
}

/// What the judged runs of one operation say.
#[derive(Debug, Default)]
pub struct Judgement {
    pub places: HashMap<Place, Tally>,
    /// Judged runs.
    pub runs: usize,
}

/// The places' tallies over the judged runs of `runs` (noisy runs left out).
pub fn tally(runs: &[Run], rule: &Rule, pool: &NoisePool) -> Judgement {
    let mut j = Judgement::default();
    let mut lowest = Duration::MAX;
    for (i, run) in runs.iter().filter(|r| !r.noisy).enumerate() {
        j.runs += 1;
        let threshold = run.threshold(rule);
        lowest = lowest.min(threshold);
        for r in &run.records {
            for (site, s) in &r.sites {
                let t = j
                    .places
                    .entry(Place {
                        origin: r.origin,
                        site: *site,
                    })
                    .or_default();
                if t.thread.is_none() {
                    t.thread.clone_from(&r.thread);
                }
                t.count += s.count;
                t.faults += s.faults;
                t.lengths
                    .extend(s.kept.iter().copied().filter(|&d| d > threshold));
                // Past the stretches kept one by one, those over the threshold in the same
                // proportion.
                let kept_over = s.kept.iter().filter(|&&d| d > threshold).count() as u64;
                let over = if s.kept.is_empty() {
                    0
                } else {
                    (kept_over as f64 * s.over.max(s.kept.len() as u64) as f64
                        / s.kept.len() as f64)
                        .round() as u64
                };
                if over > 0 {
                    t.over += over;
                    t.runs_over.insert(i);
                    t.longest = t.longest.max(s.longest);
                }
            }
        }
    }
    for t in j.places.values_mut() {
        t.judge(pool, lowest);
    }
    j
}

/// What a place is judged to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// Overruns in most judged runs (two at least), more than noise explains: the code's.
    Over,
    /// Overruns noise is unlikely to explain (below [`LONE_ALPHA`]) but not judged the
    /// code's (in half the runs or fewer, or not improbable enough): the operation runs
    /// again; after the extra runs, reported as seen in N of M runs.
    Lone,
    /// Overruns noise explains.
    Noise,
}

impl Judgement {
    /// Every place with overruns, judged, worst first.
    pub fn findings(&self) -> Vec<(Finding, &Place, &Tally)> {
        let mut out: Vec<(Finding, &Place, &Tally)> = self
            .places
            .iter()
            .filter(|(_, t)| t.over > 0)
            .map(|(p, t)| {
                let pn = t.p_noise;
                let f = if t.runs_over.len() >= 2 && 2 * t.runs_over.len() > self.runs && pn < ALPHA
                {
                    Finding::Over
                } else if pn < LONE_ALPHA {
                    Finding::Lone
                } else {
                    Finding::Noise
                };
                (f, p, t)
            })
            .collect();
        let rank = |f: Finding| match f {
            Finding::Over => 0,
            Finding::Lone => 1,
            Finding::Noise => 2,
        };
        out.sort_by(|a, b| {
            rank(a.0)
                .cmp(&rank(b.0))
                .then(b.2.longest.cmp(&a.2.longest))
        });
        out
    }
}

/// P(X >= k) for X ~ Poisson(lambda). At least one half when k <= lambda (returned as 1).
pub fn poisson_at_least(k: u64, lambda: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if lambda <= 0.0 {
        return 0.0;
    }
    if (k as f64) <= lambda {
        return 1.0;
    }
    // The terms fall from k on (each is the last times lambda / (i + 1) < 1).
    let ln_first = -lambda + k as f64 * lambda.ln() - ln_factorial(k);
    let mut term = 1.0f64;
    let mut sum = 0.0f64;
    let mut i = k;
    while term > 1e-17 * sum.max(1e-300) {
        sum += term;
        i += 1;
        term *= lambda / i as f64;
        if i > k + 100_000 {
            break;
        }
    }
    (ln_first.exp() * sum).min(1.0)
}

/// ln(n!).
fn ln_factorial(n: u64) -> f64 {
    if n < 64 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    // Stirling's series, exact to 1e-10 from here on.
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_core::record::SiteStats;

    #[test]
    fn poisson_tails() {
        // lambda = 1: P(X >= 1) = 1 - e^-1, P(X >= 3) = 1 - e^-1 (1 + 1 + 1/2).
        assert!((poisson_at_least(1, 1.0) - 1.0).abs() < 1e-12);
        assert!((poisson_at_least(2, 1.0) - (1.0 - 2.0 / std::f64::consts::E)).abs() < 1e-12);
        assert!((poisson_at_least(3, 1.0) - (1.0 - 2.5 / std::f64::consts::E)).abs() < 1e-12);
        let tiny = poisson_at_least(2, 1e-3);
        assert!((tiny / 5e-7 - 1.0).abs() < 1e-2, "{tiny}");
        assert_eq!(poisson_at_least(0, 5.0), 1.0);
        assert_eq!(poisson_at_least(3, 0.0), 0.0);
        // Large counts stay finite and ordered.
        let a = poisson_at_least(90, 50.0);
        let b = poisson_at_least(120, 50.0);
        assert!(a > b && b > 0.0 && a < 1e-5, "{a} {b}");
        assert!((ln_factorial(70) - (1..=70).map(|i| (i as f64).ln()).sum::<f64>()).abs() < 1e-9);
    }

    fn loc_a() -> &'static Location<'static> {
        Location::caller()
    }
    fn loc_b() -> &'static Location<'static> {
        Location::caller()
    }

    fn site(from: &'static Location<'static>, to: &'static Location<'static>) -> Site {
        Site {
            from: Some(from),
            to: Some(to),
            from_phase: "p",
            to_phase: "p",
        }
    }

    /// A run whose operation had `hot` stretches of 40 µs at one site and, at another site
    /// reached once, one stretch of `once` µs.
    fn run(once: u64, hot: u64, allowance: u64, noisy: bool) -> Run {
        let mut sites = HashMap::new();
        sites.insert(
            site(loc_a(), loc_a()),
            SiteStats {
                count: hot,
                longest: Duration::from_micros(40),
                over: 0,
                kept: Vec::new(),
                faults: 0,
            },
        );
        let d = Duration::from_micros(once);
        sites.insert(
            site(loc_a(), loc_b()),
            SiteStats {
                count: 1,
                longest: d,
                over: u64::from(once >= 100),
                kept: if once >= 100 { vec![d] } else { Vec::new() },
                faults: 0,
            },
        );
        Run {
            records: vec![DriverRecord {
                origin: None,
                thread: Some("main".into()),
                stats: Default::default(),
                sites,
                histogram: Vec::new(),
            }],
            took: Duration::from_millis(1),
            allowance: Duration::from_micros(allowance),
            noisy,
            fit: true,
        }
    }

    fn rule() -> Rule {
        Rule {
            bound: Duration::from_micros(100),
            interval: Duration::from_micros(50),
            cap: Duration::from_micros(50),
            runs: 3,
            extra_runs: 3,
            noisy_retries: 3,
            gross: Duration::from_micros(1000),
        }
    }

    /// A pool where one stretch in 10,000 is over 100 µs.
    fn pool() -> NoisePool {
        let mut compute = vec![0u64; 2001];
        compute[50] = 99_990;
        compute[300] = 10;
        let mut p = NoisePool::default();
        p.add(&Calibration {
            touch: compute.clone(),
            walk: Vec::new(),
            compute,
            touch_faults: 2_500_000,
        });
        p
    }

    #[test]
    fn an_overrun_at_one_place_in_two_runs_is_the_codes() {
        let runs = [
            run(180, 1000, 20, false),
            run(60, 1000, 20, false),
            run(175, 1000, 20, false),
        ];
        let j = tally(&runs, &rule(), &pool());
        let f = j.findings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].0, Finding::Over);
        assert_eq!(f[0].2.over, 2);
        assert_eq!(f[0].2.longest, Duration::from_micros(180));
        assert!(f[0]
            .1
            .describe(Some("main"))
            .contains("the operation's thread, phase \"p\""));
    }

    #[test]
    fn an_overrun_once_is_lone_and_noisy_runs_are_not_judged() {
        // 180 µs once in a judged run; 300 µs in a noisy run does not count.
        let runs = [
            run(180, 1000, 20, false),
            run(300, 1000, 90, true),
            run(60, 1000, 20, false),
        ];
        let j = tally(&runs, &rule(), &pool());
        assert_eq!(j.runs, 2);
        let f = j.findings();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, Finding::Lone);
        // Under the allowance (100 + 50 capped): not an overrun at all.
        let runs = [run(140, 1000, 45, false), run(145, 1000, 200, false)];
        assert!(tally(&runs, &rule(), &pool()).findings().is_empty());
    }

    #[test]
    fn overruns_noise_explains_at_a_hot_place_are_noise() {
        // A place with a million stretches a run and a few overruns in each: the noise rate
        // (1e-4) explains ~300 over three runs.
        let mut runs = Vec::new();
        for _ in 0..3 {
            let mut r = run(60, 1_000_000, 20, false);
            let s = r.records[0].sites.get_mut(&site(loc_a(), loc_a())).unwrap();
            s.kept = vec![Duration::from_micros(400); 5];
            s.over = 5;
            s.longest = Duration::from_micros(400);
            runs.push(r);
        }
        let j = tally(&runs, &rule(), &pool());
        let f = j.findings();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, Finding::Noise);
        // The same place with an overrun in every tenth stretch is the code's.
        for r in &mut runs {
            let s = r.records[0].sites.get_mut(&site(loc_a(), loc_a())).unwrap();
            s.kept = vec![Duration::from_micros(400); 4096];
            s.over = 100_000;
        }
        let j = tally(&runs, &rule(), &pool());
        assert_eq!(j.findings()[0].0, Finding::Over);
    }

    #[test]
    fn the_allowance_is_the_calibrations_jitter() {
        let mut compute = vec![0u64; 2001];
        compute[55] = 9_990;
        compute[130] = 10;
        let mut touch = vec![0u64; 2001];
        touch[60] = 900;
        touch[700] = 100;
        let c = Calibration {
            compute,
            walk: Vec::new(),
            touch,
            touch_faults: 25_000,
        };
        // The 99.9th percentile is 56 µs (bucket 55, rounded up): 6 µs over the interval.
        assert_eq!(
            c.allowance(Duration::from_micros(50)),
            Duration::from_micros(6)
        );
        let p = {
            let mut p = NoisePool::default();
            p.add(&c);
            p
        };
        let at = Duration::from_micros(100);
        // Without faults: 10 of 10,000 compute stretches, plus one.
        assert!((p.rate(at, 0.0) - 11.0 / 10_001.0).abs() < 1e-12);
        // 25 faults a stretch, as the calibration's: 100 of 1,000 first-touch stretches.
        assert!((p.rate(at, 25.0) - 101.0 / 1_001.0).abs() < 1e-12);
        // 5 faults a stretch: a fifth of that.
        assert!((p.rate(at, 5.0) - 101.0 / 1_001.0 / 5.0).abs() < 1e-12);
        // Longer than any calibration showed: the floor of one in all.
        assert!((p.rate(Duration::from_micros(1500), 25.0) - 1.0 / 1_001.0).abs() < 1e-12);
    }

    #[test]
    fn a_long_overrun_in_every_run_at_a_place_that_touches_pages_is_the_codes() {
        // Three runs, one stretch each at the place, 2 ms long: far beyond the calibrations.
        let mut runs = Vec::new();
        for _ in 0..3 {
            let mut r = run(2000, 1000, 20, false);
            let s = r.records[0].sites.get_mut(&site(loc_a(), loc_b())).unwrap();
            s.faults = 25;
            runs.push(r);
        }
        let j = tally(&runs, &rule(), &pool());
        assert_eq!(j.findings()[0].0, Finding::Over);
        // 130 µs, within what first touches show: noise.
        let mut runs = Vec::new();
        for _ in 0..3 {
            let mut r = run(130, 1000, 20, false);
            r.records[0]
                .sites
                .get_mut(&site(loc_a(), loc_b()))
                .unwrap()
                .faults = 25;
            runs.push(r);
        }
        // A machine where one first-touch stretch in ten is over 400 µs.
        let mut pool = NoisePool::default();
        let mut compute = vec![0u64; 2001];
        compute[50] = 99_990;
        compute[300] = 10;
        let mut touch = vec![0u64; 2001];
        touch[50] = 900;
        touch[400] = 100;
        pool.add(&Calibration {
            compute,
            walk: Vec::new(),
            touch,
            touch_faults: 25_000,
        });
        let j = tally(&runs, &rule(), &pool);
        assert_eq!(j.findings()[0].0, Finding::Noise, "{:?}", j.findings());
    }

    #[test]
    fn an_unfit_machine_judges_only_gross_overruns() {
        // The median first-touch stretch over the bound: unfit; at the interval: fit.
        let mut touch = vec![0u64; 2001];
        touch[140] = 600;
        touch[50] = 400;
        assert!(!Fitness::from_touch(&touch, Duration::from_micros(100)).fit);
        touch[50] = 700;
        assert!(Fitness::from_touch(&touch, Duration::from_micros(100)).fit);
        let unfit = |once: u64| {
            let mut r = run(once, 1000, 20, false);
            r.fit = false;
            r
        };
        // 300 µs at one place in every run: the code's on a fit machine, not judged on an
        // unfit one (its threshold is the gross one).
        let fit_runs = [
            run(300, 1000, 20, false),
            run(300, 1000, 20, false),
            run(300, 1000, 20, false),
        ];
        assert_eq!(
            tally(&fit_runs, &rule(), &pool()).findings()[0].0,
            Finding::Over
        );
        let runs = [unfit(300), unfit(300), unfit(300)];
        assert_eq!(runs[0].threshold(&rule()), Duration::from_micros(1000));
        assert!(tally(&runs, &rule(), &pool()).findings().is_empty());
        // 3 ms in every run: still the code's.
        let runs = [unfit(3000), unfit(3000), unfit(3000)];
        let j = tally(&runs, &rule(), &pool());
        assert_eq!(j.findings()[0].0, Finding::Over, "{:?}", j.findings());
    }
}
