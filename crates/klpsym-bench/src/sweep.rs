//! `klpsym-bench sweep`: the CPU cost of reschedule points per interval, the measurement
//! behind the default interval.

use std::path::Path;
use std::time::Duration;

use klpsym_core::resched::{Resched, ReschedPolicy};
use klpsym_io::{load, LoadOptions};

use crate::bound::{loaded, random_addresses, resolve_job};
use crate::job::Job;

type BoxError = Box<dyn std::error::Error>;

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
