//! Substring search over megabytes (a decompressed kernel, a vmlinux ELF) with reschedule points: one `memmem` call over a
//! whole decompressed kernel takes milliseconds, so the haystack is searched in windows of
//! [`SCAN_CHUNK`] bytes (overlapping by the needle's length) with a point between windows.

use crate::resched::{Cancelled, Resched};
use memchr::memmem::Finder;

/// Bytes searched between two reschedule points (a few µs of `memmem` work when the needle
/// is rare, up to tens of µs when its first bytes are common).
pub const SCAN_CHUNK: usize = 64 << 10;

/// The spans for [`ChunkedFinder::find_in`] that cover any haystack whole.
#[allow(clippy::single_range_in_vec_init)]
pub const EVERYWHERE: &[std::ops::Range<usize>] = &[0..usize::MAX];

/// Sorts byte ranges and merges the ones that overlap or touch, so each byte is covered once
/// (sections that overlap, or one that claims the whole file, are read and searched once).
pub fn merge_spans<T: Ord + Copy>(mut spans: Vec<std::ops::Range<T>>) -> Vec<std::ops::Range<T>> {
    spans.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<T>> = Vec::with_capacity(spans.len());
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// A needle searched for in bounded windows.
#[derive(Debug)]
pub struct ChunkedFinder<'n> {
    finder: Finder<'n>,
}

impl<'n> ChunkedFinder<'n> {
    pub fn new(needle: &'n [u8]) -> Self {
        ChunkedFinder {
            finder: Finder::new(needle),
        }
    }

    /// The first occurrence starting at or after `from`.
    pub fn find_from(
        &self,
        hay: &[u8],
        from: usize,
        resched: &mut Resched,
    ) -> Result<Option<usize>, Cancelled> {
        let overlap = self.finder.needle().len().saturating_sub(1);
        let mut start = from;
        while start < hay.len() {
            let end = start.saturating_add(SCAN_CHUNK + overlap).min(hay.len());
            if let Some(i) = self.finder.find(&hay[start..end]) {
                return Ok(Some(start + i));
            }
            resched.tick_step()?;
            start += SCAN_CHUNK;
        }
        Ok(None)
    }

    /// The first occurrence starting at or after `from` that lies wholly inside one of
    /// `spans` (ascending, non-overlapping ranges of `hay`): a search that skips what cannot
    /// hold the needle, such as the code of a vmlinux.
    pub fn find_in(
        &self,
        hay: &[u8],
        spans: &[std::ops::Range<usize>],
        from: usize,
        resched: &mut Resched,
    ) -> Result<Option<usize>, Cancelled> {
        for span in spans {
            let end = span.end.min(hay.len());
            let start = span.start.max(from);
            if start >= end {
                continue;
            }
            if let Some(at) = self.find_from(&hay[..end], start, resched)? {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    /// Every occurrence (overlapping ones too), at most `max` of them.
    pub fn find_all(
        &self,
        hay: &[u8],
        max: usize,
        resched: &mut Resched,
    ) -> Result<Vec<usize>, Cancelled> {
        let mut out = Vec::new();
        let mut at = 0;
        while out.len() < max {
            let Some(hit) = self.find_from(hay, at, resched)? else {
                break;
            };
            out.push(hit);
            at = hit + 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_spans_covers_each_byte_once() {
        assert_eq!(
            merge_spans::<u64>(Vec::new()),
            Vec::<std::ops::Range<u64>>::new()
        );
        assert_eq!(
            merge_spans(vec![30..40, 0..10, 5..12, 12..20, 50..50, 35..38]),
            vec![0..20, 30..40, 50..50]
        );
        // One range claiming everything swallows the rest.
        assert_eq!(
            merge_spans(vec![3..9usize, 0..usize::MAX, 20..30]),
            vec![0..usize::MAX]
        );
    }

    #[test]
    fn finds_only_inside_spans() {
        let mut hay = vec![0u8; 3 * SCAN_CHUNK];
        let needle = b"needle!";
        for at in [10, SCAN_CHUNK - 3, 2 * SCAN_CHUNK + 5] {
            hay[at..at + needle.len()].copy_from_slice(needle);
        }
        let f = ChunkedFinder::new(needle);
        let mut r = Resched::none();
        // The first hit is outside every span; the second straddles its span's end.
        let spans = [100..SCAN_CHUNK, 2 * SCAN_CHUNK..3 * SCAN_CHUNK];
        assert_eq!(
            f.find_in(&hay, &spans, 0, &mut r).unwrap(),
            Some(2 * SCAN_CHUNK + 5)
        );
        let spans = [0..SCAN_CHUNK + 4, 2 * SCAN_CHUNK..2 * SCAN_CHUNK + 11];
        assert_eq!(f.find_in(&hay, &spans, 0, &mut r).unwrap(), Some(10));
        assert_eq!(
            f.find_in(&hay, &spans, 11, &mut r).unwrap(),
            Some(SCAN_CHUNK - 3)
        );
        assert_eq!(f.find_in(&hay, &spans, SCAN_CHUNK, &mut r).unwrap(), None);
        assert_eq!(f.find_in(&hay, &[], 0, &mut r).unwrap(), None);
    }

    #[test]
    fn finds_needles_across_window_boundaries() {
        let mut hay = vec![0u8; 3 * SCAN_CHUNK + 100];
        let needle = b"needle!";
        // One straddling the first boundary, one at the very end.
        let a = SCAN_CHUNK - 3;
        let b = hay.len() - needle.len();
        hay[a..a + needle.len()].copy_from_slice(needle);
        hay[b..].copy_from_slice(needle);
        let f = ChunkedFinder::new(needle);
        let mut r = Resched::none();
        assert_eq!(f.find_all(&hay, 10, &mut r).unwrap(), vec![a, b]);
        assert_eq!(f.find_from(&hay, a + 1, &mut r).unwrap(), Some(b));
        assert_eq!(f.find_all(&hay, 1, &mut r).unwrap(), vec![a]);
        assert_eq!(f.find_from(&hay[..b], a + 1, &mut r).unwrap(), None);
    }

    #[test]
    fn cancellation_stops_a_long_scan() {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(std::time::Duration::from_micros(1))
            .with_cancel_flag(flag);
        let hay = vec![0u8; 64 * SCAN_CHUNK];
        let f = ChunkedFinder::new(b"x");
        assert_eq!(f.find_from(&hay, 0, &mut r), Err(Cancelled));
    }
}
