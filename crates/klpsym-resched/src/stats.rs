//! What a driver counts of its own run ([`Resched::stats`](crate::Resched::stats)): the
//! points reached, the items ticked, the longest stretch and where it lay, and a histogram of
//! stretch lengths. Kept apart from the driver so that the instrumented record
//! (`record.rs`), which a driver holds, can carry them too.

use std::panic::Location;
use std::time::Duration;

/// Upper edges (µs, exclusive) of the stretch-length buckets in [`ReschedStats::buckets`];
/// the last bucket holds everything from 1 ms up.
pub const STRETCH_BUCKET_EDGES_US: [u64; 7] = [25, 50, 75, 100, 150, 250, 1000];

/// Statistics an instrumented [`Resched`](crate::Resched) collects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReschedStats {
    /// Number of reschedule points reached.
    pub points: u64,
    /// Number of items counted by `tick`.
    pub items: u64,
    /// The longest time between two consecutive points (or the start and the first point).
    pub longest_stretch: Duration,
    /// Where the longest stretch began: the source location of the `tick` that ran the point
    /// before it (`None`: the driver's creation).
    pub longest_from: Option<&'static Location<'static>>,
    /// Where the longest stretch ended: the `tick` that ran the point after it (`None`: the
    /// stretch is still running).
    pub longest_to: Option<&'static Location<'static>>,
    /// How many stretches fell in each length bucket (see [`STRETCH_BUCKET_EDGES_US`]).
    pub buckets: [u64; 8],
}

impl ReschedStats {
    /// Stretches (ended by a point) shorter than `us` microseconds, when `us` is one of
    /// [`STRETCH_BUCKET_EDGES_US`]; `None` for other values.
    pub fn stretches_within(&self, us: u64) -> Option<u64> {
        let i = STRETCH_BUCKET_EDGES_US.iter().position(|&e| e == us)?;
        Some(self.buckets[..=i].iter().sum())
    }
}
