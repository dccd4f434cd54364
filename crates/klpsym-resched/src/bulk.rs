//! Bulk work over whole tables, cut into steps with a reschedule point between them.
//!
//! The standard library's bulk operations are single stretches: `sort` of 200k symbols is tens
//! of milliseconds, `vec![x; n]` writes (and page-faults) megabytes at once, `String::from_utf8`
//! validates a whole 5 MB file, and dropping a `Vec<String>` frees every string in one go. Each
//! function here does the same work in bounded steps and ticks the caller's [`Resched`] between
//! them, so the reschedule bound also holds inside these operations. Each is `#[track_caller]`:
//! an instrumented driver ([`crate::Recorder`]) names the caller's line as the point, not a
//! line of this file.

use std::cmp::Ordering;

use crate::resched::{Cancelled, Resched};

/// Elements dropped, or indexes made, per step.
const STEP: usize = 4096;

/// Bytes copied or filled per step: four pages, so a step is at most four page faults.
const STEP_BYTES: usize = 16 << 10;

fn step_of<T>() -> usize {
    (STEP_BYTES / std::mem::size_of::<T>().max(1)).max(1)
}

/// Elements sorted in one `sort_by` call before merging (a few microseconds of comparisons).
const RUN: usize = 64;

/// `vec![value; n]`, written in steps.
#[track_caller]
pub fn filled_vec<T: Clone>(
    n: usize,
    value: T,
    resched: &mut Resched,
) -> Result<Vec<T>, Cancelled> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let k = (n - v.len()).min(step_of::<T>());
        v.extend(std::iter::repeat_n(value.clone(), k));
        resched.tick_step()?;
    }
    Ok(v)
}

/// Appends `src` to `dst` in steps.
#[track_caller]
pub fn extend_from_slice<T: Clone>(
    dst: &mut Vec<T>,
    src: &[T],
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    dst.reserve(src.len());
    for c in src.chunks(step_of::<T>()) {
        dst.extend_from_slice(c);
        resched.tick_step()?;
    }
    Ok(())
}

/// Frees a big vector in steps with reschedule points: its elements one by one (a tick each)
/// and its buffer as it empties. Giving back tens of megabytes of pages is milliseconds of
/// kernel time in one `munmap`, and freeing a hundred thousand strings is milliseconds of
/// `free`.
///
/// glibc's `free` of a small block only puts it on a "fastbin" list; the merging is deferred
/// to the next request of 1 KiB or more (or a free of 64 KiB or more), which then merges every
/// block freed since in one go. So every few elements a 4 KiB block is requested and given
/// back, making that merge happen in small batches, each followed by a point; and the buffer
/// of heap-owning elements shrinks 32 KiB at a time, below that 64 KiB threshold. With other
/// allocators this costs a malloc/free pair per batch.
///
/// The buffer is given back a step at a time however much of it is spare: an emptied buffer
/// kept for reuse (a decoder's block buffer, its length 0 and its 25 MB of pages touched) went
/// in one `munmap` of 1-1.5 ms here when the step was taken from its length.
#[track_caller]
pub fn free_with_points<T>(mut v: Vec<T>, resched: &mut Resched) -> Result<(), Cancelled> {
    let size = std::mem::size_of::<T>().max(1);
    let heap_owning = std::mem::needs_drop::<T>();
    // Heap-owning elements: 32 KiB of buffer a step (see above); plain values: 256 KiB (64
    // pages).
    let step = (if heap_owning { 32 << 10 } else { 256 << 10 } / size).max(1);
    if heap_owning {
        const SETTLE_EVERY: usize = 4;
        let mut dropped = 0usize;
        while let Some(x) = v.pop() {
            drop(x);
            dropped += 1;
            if dropped.is_multiple_of(SETTLE_EVERY) {
                settle_frees();
                resched.tick_step()?;
            } else {
                resched.tick()?;
            }
            if dropped.is_multiple_of(step) {
                v.shrink_to(v.len().max(v.capacity().saturating_sub(step)));
                resched.tick_step()?;
            }
        }
        settle_frees();
        resched.tick_step()?;
    }
    while v.capacity() > step {
        let target = v.capacity() - step;
        // Plain values past the step's end go with it (heap-owning ones are gone by now).
        v.truncate(target);
        v.shrink_to(target);
        resched.tick_step()?;
    }
    drop(v);
    resched.tick_step()
}

/// Drops what `items` yields one by one with reschedule points, as [`free_with_points`] drops
/// a vector's elements: for the owning iterator of a map or a set (`map.into_iter()`), whose
/// own buffer goes when the iterator is dropped at the end.
#[track_caller]
pub fn free_each_with_points<T>(
    items: impl Iterator<Item = T>,
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    const SETTLE_EVERY: usize = 4;
    let mut dropped = 0usize;
    for x in items {
        drop(x);
        dropped += 1;
        if std::mem::needs_drop::<T>() && dropped.is_multiple_of(SETTLE_EVERY) {
            settle_frees();
            resched.tick_step()?;
        } else {
            resched.tick()?;
        }
    }
    settle_frees();
    resched.tick_step()
}

/// Requests and gives back a 4 KiB block: glibc merges its deferred small frees on such a
/// request (see [`free_with_points`]).
fn settle_frees() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(4096)));
}

/// `v.dedup()` in steps: consecutive equal elements kept once, a tick per element (the
/// standard `dedup` of a million pairs is one stretch of hundreds of microseconds).
#[track_caller]
pub fn dedup_with_points<T: Copy + PartialEq>(
    v: &mut Vec<T>,
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    if v.is_empty() {
        return Ok(());
    }
    let mut kept = 1;
    for i in 1..v.len() {
        if v[i] != v[kept - 1] {
            v[kept] = v[i];
            kept += 1;
        }
        resched.tick()?;
    }
    v.truncate(kept);
    Ok(())
}

/// `bytes` is UTF-8; the check runs in steps. `Ok(Err(offset))` names the first invalid byte.
#[track_caller]
pub fn validate_utf8(bytes: &[u8], resched: &mut Resched) -> Result<Result<(), usize>, Cancelled> {
    const CHUNK: usize = 64 << 10;
    let mut at = 0;
    while at < bytes.len() {
        let end = (at + CHUNK).min(bytes.len());
        match std::str::from_utf8(&bytes[at..end]) {
            Ok(_) => at = end,
            // A character cut by the chunk's end: continue from its first byte.
            Err(e) if e.error_len().is_none() && end < bytes.len() && e.valid_up_to() > 0 => {
                at += e.valid_up_to();
            }
            Err(e) if e.error_len().is_none() && end < bytes.len() => {
                // Fewer than 4 bytes from a chunk start and still incomplete: check a longer
                // window once (a character is at most 4 bytes).
                let wider = (at + 8).min(bytes.len());
                match std::str::from_utf8(&bytes[at..wider]) {
                    Ok(_) => at = wider,
                    Err(e) if e.valid_up_to() > 0 => at += e.valid_up_to(),
                    Err(_) => return Ok(Err(at)),
                }
            }
            Err(e) => return Ok(Err(at + e.valid_up_to())),
        }
        resched.tick_step()?;
    }
    Ok(Ok(()))
}

/// Sorts `v` stably by `cmp`: short runs first, then pairwise merges, a tick per merged
/// element; runs already in order are copied in steps. Kernel tables are mostly sorted
/// already, so the common case is close to linear.
#[track_caller]
pub fn sort_by_with_points<T, F>(
    v: &mut Vec<T>,
    mut cmp: F,
    resched: &mut Resched,
) -> Result<(), Cancelled>
where
    T: Copy,
    F: FnMut(&T, &T) -> Ordering,
{
    let n = v.len();
    for run in v.chunks_mut(RUN) {
        run.sort_by(&mut cmp);
        resched.tick_step()?;
    }
    if n <= RUN {
        return Ok(());
    }
    let mut buf: Vec<T> = Vec::with_capacity(n);
    let mut width = RUN;
    while width < n {
        buf.clear();
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            merge(&v[start..mid], &v[mid..end], &mut buf, &mut cmp, resched)?;
            start = end;
        }
        std::mem::swap(v, &mut buf);
        width *= 2;
    }
    free_with_points(buf, resched)
}

fn merge<T: Copy, F: FnMut(&T, &T) -> Ordering>(
    a: &[T],
    b: &[T],
    out: &mut Vec<T>,
    cmp: &mut F,
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    let in_order = match (a.last(), b.first()) {
        (Some(x), Some(y)) => cmp(y, x) != Ordering::Less,
        _ => true,
    };
    if in_order {
        extend_from_slice(out, a, resched)?;
        return extend_from_slice(out, b, resched);
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        // Stable: on equal keys the left run's element comes first.
        if cmp(&b[j], &a[i]) == Ordering::Less {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
        resched.tick()?;
    }
    extend_from_slice(out, &a[i..], resched)?;
    extend_from_slice(out, &b[j..], resched)
}

/// Sorts `v` stably by a `u64` key: a least-significant-digit radix sort, one pass per byte
/// in which the keys differ (kernel addresses share their top bytes, so usually four or five
/// passes), each pass cut into steps. Linear in `v.len()`: several times faster than a
/// comparison sort for big batches of addresses.
#[track_caller]
pub fn sort_by_u64_key_with_points<T: Copy>(
    v: &mut Vec<T>,
    key: impl Fn(&T) -> u64,
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    let n = v.len();
    if n < 2 {
        return Ok(());
    }
    let step = step_of::<T>().max(1024);
    // One pass counts every byte position at once; a byte whose count is all in one bucket
    // (the shared top bytes of kernel addresses) needs no pass of its own.
    let mut counts = vec![[0usize; 256]; 8];
    for c in v.chunks(step) {
        for x in c {
            let k = key(x);
            for (byte, count) in counts.iter_mut().enumerate() {
                count[((k >> (byte * 8)) & 0xff) as usize] += 1;
            }
        }
        resched.tick_step()?;
    }
    let mut buf: Vec<T> = Vec::new();
    for (byte, count) in counts.iter().enumerate() {
        if count.contains(&n) {
            continue;
        }
        let shift = byte * 8;
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, &c) in at.iter_mut().zip(count) {
            *a = sum;
            sum += c;
        }
        // Scatter into `buf` (fully rewritten each pass; its length is set once).
        if buf.len() != n {
            extend_from_slice(&mut buf, v, resched)?;
        }
        for c in v.chunks(step) {
            for x in c {
                let d = ((key(x) >> shift) & 0xff) as usize;
                buf[at[d]] = *x;
                at[d] += 1;
            }
            resched.tick_step()?;
        }
        std::mem::swap(v, &mut buf);
    }
    free_with_points(buf, resched)
}

/// Sorts `v` stably by `cmp` without cloning elements: sorts indexes, then moves each element
/// once. For elements that own heap memory (strings).
#[track_caller]
pub fn sort_owned_by_with_points<T, F>(
    v: Vec<T>,
    mut cmp: F,
    resched: &mut Resched,
) -> Result<Vec<T>, Cancelled>
where
    F: FnMut(&T, &T) -> Ordering,
{
    let n = v.len();
    let mut idx: Vec<usize> = Vec::with_capacity(n);
    while idx.len() < n {
        let from = idx.len();
        idx.extend(from..(from + STEP).min(n));
        resched.tick_step()?;
    }
    sort_by_with_points(&mut idx, |&a, &b| cmp(&v[a], &v[b]), resched)?;
    let mut slots: Vec<Option<T>> = Vec::with_capacity(n);
    for x in v {
        slots.push(Some(x));
        resched.tick()?;
    }
    let mut out = Vec::with_capacity(n);
    for &i in &idx {
        resched.tick()?;
        // `idx` is a permutation, so every slot is taken exactly once.
        if let Some(x) = slots.get_mut(i).and_then(Option::take) {
            out.push(x);
        }
    }
    free_with_points(idx, resched)?;
    free_with_points(slots, resched)?;
    Ok(out)
}

/// Asks the kernel to reclaim the whole pages inside `bytes` now (`MADV_PAGEOUT`, Linux 5.4+):
/// a pass over a mapped file (a `-dbg` vmlinux's 250 MB `.debug_info`) leaves behind it pages
/// it will not read again, which would otherwise count in the process's memory until it
/// exits. Advice only, and never a loss: a file page is read again from its file, an
/// anonymous one from swap (or kept); an older kernel refuses and nothing changes.
pub fn release_pages(bytes: &[u8]) {
    advise(bytes.as_ptr() as usize, bytes.len(), 4096, Advice::PageOut);
}

/// [`release_pages`] in steps of 64 KiB with a reschedule point before each: a whole debug
/// section (hundreds of megabytes) in one call is milliseconds in the kernel with no point
/// (5-6 ms for a 6.1 `-dbg` vmlinux's sections; 16 MiB at once 1.2-1.3 ms; 256 KiB up to
/// 0.37 ms, measured by `klpsym-bench resched`).
pub fn release_pages_with(bytes: &[u8], resched: &mut Resched) -> Result<(), Cancelled> {
    const STEP: usize = 64 << 10;
    let end = (bytes.as_ptr() as usize).saturating_add(bytes.len());
    let mut at = bytes.as_ptr() as usize;
    while at < end {
        resched.tick_step()?;
        // Steps end on page boundaries, so no page between two steps is left out (`advise`
        // keeps to the whole pages inside each).
        let next = ((at & !4095) + STEP).min(end);
        advise(at, next - at, 4096, Advice::PageOut);
        at = next;
    }
    Ok(())
}

/// Asks the kernel to read the pages of `bytes` (a mapped file's) into its page cache now
/// (`MADV_WILLNEED`: readahead, no page mapped, nothing changed), 16 KiB a step with a
/// reschedule point after each: a walk over a mapped file then finds its pages cached, where
/// each fault of the walk would read ahead (allocating tens of pages) inside one stretch.
/// Advice only: an anonymous range, or a kernel that declines, changes nothing.
pub fn prefetch_with(bytes: &[u8], resched: &mut Resched) -> Result<(), Cancelled> {
    // 16 KiB: at 64 KiB a step was up to 0.8 ms here (its readahead allocates the pages).
    const STEP: usize = 16 << 10;
    let end = (bytes.as_ptr() as usize).saturating_add(bytes.len());
    let mut at = bytes.as_ptr() as usize & !4095;
    while at < end {
        let next = (at + STEP).min(end);
        // Whole pages: the last partial one is rounded up by the kernel.
        advise(
            at,
            (next - at).next_multiple_of(4096),
            4096,
            Advice::WillNeed,
        );
        at = next;
        resched.tick_step()?;
    }
    Ok(())
}

/// A window of a mapped section kept asked into the page cache ahead of a pass that reads it
/// in order: [`prefetch_with`] of the next 4 MiB once the pass is within 2 MiB of what was
/// asked.
#[derive(Debug, Default)]
pub struct ReadAhead {
    ahead: usize,
}

impl ReadAhead {
    /// How far ahead of the pass the window reaches.
    pub const WINDOW: usize = 4 << 20;

    /// The pass is at offset `off` of `bytes`.
    pub fn at(&mut self, bytes: &[u8], off: usize, resched: &mut Resched) -> Result<(), Cancelled> {
        if off + Self::WINDOW / 2 > self.ahead && self.ahead < bytes.len() {
            let to = (off + Self::WINDOW).min(bytes.len());
            if let Some(next) = bytes.get(self.ahead.max(off)..to) {
                prefetch_with(next, resched)?;
            }
            self.ahead = to;
        }
        Ok(())
    }
}

/// Drops `bytes`, their pages given back 1 MiB a step first when this is their last owner:
/// a mapped file's pages are otherwise unmapped in one system call (1.5 ms for a `-dbg`
/// vmlinux, `klpsym-bench resched`, 2026-12-07), and a big buffer's freed in one.
#[track_caller]
pub fn free_shared_bytes_with<B: ?Sized + AsRef<[u8]>>(
    mut bytes: std::sync::Arc<B>,
    resched: &mut Resched,
) -> Result<(), Cancelled> {
    if std::sync::Arc::get_mut(&mut bytes).is_some() {
        const STEP: usize = 1 << 20;
        let b: &[u8] = (*bytes).as_ref();
        let end = (b.as_ptr() as usize).saturating_add(b.len());
        let mut at = b.as_ptr() as usize;
        while at < end {
            let next = ((at & !4095) + STEP).min(end);
            // The last owner drops them right after, never reading them again.
            advise(at, next - at, 4096, Advice::DontNeed);
            at = next;
            resched.tick_step()?;
        }
    }
    drop(bytes);
    resched.tick_step()
}

/// The advice klpsym gives: none of it changes what memory holds while anyone reads it
/// (`DontNeed` only for the last owner's, right before they go). (No huge pages: a buffer
/// klpsym fills is first touched inside a bounded loop, and a huge page's first touch zeroes
/// 2 MiB in one kernel entry, 270 µs and more on this project's VM.)
#[derive(Clone, Copy)]
enum Advice {
    /// MADV_PAGEOUT: move the range out of memory now.
    PageOut,
    /// MADV_WILLNEED: read the range's file pages into the page cache now.
    WillNeed,
    /// MADV_DONTNEED: drop the range's pages now (a file's are read again from the file, an
    /// anonymous one reads as zero): only for memory no one reads again.
    DontNeed,
}

/// `advice` on the whole `unit`-sized pages inside `[start, start + len)`.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn advise(start: usize, len: usize, unit: usize, advice: Advice) {
    let end = start.saturating_add(len);
    let (a, b) = (start.next_multiple_of(unit), end & !(unit - 1));
    let advice = match advice {
        Advice::PageOut => libc::MADV_PAGEOUT,
        Advice::DontNeed => libc::MADV_DONTNEED,
        Advice::WillNeed => libc::MADV_WILLNEED,
    };
    if b > a {
        // SAFETY: [a, b) lies inside memory the caller can read; the advice changes how the
        // kernel backs those pages (none until read again), never their mapping, and their
        // contents only under `DontNeed`, given for memory dropped right after unread.
        unsafe {
            libc::madvise(a as *mut libc::c_void, b - a, advice);
        }
    }
}

/// Nothing to ask for elsewhere.
#[cfg(not(target_os = "linux"))]
fn advise(_start: usize, _len: usize, _unit: usize, _advice: Advice) {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    /// Released pages keep their contents (the advice is MADV_PAGEOUT, never MADV_DONTNEED,
    /// which would zero a private anonymous page): on the heap, and unaligned at both ends.
    #[test]
    fn released_pages_keep_their_contents() {
        let v: Vec<u8> = (0..(1usize << 20) + 123)
            .map(|i| (i * 7 + i / 4096) as u8)
            .collect();
        let want = v.clone();
        release_pages(&v[1..v.len() - 1]);
        release_pages(&v);
        release_pages(&v[..0]);
        assert!(v == want, "released pages changed");
        // Asking pages in (anonymous here: nothing to read ahead) changes nothing either, a
        // step per 16 KiB.
        let mut r = Resched::none();
        prefetch_with(&v[7..], &mut r).unwrap();
        assert!(v == want, "prefetched pages changed");
        assert!(r.stats().items >= 64, "{:?}", r.stats());
    }

    /// A shared buffer is left as it is (another owner reads it); the last owner's goes.
    #[test]
    fn shared_bytes_are_freed_by_their_last_owner_only() {
        let v: Vec<u8> = (0..(3usize << 20) + 99).map(|i| (i % 251) as u8).collect();
        let want = v.clone();
        let a: Arc<Vec<u8>> = Arc::new(v);
        let b = a.clone();
        free_shared_bytes_with(a, &mut Resched::none()).unwrap();
        assert!(*b == want, "a shared buffer changed");
        let mut r = Resched::none();
        free_shared_bytes_with(b, &mut r).unwrap();
        // A step per MiB (and the end).
        assert!(r.stats().items >= 4, "{:?}", r.stats());
    }

    proptest! {
        #[test]
        fn sort_matches_the_standard_stable_sort(v in prop::collection::vec((0u16..300, any::<u32>()), 0..3000)) {
            let mut want = v.clone();
            want.sort_by_key(|p| p.0);
            let mut got = v.clone();
            sort_by_with_points(&mut got, |a, b| a.0.cmp(&b.0), &mut Resched::none()).unwrap();
            prop_assert_eq!(&got, &want);
            let owned: Vec<(u16, String)> = v.iter().map(|&(k, x)| (k, x.to_string())).collect();
            let got = sort_owned_by_with_points(owned, |a, b| a.0.cmp(&b.0), &mut Resched::none()).unwrap();
            let want: Vec<(u16, String)> = want.iter().map(|&(k, x)| (k, x.to_string())).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn radix_sort_matches_the_standard_stable_sort(v in prop::collection::vec((any::<u64>(), any::<u32>()), 0..3000), high in any::<u64>(), mask in any::<u64>()) {
            // Keys sharing high bits, like kernel addresses, and fully random ones.
            for keys in [v.iter().map(|&(k, x)| (high | (k & mask), x)).collect::<Vec<_>>(), v.clone()] {
                let mut want = keys.clone();
                want.sort_by_key(|p| p.0);
                let mut got = keys.clone();
                sort_by_u64_key_with_points(&mut got, |p| p.0, &mut Resched::none()).unwrap();
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn dedup_matches_the_standard_dedup(v in prop::collection::vec(0u8..4, 0..300)) {
            let mut want = v.clone();
            want.dedup();
            let mut got = v.clone();
            dedup_with_points(&mut got, &mut Resched::none()).unwrap();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn utf8_check_agrees_with_std(s in ".{0,200}", cut in any::<prop::sample::Index>(), bad in any::<bool>()) {
            // Repeat the text so chunk boundaries fall inside multi-byte characters.
            let mut bytes = s.repeat(2000).into_bytes();
            if bad && !bytes.is_empty() {
                let i = cut.index(bytes.len());
                bytes[i] = 0xff;
            }
            let want = std::str::from_utf8(&bytes).map(|_| ()).map_err(|e| e.valid_up_to());
            prop_assert_eq!(validate_utf8(&bytes, &mut Resched::none()).unwrap(), want);
        }
    }

    #[test]
    fn fills_copies_and_drops() {
        let v = filled_vec(10_001, 7u32, &mut Resched::none()).unwrap();
        assert_eq!(v, vec![7u32; 10_001]);
        let mut w = vec![1u32];
        extend_from_slice(&mut w, &v, &mut Resched::none()).unwrap();
        assert_eq!(w.len(), 10_002);
        free_with_points(vec![String::from("x"); 9000], &mut Resched::none()).unwrap();
        let mut r = Resched::none();
        free_with_points(vec![0u8; 3 << 20], &mut r).unwrap();
        assert!(r.stats().items >= 12, "{:?}", r.stats());
        // A buffer emptied for reuse, its pages touched: given back in the same steps, not
        // at once because its length is 0.
        let mut emptied = vec![1u8; 3 << 20];
        emptied.clear();
        let mut r = Resched::none();
        free_with_points(emptied, &mut r).unwrap();
        assert!(r.stats().items >= 12, "{:?}", r.stats());
        // Heap-owning elements with most of their buffer spare (2.4 MB): 32 KiB a step.
        let mut few = Vec::with_capacity(100_000);
        few.extend((0..10).map(|i| i.to_string()));
        let mut r = Resched::none();
        free_with_points(few, &mut r).unwrap();
        assert!(r.stats().items >= 70, "{:?}", r.stats());
    }

    #[test]
    fn long_work_reaches_points_and_can_be_cancelled() {
        let mut v: Vec<u64> = (0..200_000).rev().collect();
        let mut r = Resched::none().with_interval(Duration::from_micros(1));
        sort_by_with_points(&mut v, |a, b| a.cmp(b), &mut r).unwrap();
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert!(r.stats().points > 10, "{:?}", r.stats());
        let mut r = Resched::none()
            .with_interval(Duration::from_micros(1))
            .with_cancel_flag(Arc::new(AtomicBool::new(true)));
        let mut v: Vec<u64> = (0..200_000).rev().collect();
        // The first point may come before the clock says so; within the sort it must stop.
        let mut stopped = false;
        for _ in 0..3 {
            if sort_by_with_points(&mut v, |a, b| b.cmp(a), &mut r).is_err() {
                stopped = true;
                break;
            }
        }
        assert!(stopped);
        assert_eq!(
            filled_vec(1 << 20, 0u8, &mut r).map(|v| v.len()),
            Err(Cancelled)
        );
    }
}
