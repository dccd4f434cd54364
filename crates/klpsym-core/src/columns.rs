//! A table's columns as plain borrowed parts: what the indexes are built from and read with,
//! so that they depend on the storage, never on the table that owns them (the table builds
//! and keeps its indexes; the indexes only see these columns).

use crate::object::ObjectInfo;
use crate::storage::{Names, SymRec};

/// Marks a size that no source and no neighbour could tell.
pub const SIZE_UNKNOWN: u64 = u64::MAX;

/// A table's records, names, objects and source sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Columns<'t> {
    /// The records, in kernel order.
    pub(crate) syms: &'t [SymRec],
    /// The name arena.
    pub(crate) names: &'t Names,
    /// The objects.
    pub(crate) objects: &'t [ObjectInfo],
    /// Sizes the source told, per symbol.
    pub(crate) source_sizes: Option<&'t [u64]>,
}

impl<'t> Columns<'t> {
    /// The name of symbol `i` as bytes (no UTF-8 check).
    #[inline]
    pub(crate) fn name_bytes(&self, i: u32) -> &'t [u8] {
        let r = &self.syms[i as usize];
        &self.names.bytes()[r.name_off as usize..(r.name_off + r.name_len) as usize]
    }

    /// The name of symbol `i` (`None` when its range is not a name: never for a table whose
    /// offsets were checked).
    #[inline]
    pub(crate) fn name(&self, i: u32) -> Option<&'t str> {
        let r = &self.syms[i as usize];
        self.names
            .get(r.name_off as usize..(r.name_off + r.name_len) as usize)
    }

    /// The size the source told for symbol `i`, else [`SIZE_UNKNOWN`].
    #[inline]
    pub(crate) fn source_size(&self, i: u32) -> u64 {
        self.source_sizes.map_or(SIZE_UNKNOWN, |s| s[i as usize])
    }
}
