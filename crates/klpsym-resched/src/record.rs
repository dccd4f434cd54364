//! The instrumented mode's record: every stretch between two reschedule points of a driver and
//! of every helper driver made from it ([`Resched::sibling`](crate::Resched::sibling)), by
//! where it began and ended and in which phase, for `klpsym-bench resched` to judge.
//!
//! A driver given a [`Recorder`] ([`Resched::with_recorder`](crate::Resched::with_recorder))
//! measures its stretches with the recorder's work clock (a thread's CPU time) and keeps, per
//! [`Site`], how many stretches ended there, the longest, and each one at least
//! [`Recorder::keep_over`] long. When the driver is dropped its record joins the recorder's:
//! [`Recorder::take`] then returns one [`DriverRecord`] per driver, helpers included.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::stats::ReschedStats;

/// Stretch lengths are counted in 1 µs buckets up to this many microseconds; longer ones share
/// the last bucket.
pub const HISTOGRAM_US: usize = 2000;

/// Stretches at least [`Recorder::keep_over`] long kept one by one per site, at most this many
/// (the site's `over` count goes on counting past it).
pub const KEPT_PER_SITE: usize = 4096;

/// Where a stretch began and ended: the source locations of the ticks that ran the points
/// around it, and the phase ([`Resched::set_phase`](crate::Resched::set_phase)) at each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site {
    /// The point before the stretch; `None`: the driver's start (or its resumption).
    pub from: Option<&'static Location<'static>>,
    /// The point that ended it; `None`: the driver's last stretch, measured up to its last
    /// clock read when the driver was dropped.
    pub to: Option<&'static Location<'static>>,
    /// The phase when the stretch began.
    pub from_phase: &'static str,
    /// The phase when it ended.
    pub to_phase: &'static str,
}

/// The stretches that ended at one [`Site`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteStats {
    /// How many.
    pub count: u64,
    /// The longest.
    pub longest: Duration,
    /// How many were at least [`Recorder::keep_over`] long.
    pub over: u64,
    /// Those stretches (the first [`KEPT_PER_SITE`]).
    pub kept: Vec<Duration>,
    /// Page faults the thread took in them all, when the recorder counts them
    /// ([`Recorder::with_fault_counter`]).
    pub faults: u64,
}

/// What one driver recorded.
#[derive(Debug, Clone)]
pub struct DriverRecord {
    /// Where [`Resched::sibling`](crate::Resched::sibling) made it; `None` for the driver the
    /// recorder was given to.
    pub origin: Option<&'static Location<'static>>,
    /// The name of the thread it last worked on (`None`: unnamed, or it never worked).
    pub thread: Option<String>,
    /// Its statistics.
    pub stats: ReschedStats,
    /// Its stretches by where they began and ended.
    pub sites: HashMap<Site, SiteStats>,
    /// Its stretch lengths: `histogram[i]` counts those of `i` µs (rounded down), the last
    /// bucket those of [`HISTOGRAM_US`] µs and more.
    pub histogram: Vec<u64>,
}

impl DriverRecord {
    /// How many stretches it recorded.
    pub fn stretches(&self) -> u64 {
        self.histogram.iter().sum()
    }

    /// The stretch length that `share` (0..=1) of its stretches do not exceed, to the
    /// microsecond (`None` when it recorded none).
    pub fn quantile(&self, share: f64) -> Option<Duration> {
        quantile(&self.histogram, share)
    }
}

/// The length that `share` of the stretches counted in `histogram` (1 µs buckets) do not
/// exceed; `None` for an empty histogram.
pub fn quantile(histogram: &[u64], share: f64) -> Option<Duration> {
    let total: u64 = histogram.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64 * share.clamp(0.0, 1.0)).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (us, n) in histogram.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(Duration::from_micros(us as u64 + 1));
        }
    }
    Some(Duration::from_micros(histogram.len() as u64))
}

/// Collects the records of an instrumented driver and of every helper driver made from it.
/// Cheap to clone (the clones share one collection).
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Mutex<Vec<DriverRecord>>>,
    clock: fn() -> Duration,
    faults: Option<fn() -> u64>,
    keep_over: Duration,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("keep_over", &self.keep_over)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder whose drivers measure their work with `clock`, which must be a per-thread
    /// clock of work done (the calling thread's CPU time, `CLOCK_THREAD_CPUTIME_ID`): a
    /// helper thread's first stretch is measured from the thread's start. Stretches at least
    /// `keep_over` long are kept one by one.
    pub fn new(clock: fn() -> Duration, keep_over: Duration) -> Recorder {
        Recorder {
            shared: Arc::default(),
            clock,
            faults: None,
            keep_over,
        }
    }

    /// Also counts the page faults of each stretch with `faults`, a per-thread count (the
    /// calling thread's minor faults, `getrusage(RUSAGE_THREAD)`), read at each point.
    pub fn with_fault_counter(mut self, faults: fn() -> u64) -> Recorder {
        self.faults = Some(faults);
        self
    }

    /// The work clock.
    pub fn clock(&self) -> fn() -> Duration {
        self.clock
    }

    /// The fault counter, if any.
    pub fn fault_counter(&self) -> Option<fn() -> u64> {
        self.faults
    }

    /// Stretches this long or longer are kept one by one.
    pub fn keep_over(&self) -> Duration {
        self.keep_over
    }

    /// The records of the drivers dropped so far, in the order they were dropped; the
    /// recorder is empty afterwards.
    pub fn take(&self) -> Vec<DriverRecord> {
        std::mem::take(&mut *self.shared.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn push(&self, r: DriverRecord) {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(r);
    }
}

/// A driver's record while it runs.
pub(crate) struct Recording {
    pub(crate) recorder: Recorder,
    pub(crate) origin: Option<&'static Location<'static>>,
    pub(crate) thread: Option<String>,
    pub(crate) sites: HashMap<Site, SiteStats>,
    pub(crate) histogram: Vec<u64>,
}

impl Recording {
    pub(crate) fn new(recorder: Recorder, origin: Option<&'static Location<'static>>) -> Self {
        Recording {
            recorder,
            origin,
            thread: None,
            sites: HashMap::new(),
            histogram: vec![0; HISTOGRAM_US + 1],
        }
    }

    pub(crate) fn add(&mut self, site: Site, stretch: Duration, faults: u64) {
        let us = (stretch.as_micros() as usize).min(HISTOGRAM_US);
        self.histogram[us] += 1;
        let s = self.sites.entry(site).or_default();
        s.count += 1;
        s.faults += faults;
        s.longest = s.longest.max(stretch);
        if stretch >= self.recorder.keep_over {
            s.over += 1;
            if s.kept.len() < KEPT_PER_SITE {
                s.kept.push(stretch);
            }
        }
    }

    pub(crate) fn finish(self, stats: ReschedStats) {
        let Recording {
            recorder,
            origin,
            thread,
            sites,
            histogram,
        } = self;
        recorder.push(DriverRecord {
            origin,
            thread,
            stats,
            sites,
            histogram,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_read_the_histogram() {
        let mut h = vec![0u64; 10];
        h[2] = 90;
        h[7] = 10;
        assert_eq!(quantile(&h, 0.5), Some(Duration::from_micros(3)));
        assert_eq!(quantile(&h, 0.9), Some(Duration::from_micros(3)));
        assert_eq!(quantile(&h, 0.91), Some(Duration::from_micros(8)));
        assert_eq!(quantile(&h, 1.0), Some(Duration::from_micros(8)));
        assert_eq!(quantile(&[0, 0], 0.5), None);
    }
}
