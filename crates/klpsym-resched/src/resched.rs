//! Bounded reschedule points: the one mechanism every long klpsym operation goes through.
//!
//! The kernel learned in 5.17 ("livepatch: Avoid CPU hogging with cond_resched") that a long
//! symbol walk without a reschedule point starves everything else on its CPU. klpsym runs
//! next to latency-critical work, so every loop whose length grows with its input calls
//! [`Resched::tick`] once per item (or [`Resched::tick_step`] after a step of bulk work, which
//! reads the clock every time). `tick` is a counter decrement; only every `stride` items does
//! it read the clock, and the stride adapts so that the clock is read about four times per
//! interval. When waiting for the next clock read would pass the interval, the point runs: it
//! does what the [`ReschedPolicy`] says (nothing, `sched_yield`, a callback) and checks
//! cancellation. Bulk operations (fills, copies, sorts, frees of big buffers) are cut into
//! steps by [`crate::bulk`].
//!
//! The instrumented mode records the longest stretch between two points, the source locations
//! of the ticks around it, and a histogram of stretch lengths, which is how the bound is
//! checked on real inputs (`klpsym-bench resched`).

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::record::{Recorder, Recording, Site};
pub use crate::stats::{ReschedStats, STRETCH_BUCKET_EDGES_US};

/// The default interval between reschedule points.
///
/// Measured with `klpsym-bench sweep` (load + index + 20,000 lookups + a 500,000-address
/// batch, points yielding): one point costs ~0.85 µs of CPU, so 10 µs costs ~8% of the job,
/// 25 µs ~2.7%, 50 µs ~1.9%, 100 µs ~1.3%. 50 µs keeps the overhead under 2% and leaves half
/// of the 100 µs budget for the last clock check's spacing and for items that suddenly get
/// slower. See the README's "Never hog a CPU".
pub const DEFAULT_INTERVAL: Duration = Duration::from_micros(50);

/// The most items counted between two clock reads. At ~25 ns a clock read, 64 items of a few
/// tens of nanoseconds each keep its cost around 1-2%; and when items suddenly get slower
/// (cache misses, first touches of fresh memory: 1-2 µs each on this project's VM), the
/// overshoot stays near 64-128 µs. (256 let a run of first touches go 250-500 µs without a
/// clock read: `klpsym-bench resched` found it in an export map's first inserts.)
const MAX_STRIDE: u64 = 64;

/// Returned by a reschedule point when the operation was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("operation cancelled")]
pub struct Cancelled;

/// What a reschedule point does.
pub enum ReschedPolicy {
    /// Nothing (the point still checks cancellation and records statistics).
    Nothing,
    /// Give the CPU away with `std::thread::yield_now` (`sched_yield(2)` on Linux).
    Yield,
    /// Run a callback; returning `Err(Cancelled)` stops the operation.
    Callback(Box<dyn FnMut() -> Result<(), Cancelled> + Send>),
}

impl fmt::Debug for ReschedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReschedPolicy::Nothing => f.write_str("Nothing"),
            ReschedPolicy::Yield => f.write_str("Yield"),
            ReschedPolicy::Callback(_) => f.write_str("Callback(..)"),
        }
    }
}

/// A reschedule-point driver. Create one per operation (or share one across the phases of an
/// operation), call [`tick`](Resched::tick) per unit of work and `?` its result.
pub struct Resched {
    policy: ReschedPolicy,
    interval: Duration,
    cancel: Option<Arc<AtomicBool>>,
    countdown: u32,
    stride: u32,
    last_point: Instant,
    /// Optional clock of the thread's own work (CPU time) for the statistics: wall-clock
    /// stretches also count time the thread spent preempted, which is not work.
    work_clock: Option<fn() -> Duration>,
    last_point_work: Duration,
    /// The thread's page faults at the last point, when the recorder counts them.
    last_point_faults: u64,
    /// The thread `last_point_work` was read on: the work clock is per thread, so a stretch
    /// measured on another thread starts from that thread's start (see [`Resched::sibling`]).
    work_thread: Option<ThreadId>,
    /// The work clock at the last clock check after the last point, and its thread: where a
    /// dropped driver's last stretch ends.
    last_seen_work: Option<(ThreadId, Duration)>,
    last_check: Instant,
    /// Where the last point ran (for attributing long stretches).
    last_point_at: Option<&'static Location<'static>>,
    /// The phase now, and when the last point ran (see [`Resched::set_phase`]).
    phase: &'static str,
    phase_at_point: &'static str,
    /// Every stretch by site, when instrumented with a [`Recorder`].
    record: Option<Box<Recording>>,
    stats: ReschedStats,
}

impl fmt::Debug for Resched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resched")
            .field("policy", &self.policy)
            .field("interval", &self.interval)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Default for Resched {
    fn default() -> Self {
        Resched::new(ReschedPolicy::Nothing)
    }
}

impl Resched {
    /// A driver with the given policy and the default interval.
    pub fn new(policy: ReschedPolicy) -> Self {
        let now = Instant::now();
        Resched {
            policy,
            interval: DEFAULT_INTERVAL,
            cancel: None,
            countdown: 1,
            stride: 1,
            last_point: now,
            work_clock: None,
            last_point_work: Duration::ZERO,
            last_point_faults: 0,
            work_thread: None,
            last_seen_work: None,
            last_check: now,
            last_point_at: None,
            phase: "",
            phase_at_point: "",
            record: None,
            stats: ReschedStats::default(),
        }
    }

    /// A driver whose points do nothing: for callers that do not care.
    pub fn none() -> Self {
        Resched::new(ReschedPolicy::Nothing)
    }

    /// A driver for a helper thread of the same operation: the same interval and cancel flag,
    /// and the same policy when it is `Nothing` or `Yield`; a callback belongs to the thread
    /// that set it, so the helper's points do nothing but check cancellation.
    ///
    /// An instrumented driver's sibling is instrumented too: the same work clock and
    /// [`Recorder`] (its record names where it was made), the same phase. Its first stretch
    /// on a thread other than this one is measured from that thread's start, exact for a
    /// thread spawned for it; a driver kept for later work on any thread is
    /// [`resume`](Resched::resume)d when that work starts.
    #[track_caller]
    pub fn sibling(&self) -> Resched {
        let policy = match self.policy {
            ReschedPolicy::Yield => ReschedPolicy::Yield,
            ReschedPolicy::Nothing | ReschedPolicy::Callback(_) => ReschedPolicy::Nothing,
        };
        let mut r = Resched::new(policy).with_interval(self.interval);
        r.cancel = self.cancel.clone();
        if let Some(c) = self.work_clock {
            r = r.with_work_clock(c);
        }
        if let Some(rec) = &self.record {
            r.record = Some(Box::new(Recording::new(
                rec.recorder.clone(),
                Some(Location::caller()),
            )));
        }
        r.phase = self.phase;
        r.phase_at_point = self.phase;
        r
    }

    /// Sets the interval between points (clamped to at least 1 µs).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Duration::from_micros(1));
        self
    }

    /// Cancels the operation at its next point once `flag` is set.
    pub fn with_cancel_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Measures stretches for [`stats`](Resched::stats) with `clock` (e.g. the thread's CPU
    /// time) instead of the wall clock. Points are still scheduled by the wall clock.
    pub fn with_work_clock(mut self, clock: fn() -> Duration) -> Self {
        self.last_point_work = clock();
        self.work_thread = Some(std::thread::current().id());
        self.work_clock = Some(clock);
        self
    }

    /// Instruments the driver: stretches are measured with the recorder's work clock and
    /// recorded by site ([`Site`]: the points around them and the phases there), and when the
    /// driver is dropped its record joins `recorder`'s, as do those of its
    /// [`sibling`](Resched::sibling)s. A clock read per clock check: for measurements, not
    /// for production.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self = self.with_work_clock(recorder.clock());
        if let Some(f) = recorder.fault_counter() {
            self.last_point_faults = f();
        }
        self.record = Some(Box::new(Recording::new(recorder, None)));
        self
    }

    /// Names the phase of the work from here on (a loader's step: "decompress", "parse the
    /// ELF symbol table"...): an instrumented driver records the phases a stretch began and
    /// ended in. A pointer store; returns the previous phase.
    pub fn set_phase(&mut self, phase: &'static str) -> &'static str {
        std::mem::replace(&mut self.phase, phase)
    }

    /// Runs `f` in `phase`, then restores the phase before it.
    pub fn in_phase<T>(&mut self, phase: &'static str, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = self.set_phase(phase);
        let out = f(self);
        self.phase = before;
        out
    }

    /// The phase now (see [`set_phase`](Resched::set_phase)).
    pub fn phase(&self) -> &'static str {
        self.phase
    }

    /// Starts a new stretch here, for a driver that was idle (kept for later work, as a
    /// table keeps the driver its walks and late index builds reach): the time it sat
    /// unused, on this or another thread, is not its work. No point runs and nothing is
    /// counted.
    #[track_caller]
    pub fn resume(&mut self) {
        let now = Instant::now();
        self.last_point = now;
        self.last_check = now;
        if let Some(c) = self.work_clock {
            self.last_point_work = c();
            self.work_thread = Some(std::thread::current().id());
        }
        self.last_point_faults = self.faults_now();
        self.last_seen_work = None;
        self.last_point_at = Some(Location::caller());
        self.phase_at_point = self.phase;
    }

    /// The thread's page faults now (0 without a counter).
    fn faults_now(&self) -> u64 {
        self.record
            .as_ref()
            .and_then(|r| r.recorder.fault_counter())
            .map_or(0, |f| f())
    }

    /// The stretch since the last point on the work clock, read on this thread; with the
    /// clock's value and the thread. A thread other than the one of the last point starts
    /// from zero: its clock counts its work since it started.
    fn work_since_point(&self, c: fn() -> Duration) -> (Duration, Duration, ThreadId) {
        let w = c();
        let t = std::thread::current().id();
        let base = if self.work_thread == Some(t) {
            self.last_point_work
        } else {
            Duration::ZERO
        };
        (w.saturating_sub(base), w, t)
    }

    /// The configured interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Statistics so far. `longest_stretch` includes the stretch still running.
    pub fn stats(&self) -> ReschedStats {
        let mut s = self.stats;
        s.items += u64::from(self.stride - self.countdown);
        let running = match self.work_clock {
            Some(c) => self.work_since_point(c).0,
            None => self.last_point.elapsed(),
        };
        if running > s.longest_stretch {
            s.longest_stretch = running;
            s.longest_from = self.last_point_at;
            s.longest_to = None;
        }
        s
    }

    /// Counts one unit of work; runs a reschedule point when the interval has passed.
    #[inline]
    #[track_caller]
    pub fn tick(&mut self) -> Result<(), Cancelled> {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.check_clock(u64::from(self.stride))
        } else {
            Ok(())
        }
    }

    /// Counts `n` units of work at once (for loops that process items in chunks).
    #[inline]
    #[track_caller]
    pub fn tick_n(&mut self, n: u32) -> Result<(), Cancelled> {
        if n >= self.countdown {
            let items = u64::from(self.stride - self.countdown) + u64::from(n);
            self.check_clock(items)
        } else {
            self.countdown -= n;
            Ok(())
        }
    }

    /// Counts one step of bulk work (a chunk of a copy, a sort run, a block of decompressed
    /// output: microseconds, not nanoseconds) and reads the clock right away. Mixing steps
    /// with [`tick`](Resched::tick)'s cheap items under one driver cannot then overshoot: a
    /// stride learned on nanosecond items is never applied to microsecond steps.
    #[inline]
    #[track_caller]
    pub fn tick_step(&mut self) -> Result<(), Cancelled> {
        let items = u64::from(self.stride - self.countdown) + 1;
        self.check_clock(items)
    }

    /// Counts one unit of work and tells whether a reschedule point was just reached, for
    /// callers that give the CPU away themselves (an async task awaiting [`yield_now`]).
    #[inline]
    #[track_caller]
    pub fn tick_due(&mut self) -> Result<bool, Cancelled> {
        let before = self.stats.points;
        self.tick()?;
        Ok(self.stats.points != before)
    }

    /// The async form of [`tick`](Resched::tick): at a reschedule point, after the policy has
    /// run, the task yields to its executor once. Works with any executor: the future wakes
    /// itself and returns `Pending` one time.
    #[inline]
    pub async fn tick_async(&mut self) -> Result<(), Cancelled> {
        if self.tick_due()? {
            yield_now().await;
        }
        Ok(())
    }

    /// Runs a reschedule point now, whatever the clock says.
    #[track_caller]
    pub fn point(&mut self) -> Result<(), Cancelled> {
        let now = Instant::now();
        self.run_point(now)
    }

    #[cold]
    #[track_caller]
    fn check_clock(&mut self, items: u64) -> Result<(), Cancelled> {
        let now = Instant::now();
        self.stats.items += items;
        let since_check = now.saturating_duration_since(self.last_check);
        // Adapt the stride so that the clock is read about four times per interval.
        let target = self.interval / 4;
        let per_item_ns = (since_check.as_nanos() as u64 / items.max(1)).max(1);
        // Grow at most 2x per check and never past MAX_STRIDE, so a loop whose items suddenly
        // get slower overshoots the interval by a bounded amount.
        let wanted = (target.as_nanos() as u64 / per_item_ns).clamp(1, MAX_STRIDE);
        self.stride = wanted.min(u64::from(self.stride) * 2) as u32;
        self.countdown = self.stride;
        self.last_check = now;
        // Run the point now if waiting for the next check (as far away as the last one was)
        // would pass the interval: points then come at most `interval` apart in steady work.
        let since_point = now.saturating_duration_since(self.last_point);
        if since_point + since_check >= self.interval {
            self.run_point(now)
        } else {
            if let Some(c) = self.work_clock {
                self.last_seen_work = Some((std::thread::current().id(), c()));
            }
            Ok(())
        }
    }

    #[track_caller]
    fn run_point(&mut self, now: Instant) -> Result<(), Cancelled> {
        let here = Location::caller();
        let mut faults = 0;
        let stretch = match self.work_clock {
            Some(c) => {
                let (d, _, t) = self.work_since_point(c);
                let f = self.faults_now();
                if self.work_thread != Some(t) {
                    self.work_thread = Some(t);
                    self.last_point_faults = 0;
                    if let Some(rec) = &mut self.record {
                        rec.thread = std::thread::current().name().map(str::to_string);
                    }
                }
                faults = f.saturating_sub(self.last_point_faults);
                d
            }
            None => now.saturating_duration_since(self.last_point),
        };
        self.note_stretch(stretch, Some(here), faults);
        self.last_point_at = Some(here);
        self.phase_at_point = self.phase;
        self.last_seen_work = None;
        let us = stretch.as_micros() as u64;
        let bucket = STRETCH_BUCKET_EDGES_US
            .iter()
            .position(|&e| us < e)
            .unwrap_or(STRETCH_BUCKET_EDGES_US.len());
        self.stats.buckets[bucket] += 1;
        self.stats.points += 1;
        let result = match &mut self.policy {
            ReschedPolicy::Nothing => Ok(()),
            ReschedPolicy::Yield => {
                std::thread::yield_now();
                Ok(())
            }
            ReschedPolicy::Callback(f) => f(),
        };
        let cancelled = self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed));
        let after = Instant::now();
        self.last_point = after;
        if let Some(c) = self.work_clock {
            self.last_point_work = c();
            self.last_point_faults = self.faults_now();
        }
        self.last_check = after;
        result?;
        if cancelled {
            return Err(Cancelled);
        }
        Ok(())
    }

    /// Counts a stretch that ended at `to` (`None`: the last one, at the driver's end), in
    /// which the thread took `faults` page faults.
    fn note_stretch(
        &mut self,
        stretch: Duration,
        to: Option<&'static Location<'static>>,
        faults: u64,
    ) {
        if stretch > self.stats.longest_stretch {
            self.stats.longest_stretch = stretch;
            self.stats.longest_from = self.last_point_at;
            self.stats.longest_to = to;
        }
        if let Some(rec) = &mut self.record {
            let site = Site {
                from: self.last_point_at,
                to,
                from_phase: self.phase_at_point,
                to_phase: self.phase,
            };
            rec.add(site, stretch, faults);
        }
    }
}

impl Drop for Resched {
    /// An instrumented driver hands its record to its [`Recorder`], with its last stretch as
    /// far as its last clock read (what ran after it, if anything, is not seen: a driver
    /// dropped long after its work ended must not count the wait).
    fn drop(&mut self) {
        if self.record.is_none() {
            return;
        }
        if let Some((t, w)) = self.last_seen_work.take() {
            let base = if self.work_thread == Some(t) {
                self.last_point_work
            } else {
                Duration::ZERO
            };
            self.note_stretch(w.saturating_sub(base), None, 0);
        }
        let mut stats = self.stats;
        stats.items += u64::from(self.stride - self.countdown);
        if let Some(rec) = self.record.take() {
            rec.finish(stats);
        }
    }
}

/// A future that returns `Pending` once (after waking its task), so an executor runs its other
/// tasks before this one continues. Executor-agnostic.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// See [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl std::future::Future for YieldNow {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.yielded {
            std::task::Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::DriverRecord;

    fn busy(ns: u64) {
        let start = Instant::now();
        while start.elapsed().as_nanos() < u128::from(ns) {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn points_are_reached_while_working() {
        let mut r = Resched::none().with_interval(Duration::from_micros(100));
        for _ in 0..20_000 {
            busy(200);
            r.tick().unwrap();
        }
        // 20k items of 0.2 µs = 4 ms of work: dozens of points at least.
        assert!(r.stats().points >= 10, "{:?}", r.stats());
    }

    #[test]
    fn callback_runs_and_can_cancel() {
        let mut calls = 0u32;
        let counter = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let c2 = counter.clone();
        let mut r = Resched::new(ReschedPolicy::Callback(Box::new(move || {
            if c2.fetch_add(1, Ordering::Relaxed) >= 2 {
                Err(Cancelled)
            } else {
                Ok(())
            }
        })))
        .with_interval(Duration::from_micros(1));
        let mut result = Ok(());
        for _ in 0..1_000_000 {
            busy(100);
            calls += 1;
            result = r.tick();
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(Cancelled));
        assert!(calls < 1_000_000);
        assert_eq!(counter.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn cancel_flag_stops_at_next_point() {
        let flag = Arc::new(AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(Duration::from_micros(1))
            .with_cancel_flag(flag);
        let mut n = 0;
        while r.tick().is_ok() {
            busy(500);
            n += 1;
            assert!(n < 100_000, "cancellation never observed");
        }
    }

    #[test]
    fn async_ticks_yield_to_the_executor() {
        use std::future::Future;
        use std::task::{Context, Poll, Wake, Waker};
        struct Noop;
        impl Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut r = Resched::none().with_interval(Duration::from_micros(1));
        let mut fut = Box::pin(async move {
            for _ in 0..1000 {
                busy(2_000);
                r.tick_async().await.unwrap();
            }
        });
        let mut pendings = 0;
        while fut.as_mut().poll(&mut cx) == Poll::Pending {
            pendings += 1;
        }
        assert!(pendings >= 100, "only {pendings} yields");
    }

    #[test]
    fn a_step_after_cheap_items_reads_the_clock_at_once() {
        let mut r = Resched::none().with_interval(Duration::from_micros(50));
        // Cheap items grow the stride to its maximum...
        for _ in 0..100_000 {
            r.tick().unwrap();
        }
        let before = r.stats().points;
        // ...then one slow step: `tick` would not look at the clock for up to MAX_STRIDE
        // items, `tick_step` does, and the interval has passed.
        busy(200_000);
        r.tick_step().unwrap();
        assert_eq!(r.stats().points, before + 1, "{:?}", r.stats());
        let s = r.stats();
        assert!(s.longest_to.is_some() && s.buckets.iter().sum::<u64>() == s.points);
    }

    std::thread_local! {
        /// A per-thread work clock the tests advance by hand.
        static WORK: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
    }
    fn work() -> Duration {
        WORK.with(std::cell::Cell::get)
    }
    fn spend(us: u64) {
        WORK.with(|w| w.set(w.get() + Duration::from_micros(us)));
    }

    #[test]
    fn a_recorder_gets_every_drivers_stretches_by_site_and_phase() {
        let rec = Recorder::new(work, Duration::from_micros(100));
        // Points only when asked: the wall clock never decides one here.
        let mut r = Resched::none()
            .with_interval(Duration::from_secs(3600))
            .with_recorder(rec.clone());
        r.set_phase("first");
        spend(30);
        r.point().unwrap();
        spend(150);
        r.set_phase("second");
        r.point().unwrap();
        // The main thread's clock is far ahead: the helper's stretch counts from its start.
        spend(10_000);
        let made_at = line!() + 1;
        let helper = r.sibling();
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("helper-x".into())
                .spawn_scoped(s, move || {
                    let mut h = helper;
                    assert_eq!(h.phase(), "second");
                    spend(120);
                    h.point().unwrap();
                    spend(7);
                    h.tick_step().unwrap();
                    // Not seen: after the last clock read.
                    spend(1_000);
                })
                .unwrap();
        });
        r.resume();
        spend(40);
        r.tick_step().unwrap();
        drop(r);
        let got = rec.take();
        assert!(rec.take().is_empty());
        assert_eq!(got.len(), 2, "{got:?}");
        let (helper, main) = (&got[0], &got[1]);
        assert_eq!(
            helper.origin.map(|l| (l.file(), l.line())),
            Some((file!(), made_at))
        );
        assert_eq!(helper.thread.as_deref(), Some("helper-x"));
        let mut hs: Vec<_> = helper
            .sites
            .iter()
            .map(|(s, v)| (s.to.is_some(), v.longest))
            .collect();
        hs.sort();
        assert_eq!(
            hs,
            [
                (false, Duration::from_micros(7)),
                (true, Duration::from_micros(120))
            ]
        );
        assert_eq!(helper.sites.values().map(|v| v.over).sum::<u64>(), 1);
        assert_eq!(main.origin, None);
        let long = main
            .sites
            .iter()
            .find(|(_, v)| v.longest == Duration::from_micros(150))
            .expect("the 150 µs stretch");
        assert_eq!((long.0.from_phase, long.0.to_phase), ("first", "second"));
        assert_eq!(long.1.kept, [Duration::from_micros(150)]);
        // After resume: 40 µs from the resume, not the 10 ms the thread did meanwhile.
        let last = main
            .sites
            .iter()
            .find(|(s, _)| s.to.is_none())
            .expect("last stretch");
        assert_eq!(last.1.longest, Duration::from_micros(40));
        assert_eq!(last.0.from.map(|l| l.file()), Some(file!()));
        assert_eq!(main.stretches(), 3);
        assert_eq!(main.stats.longest_stretch, Duration::from_micros(150));
    }

    std::thread_local! {
        static FAULTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    fn faults() -> u64 {
        FAULTS.with(std::cell::Cell::get)
    }

    #[test]
    fn page_faults_are_counted_per_stretch_and_thread() {
        let rec = Recorder::new(work, Duration::from_micros(100)).with_fault_counter(faults);
        FAULTS.with(|f| f.set(1_000));
        let mut r = Resched::none()
            .with_interval(Duration::from_secs(3600))
            .with_recorder(rec.clone());
        FAULTS.with(|f| f.set(1_007));
        r.point().unwrap();
        let h = r.sibling();
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut h = h;
                // A fresh thread: its count starts at zero.
                FAULTS.with(|f| f.set(3));
                h.point().unwrap();
            });
        });
        drop(r);
        let got = rec.take();
        let sum = |d: &DriverRecord| d.sites.values().map(|s| s.faults).sum::<u64>();
        assert_eq!(got.iter().map(sum).collect::<Vec<_>>(), [3, 7]);
    }

    #[test]
    fn an_unused_instrumented_driver_records_no_stretch() {
        let rec = Recorder::new(work, Duration::from_micros(100));
        let r = Resched::none().with_recorder(rec.clone());
        let s = r.sibling();
        spend(5_000);
        drop(s);
        drop(r);
        let got = rec.take();
        assert_eq!(got.len(), 2);
        assert!(
            got.iter().all(|g| g.sites.is_empty() && g.stretches() == 0),
            "{got:?}"
        );
    }

    #[test]
    fn tick_n_counts_items() {
        let mut r = Resched::none().with_interval(Duration::from_secs(3600));
        for _ in 0..100 {
            r.tick_n(1000).unwrap();
        }
        assert!(r.stats().items >= 90_000, "{:?}", r.stats());
    }
}
