//! Never hog a CPU: the one mechanism every long operation of klpsym goes through.
//!
//! - [`Resched`]: reschedule points. A loop whose work grows with its input calls
//!   [`Resched::tick`] per item (or [`Resched::tick_step`] after a step of bulk work); a point
//!   runs as soon as waiting for the next clock read would pass the interval (default 50 µs
//!   of work). What a point does is the caller's [`ReschedPolicy`]: nothing, `sched_yield`, a
//!   callback, or (with [`Resched::tick_async`]) a yield to an async executor. Cancellation
//!   goes through the same points ([`Cancelled`]).
//! - [`bulk`]: what the standard library does in one stretch (filling, copying, sorting,
//!   checking UTF-8, freeing big vectors) cut into steps with points between them.
//! - [`ChunkedFinder`]: substring search over megabytes in bounded windows.
//!
//! This crate knows nothing of symbols and opens no file: parsers of every layer use it.
//!
//! ```
//! use klpsym_resched::{Resched, ReschedPolicy};
//!
//! let mut rs = Resched::new(ReschedPolicy::Yield)
//!     .with_interval(std::time::Duration::from_micros(50));
//! let mut sum = 0u64;
//! for i in 0..1_000_000u64 {
//!     rs.tick().expect("no cancel flag was set");
//!     sum += i;
//! }
//! assert_eq!(sum, 499_999_500_000);
//! ```

pub mod bulk;
pub mod record;
pub mod resched;
mod scan;
mod stats;

pub use record::{DriverRecord, Recorder, Site, SiteStats};
pub use resched::{
    yield_now, Cancelled, Resched, ReschedPolicy, ReschedStats, STRETCH_BUCKET_EDGES_US,
};
pub use scan::{merge_spans, ChunkedFinder, EVERYWHERE, SCAN_CHUNK};
