//! Where a table keeps its names and records: owned buffers (a table built from a source), or
//! views into bytes the table keeps alive (a memory-mapped cache entry), read in place.
//!
//! A view is checked once when it is made (records aligned and in bounds, names UTF-8), so
//! reading records is a slice, not a copy (names are checked again one by one as they are
//! read, a few bytes each): a cache entry's megabytes are never copied into fresh memory,
//! whose first touch costs a page fault per 4 KiB.

use std::ops::{Deref, Range};
use std::sync::Arc;

/// The compact record behind every symbol: 24 bytes, no allocation per symbol. Plain old data
/// with its padding spelled out, so a cache entry's records are read where they lie.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct SymRec {
    pub(crate) addr: u64,
    pub(crate) name_off: u32,
    pub(crate) name_len: u32,
    pub(crate) object: u32,
    pub(crate) kind: u8,
    pub(crate) pad: [u8; 3],
}

/// Bytes a table may read its names and records from in place, kept alive by the table: a
/// memory-mapped cache entry. They must not change while the table lives, and `as_ref` must
/// give the same slice every time (cache entries are replaced by rename, never written in
/// place): the table checked them once, when it was made, and trusts them after.
pub type Backing = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The name arena.
pub(crate) enum Names {
    /// Built by this process (validated UTF-8).
    Owned(String),
    /// A range of a backing buffer (validated UTF-8 when the view was made).
    Mapped(Backing, Range<usize>),
}

impl Names {
    /// All name bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Names::Owned(s) => s.as_bytes(),
            Names::Mapped(b, r) => &(**b).as_ref()[r.clone()],
        }
    }

    /// The name at `range`, or `None` when the range is not a name (never for a table whose
    /// offsets were checked; a guard against a bug turning into a panic).
    #[inline]
    pub(crate) fn get(&self, range: Range<usize>) -> Option<&str> {
        match self {
            Names::Owned(s) => s.get(range),
            // Checked again per name: the bytes are not ours to freeze, and a name is short.
            Names::Mapped(..) => std::str::from_utf8(self.bytes().get(range)?).ok(),
        }
    }

    /// Whether `range` is a name that [`Names::get_checked`] may hand out without looking at
    /// its bytes again: inside the arena, on character boundaries.
    pub(crate) fn check(&self, range: Range<usize>) -> bool {
        match self {
            Names::Owned(s) => s.get(range).is_some(),
            // Mapped names are checked on every read anyway.
            Names::Mapped(..) => true,
        }
    }

    /// [`Names::get`] for a range that passed [`Names::check`] on this arena. An owned arena
    /// is not read at all (a symbolization that only needs the name's length costs no cache
    /// miss on the name); a mapped one is checked as `get` does.
    #[inline]
    pub(crate) fn get_checked(&self, range: Range<usize>) -> Option<&str> {
        match self {
            Names::Owned(s) => {
                debug_assert!(s.get(range.clone()).is_some());
                #[allow(unsafe_code)]
                // SAFETY: the arena never changes after the table is built, and `check`
                // found `range` inside it and on character boundaries.
                Some(unsafe { s.get_unchecked(range) })
            }
            Names::Mapped(..) => self.get(range),
        }
    }

    /// Length in bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.bytes().len()
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Names::Owned(s) => write!(f, "Names::Owned({} bytes)", s.len()),
            Names::Mapped(_, r) => write!(f, "Names::Mapped({r:?})"),
        }
    }
}

/// An array of fixed-width little-endian values: built by this process, or a range of a
/// backing buffer read in place (aligned and a whole number of values, checked when the view
/// was made; the bytes cannot move, so it stays so).
pub(crate) enum Array<T> {
    /// Built by this process.
    Owned(Vec<T>),
    /// A range of a backing buffer.
    Mapped(Backing, Range<usize>),
}

/// The symbol records, in kernel order.
pub(crate) type Records = Array<SymRec>;

/// `u32`s (the name index's slots and links).
pub(crate) type Words = Array<u32>;

impl<T: bytemuck::Pod> Array<T> {
    /// `bytes[range]` as values in place, when little-endian, aligned and a whole number of
    /// them.
    pub(crate) fn view(backing: &Backing, range: Range<usize>) -> Option<Array<T>> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let bytes = (**backing).as_ref().get(range.clone())?;
        bytemuck::try_cast_slice::<u8, T>(bytes).ok()?;
        Some(Array::Mapped(backing.clone(), range))
    }

    /// Frees owned values in steps (a view frees nothing).
    pub(crate) fn free_with(
        self,
        resched: &mut crate::resched::Resched,
    ) -> Result<(), crate::resched::Cancelled> {
        match self {
            Array::Owned(v) => crate::bulk::free_with_points(v, resched),
            Array::Mapped(..) => Ok(()),
        }
    }
}

impl<T: bytemuck::Pod> Deref for Array<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Array::Owned(v) => v,
            Array::Mapped(b, r) => bytemuck::cast_slice(&(**b).as_ref()[r.clone()]),
        }
    }
}

impl<T> std::fmt::Debug for Array<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Array::Owned(v) => write!(f, "Owned({} values)", v.len()),
            Array::Mapped(_, r) => write!(f, "Mapped({r:?})"),
        }
    }
}
