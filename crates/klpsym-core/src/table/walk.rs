//! The table's walks: name and size questions answered in kernel order, reaching the table's
//! own reschedule driver, while their index is not built (`SymbolTable::scan_until_indexed`).

use crate::resched::Resched;

use super::{SymbolId, SymbolTable, SIZE_UNKNOWN};

/// The walk driver, taken out of its slot for one walk and put back when the walk ends (its
/// iterator dropped), so no lock is held while the caller consumes the walk.
struct WalkDriver<'t> {
    slot: &'t std::sync::Mutex<Option<Resched>>,
    driver: Option<Resched>,
}

impl<'t> WalkDriver<'t> {
    fn take(slot: &'t std::sync::Mutex<Option<Resched>>) -> Self {
        let mut driver = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        // It sat in its slot since its last work (on this thread or another): that wait is
        // not a stretch of its own.
        if let Some(r) = &mut driver {
            r.resume();
        }
        WalkDriver { slot, driver }
    }

    #[inline]
    fn tick(&mut self) {
        if let Some(r) = &mut self.driver {
            // A walk answers whole: cancellation is the caller's to notice at its next point.
            let _ = r.tick();
        }
    }
}

impl Drop for WalkDriver<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.driver.take() {
            *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        }
    }
}

/// Where one object's symbols lie in kernel order: the first and one past the last, and
/// whether their addresses never decrease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) sorted: bool,
}

impl SymbolTable {
    /// Makes name and size queries walk the table (in kernel order) while their index is not
    /// built, instead of building it on first use: for a process that asks a few questions
    /// of a table it has just read (one `klpsym lookup`), a walk of ~100,000 symbols (a few
    /// hundred microseconds, reaching `resched`'s points) costs far less than an index it
    /// would use once (10-20 ms to build). Building the indexes
    /// ([`SymbolTable::build_indexes`]) ends the walks; a caller about to ask many questions
    /// builds them first.
    pub fn scan_until_indexed(&mut self, resched: Resched) {
        self.walks = true;
        *self.driver.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(resched);
    }

    pub(super) fn walks(&self) -> bool {
        self.walks
    }

    /// The symbols of `range` (kernel order) for which `keep` holds, reaching the walk
    /// driver's reschedule points.
    pub(super) fn walk<'t>(
        &'t self,
        range: std::ops::Range<u32>,
        keep: impl Fn(u32) -> bool + 't,
    ) -> impl Iterator<Item = u32> + 't {
        let mut driver = WalkDriver::take(&self.driver);
        let mut i = range.start;
        std::iter::from_fn(move || {
            while i < range.end {
                let at = i;
                i += 1;
                driver.tick();
                if keep(at) {
                    return Some(at);
                }
            }
            None
        })
    }

    /// Where each object's symbols lie, computed once (one pass, reaching the walk driver's
    /// points).
    pub(super) fn spans(&self) -> &[Span] {
        self.spans.get_or_init(|| {
            let mut driver = WalkDriver::take(&self.driver);
            let mut spans = vec![
                Span {
                    start: u32::MAX,
                    end: 0,
                    sorted: true,
                };
                self.objects.len()
            ];
            let mut last = vec![0u64; self.objects.len()];
            for (i, s) in self.syms.iter().enumerate() {
                driver.tick();
                let o = s.object as usize;
                let sp = &mut spans[o];
                sp.start = sp.start.min(i as u32);
                sp.end = i as u32 + 1;
                sp.sorted &= s.addr >= last[o];
                last[o] = s.addr;
            }
            spans
        })
    }

    /// [`SymbolTable::size`] without the address index: the nearest higher address of the
    /// same object, as the index infers it (objects of section offsets have no inferred size).
    pub(super) fn size_by_walk(&self, id: SymbolId) -> u64 {
        let r = &self.syms[id.0 as usize];
        if self.objects[r.object as usize].unplaced {
            return SIZE_UNKNOWN;
        }
        let span = self.spans()[r.object as usize];
        let same = move |i: u32| {
            let s = &self.syms[i as usize];
            s.object == r.object && s.addr > r.addr
        };
        let next = if span.sorted {
            // The first higher address after it is the nearest.
            self.walk(id.0..span.end, same).next()
        } else {
            self.walk(span.start..span.end, same)
                .min_by_key(|&i| self.syms[i as usize].addr)
        };
        next.map_or(SIZE_UNKNOWN, |i| self.syms[i as usize].addr - r.addr)
    }

    /// Sets the driver whose reschedule points the table's own work reaches (walks, indexes
    /// built on first use): a caller that opens a table and hands it to code asking queries
    /// sets its own policy, interval and cancel flag here.
    pub fn set_driver(&mut self, resched: Resched) {
        *self.driver.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(resched);
    }

    /// Runs `build` with the table's driver (or none, when another piece of work holds it).
    pub(super) fn with_driver<T>(&self, build: impl FnOnce(&mut Resched) -> T) -> T {
        let mut d = WalkDriver::take(&self.driver);
        match d.driver.as_mut() {
            Some(rs) => build(rs),
            None => build(&mut Resched::none()),
        }
    }
}
