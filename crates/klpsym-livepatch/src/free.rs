//! Freeing big vectors with reschedule points, buffer included.
//!
//! `klpsym_core::bulk::drop_with_points` drops the elements with ticks between, but then gives
//! the whole buffer back at once: for a report on a big patch that is megabytes, one `munmap`
//! or trim of a millisecond. Here the buffer shrinks as the elements go, 32 KiB at a time.
//!
//! And glibc's `free` of a small block (up to 128 bytes: most names) only puts it on a
//! "fastbin" list; the merging is deferred to the next request of 1 KiB or more (or free of 64
//! KiB or more), which then merges every block freed since, in one go: after dropping a report
//! with a hundred thousand strings, a millisecond or more wherever that next request happens.
//! So every few elements a 4 KiB block is requested and given back, which makes that merge
//! happen in small batches, each followed by a point. With other allocators this costs a
//! malloc/free pair per batch.

use klpsym_core::resched::{Cancelled, Resched};

/// Bytes of buffer given back per step: below glibc's 64 KiB "consolidation threshold", so a
/// step does not merge more than the batch below.
const STEP_BYTES: usize = 32 << 10;

/// Elements dropped between two merges of the allocator's deferred frees.
const BATCH: usize = 4;

/// Drops `v` element by element (a tick each), making the allocator finish its deferred work
/// every few elements and shrinking the buffer every 32 KiB of elements (a step each).
pub(crate) fn drop_vec<T>(mut v: Vec<T>, resched: &mut Resched) -> Result<(), Cancelled> {
    let step = (STEP_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    if !std::mem::needs_drop::<T>() {
        while v.capacity() > step {
            let keep = v.len().min(v.capacity() - step);
            v.truncate(keep);
            v.shrink_to(keep);
            resched.tick_step()?;
        }
        drop(v);
        return resched.tick_step();
    }
    let mut dropped = 0usize;
    while let Some(x) = v.pop() {
        drop(x);
        dropped += 1;
        if dropped.is_multiple_of(BATCH) {
            settle_frees();
            resched.tick_step()?;
        } else {
            resched.tick()?;
        }
        if dropped.is_multiple_of(step) {
            v.shrink_to(v.len());
            resched.tick_step()?;
        }
    }
    drop(v);
    settle_frees();
    resched.tick_step()
}

/// Requests and gives back a 4 KiB block: glibc merges its deferred small frees on such a
/// request (see the module documentation).
pub(crate) fn settle_frees() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(4096)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_everything() {
        let mut r = Resched::none();
        drop_vec(vec![String::from("x"); 100_000], &mut r).unwrap();
        drop_vec(vec![7u64; 100_000], &mut r).unwrap();
        drop_vec(Vec::<String>::new(), &mut r).unwrap();
        assert!(r.stats().items >= 100_000, "{:?}", r.stats());
    }
}
