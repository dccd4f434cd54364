//! Where a table keeps its names and records: owned buffers (a table built from a source), or
//! views into bytes the table keeps alive (a memory-mapped cache entry), read in place.
//!
//! A view is checked once when it is made (records aligned and in bounds, names UTF-8), so
//! reading records is a slice, not a copy (names are checked again one by one as they are
//! read, a few bytes each): a cache entry's megabytes are never copied into fresh memory,
//! whose first touch costs a page fault per 4 KiB.

use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::table::SymRec;

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

/// The symbol records, in kernel order.
pub(crate) enum Records {
    /// Built by this process.
    Owned(Vec<SymRec>),
    /// A range of a backing buffer, 8-aligned and a whole number of records (checked when the
    /// view was made; the bytes cannot move, so it stays so).
    Mapped(Backing, Range<usize>),
}

impl Deref for Records {
    type Target = [SymRec];
    #[inline]
    fn deref(&self) -> &[SymRec] {
        match self {
            Records::Owned(v) => v,
            Records::Mapped(b, r) => bytemuck::cast_slice(&(**b).as_ref()[r.clone()]),
        }
    }
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Records::Owned(v) => write!(f, "Records::Owned({} records)", v.len()),
            Records::Mapped(_, r) => write!(f, "Records::Mapped({r:?})"),
        }
    }
}

/// `bytes[range]` as records in place, when little-endian, aligned and a whole number of them.
pub(crate) fn records_view(backing: &Backing, range: Range<usize>) -> Option<Records> {
    if cfg!(target_endian = "big") {
        return None;
    }
    let bytes = (**backing).as_ref().get(range.clone())?;
    bytemuck::try_cast_slice::<u8, SymRec>(bytes).ok()?;
    Some(Records::Mapped(backing.clone(), range))
}

/// An array of `u32`s: built by this process, or a range of a backing buffer read in place
/// (4-aligned, checked when the view was made).
pub(crate) enum Words {
    /// Built by this process.
    Owned(Vec<u32>),
    /// A range of a backing buffer.
    Mapped(Backing, Range<usize>),
}

impl Words {
    /// `bytes[range]` as words in place, when little-endian and aligned.
    pub(crate) fn view(backing: &Backing, range: Range<usize>) -> Option<Words> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let bytes = (**backing).as_ref().get(range.clone())?;
        bytemuck::try_cast_slice::<u8, u32>(bytes).ok()?;
        Some(Words::Mapped(backing.clone(), range))
    }

    /// Frees owned words in steps (a view frees nothing).
    pub(crate) fn free_with(
        self,
        resched: &mut crate::resched::Resched,
    ) -> Result<(), crate::resched::Cancelled> {
        match self {
            Words::Owned(v) => crate::bulk::free_with_points(v, resched),
            Words::Mapped(..) => Ok(()),
        }
    }
}

impl Deref for Words {
    type Target = [u32];
    #[inline]
    fn deref(&self) -> &[u32] {
        match self {
            Words::Owned(v) => v,
            Words::Mapped(b, r) => bytemuck::cast_slice(&(**b).as_ref()[r.clone()]),
        }
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Words::Owned(v) => write!(f, "Words::Owned({} words)", v.len()),
            Words::Mapped(_, r) => write!(f, "Words::Mapped({r:?})"),
        }
    }
}
