//! Bulk work over whole symbol tables with reschedule points. A stable sort: `sort_by` over a vmlinux's ~200k symbols is one
//! stretch of tens of milliseconds, so this sorts short runs, then merges them pass by pass with
//! a point per merged element. It orders indexes (cheap to move) and permutes once at the end.

use std::cmp::Ordering;

use klpsym_core::resched::{Cancelled, Resched};

/// Elements sorted by one `sort_by` call (a few microseconds of comparisons).
const RUN: usize = 32;

/// `v` sorted stably by `cmp`, with a reschedule point reachable every comparison or so.
pub(crate) fn sort_by_with_points<T, F>(
    v: Vec<T>,
    mut cmp: F,
    resched: &mut Resched,
) -> Result<Vec<T>, Cancelled>
where
    F: FnMut(&T, &T) -> Ordering,
{
    let n = v.len();
    let mut idx: Vec<usize> = (0..n).collect();
    for run in idx.chunks_mut(RUN) {
        run.sort_by(|&a, &b| cmp(&v[a], &v[b]));
        resched.tick_n(run.len() as u32)?;
    }
    let mut buf: Vec<usize> = Vec::with_capacity(n);
    let mut width = RUN;
    while width < n {
        buf.clear();
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (a, b) = (&idx[start..mid], &idx[mid..end]);
            let (mut i, mut j) = (0, 0);
            while i < a.len() && j < b.len() {
                resched.tick()?;
                // Take from the right run only when strictly smaller: stable.
                if cmp(&v[b[j]], &v[a[i]]) == Ordering::Less {
                    buf.push(b[j]);
                    j += 1;
                } else {
                    buf.push(a[i]);
                    i += 1;
                }
            }
            buf.extend_from_slice(&a[i..]);
            buf.extend_from_slice(&b[j..]);
            start = end;
        }
        std::mem::swap(&mut idx, &mut buf);
        width *= 2;
    }
    let mut slots: Vec<Option<T>> = v.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(n);
    for i in idx {
        resched.tick()?;
        // `idx` is a permutation, so every slot is taken exactly once.
        if let Some(x) = slots.get_mut(i).and_then(Option::take) {
            out.push(x);
        }
    }
    Ok(out)
}

/// Drops `v` one element at a time with a point per element: freeing 200k symbol names at
/// once is several milliseconds of `free`.
pub(crate) fn drop_with_points<T>(v: Vec<T>, resched: &mut Resched) -> Result<(), Cancelled> {
    for x in v {
        drop(x);
        resched.tick()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_stable_sort() {
        // Pseudo-random keys with many duplicates; the payload shows stability.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let v: Vec<(u32, usize)> = (0..10_007)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % 500) as u32, i)
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|a| a.0);
        let got = sort_by_with_points(v, |a, b| a.0.cmp(&b.0), &mut Resched::none()).unwrap();
        assert_eq!(got, want);
        for n in [0usize, 1, 31, 32, 33, 64, 65] {
            let v: Vec<u32> = (0..n as u32).rev().collect();
            let got = sort_by_with_points(v, |a, b| a.cmp(b), &mut Resched::none()).unwrap();
            assert_eq!(got, (0..n as u32).collect::<Vec<_>>());
        }
    }

    #[test]
    fn reaches_points_and_can_be_cancelled() {
        let v: Vec<u64> = (0..100_000).rev().collect();
        let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
        sort_by_with_points(v.clone(), |a, b| a.cmp(b), &mut r).unwrap();
        assert!(r.stats().items >= 100_000, "{:?}", r.stats());
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(std::time::Duration::from_micros(1))
            .with_cancel_flag(flag);
        assert_eq!(
            sort_by_with_points(v, |a, b| a.cmp(b), &mut r),
            Err(Cancelled)
        );
    }
}
