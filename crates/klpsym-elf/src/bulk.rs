//! Freeing big intermediate tables in steps. Sorting and the other bulk passes are
//! [`klpsym_core::bulk`]'s; its `free_with_points` takes plain values only, and the parsed
//! symbol table (names that are `Cow`s) is not one.

use klpsym_core::resched::{Cancelled, Resched};

/// Bytes given back per step: unmapping a page costs about a microsecond (more in a VM), so
/// 16 pages.
const STEP_BYTES: usize = 64 << 10;

/// Elements dropped per step when they own heap memory (a `free` each).
const STEP_OWNING: usize = 256;

/// Drops `v`'s elements and frees its buffer about 64 KiB (or 256 heap-owning elements) at a
/// time, a point between steps: one `munmap` of tens of megabytes is milliseconds.
pub(crate) fn free_with_points<T>(mut v: Vec<T>, resched: &mut Resched) -> Result<(), Cancelled> {
    let mut step = (STEP_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    if std::mem::needs_drop::<T>() {
        step = step.min(STEP_OWNING);
    }
    while v.capacity() > step {
        let keep = v.capacity() - step;
        // Drops the elements past `keep`, then gives their memory back.
        v.truncate(keep);
        v.shrink_to(keep);
        resched.tick_step()?;
    }
    drop(v);
    resched.tick_step()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frees_owned_elements_in_steps() {
        let v: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
        let mut r = Resched::none();
        free_with_points(v, &mut r).unwrap();
        // 100k strings, 256 per step.
        assert!(r.stats().items >= 390, "{:?}", r.stats());
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(std::time::Duration::from_micros(1))
            .with_cancel_flag(flag);
        let v: Vec<u64> = vec![1; 1 << 20];
        std::thread::sleep(std::time::Duration::from_micros(5));
        assert_eq!(free_with_points(v, &mut r), Err(Cancelled));
    }
}
