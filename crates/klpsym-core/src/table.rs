//! The symbol table: objects and their symbols in kernel order, with lazily built indexes.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::addr_index::AddrIndex;
use crate::name_index::NameIndex;
use crate::object::{ObjectId, ObjectInfo};
use crate::resched::{Cancelled, Resched};
use crate::stem_index::StemIndex;
use crate::storage::{Names, Records, SymRec};

pub use crate::columns::SIZE_UNKNOWN;

mod builder;
mod walk;

pub(crate) use builder::utf8_exact;
pub use builder::SymbolTableBuilder;
use walk::Span;

/// Index of a symbol in kernel order (the order /proc/kallsyms prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SymbolId(pub u32);

/// A borrowed view of one symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'t> {
    /// Its index in kernel order.
    pub id: SymbolId,
    /// Its address (zero when the source hides addresses).
    pub addr: u64,
    /// The type letter the kernel prints (`t`, `T`, `d`, ...).
    pub kind: char,
    /// Its name.
    pub name: &'t str,
    /// The object that holds it.
    pub object: ObjectId,
}

/// Why a table could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// More symbols or name bytes than the 32-bit layout holds.
    #[error("symbol table too large: {0}")]
    TooLarge(&'static str),
    /// The operation was cancelled at a reschedule point.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// A table of kernel symbols from one source.
#[derive(Debug)]
pub struct SymbolTable {
    /// The name arena, validated as UTF-8 once when the table is built, so reading a name is
    /// a slice, not a validation (for an arena read in place, each name is checked again as
    /// it is read: see `storage`).
    pub(crate) names: Names,
    pub(crate) syms: Records,
    pub(crate) objects: Vec<ObjectInfo>,
    pub(crate) source_sizes: Option<Vec<u64>>,
    /// Source files of symbols, when the source knows them: per symbol an index into
    /// `file_names` (`u32::MAX` for none).
    pub(crate) source_files: Option<(Vec<u32>, Vec<String>)>,
    pub(crate) addr_width: u8,
    pub(crate) addresses_hidden: bool,
    pub(crate) name_index: OnceLock<NameIndex>,
    pub(crate) addr_index: OnceLock<AddrIndex>,
    pub(crate) stem_index: OnceLock<StemIndex>,
    /// Set by [`SymbolTable::scan_until_indexed`]: name and size queries walk the table while
    /// their index is not built, instead of building it on first use.
    pub(crate) walks: bool,
    /// The driver whose reschedule points the table's own work reaches: walks, and indexes
    /// built on first use (a query that finds an index missing builds it with this driver,
    /// never in one unbroken stretch). The driver the table was built with, or the one set
    /// by [`SymbolTable::set_driver`]. Work takes it out and puts it back when done (work
    /// nested in other work finds none and runs without).
    pub(crate) driver: std::sync::Mutex<Option<Resched>>,
    /// Per object: where its symbols lie and whether they come in address order (what a walk
    /// for a size relies on); computed on the first walk.
    pub(crate) spans: OnceLock<Vec<Span>>,
    /// Questions [`SymbolTable::variants_of_with`] answered by walking so far.
    pub(crate) stem_walks: std::sync::atomic::AtomicU32,
}

/// Variant questions a table answers by walking before [`SymbolTable::variants_of_with`]
/// builds the stem index: a walk costs a fifth to a tenth of the build (`klpsym-bench names`).
pub const STEM_WALKS: u32 = 8;

impl SymbolTable {
    /// Frees the table in steps with reschedule points. Dropping a table gives megabytes back
    /// to the kernel at once (milliseconds of munmap); a caller that must not hog its CPU
    /// frees it with this instead.
    pub fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        use crate::bulk::free_with_points;
        if let Names::Owned(n) = self.names {
            free_with_points(n.into_bytes(), resched)?;
        }
        self.syms.free_with(resched)?;
        free_with_points(self.objects, resched)?;
        if let Some(s) = self.source_sizes {
            free_with_points(s, resched)?;
        }
        if let Some((f, n)) = self.source_files {
            free_with_points(f, resched)?;
            free_with_points(n, resched)?;
        }
        if let Some(n) = self.name_index.into_inner() {
            n.free_with(resched)?;
        }
        if let Some(a) = self.addr_index.into_inner() {
            a.free_with(resched)?;
        }
        if let Some(s) = self.stem_index.into_inner() {
            s.free_with(resched)?;
        }
        Ok(())
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when the table holds no symbol.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// True when every address is zero: the source hid them (kptr_restrict). Name queries
    /// still work; address queries cannot.
    pub fn addresses_hidden(&self) -> bool {
        self.addresses_hidden
    }

    /// Hex digits of an address in `dump` output.
    pub fn addr_width(&self) -> u8 {
        self.addr_width
    }

    /// All objects, vmlinux first, then in the order the source listed them.
    pub fn objects(&self) -> &[ObjectInfo] {
        &self.objects
    }

    /// The object named `name` (already normalized), if the table has it.
    pub fn object_by_name(&self, name: &str) -> Option<ObjectId> {
        self.objects
            .iter()
            .position(|o| o.name == name)
            .map(|i| ObjectId(i as u32))
    }

    /// The object's description.
    pub fn object_info(&self, id: ObjectId) -> &ObjectInfo {
        &self.objects[id.0 as usize]
    }

    /// Where `object`'s symbols lie when they are one run in kernel order (as a kernel's
    /// table lists each object): found in one pass over the records, made once, that reads
    /// no name. `None` when they are not one run.
    pub fn object_range(&self, object: ObjectId) -> Option<std::ops::Range<u32>> {
        let span = *self.spans().get(object.0 as usize)?;
        let count = self.objects.get(object.0 as usize)?.symbol_count;
        if count == 0 {
            return Some(0..0);
        }
        (span.end.checked_sub(span.start) == Some(count)).then_some(span.start..span.end)
    }

    /// The symbol at `id`.
    #[inline(always)]
    pub fn symbol(&self, id: SymbolId) -> Symbol<'_> {
        let r = &self.syms[id.0 as usize];
        Symbol {
            id,
            addr: r.addr,
            kind: r.kind as char,
            name: self.name_of(r),
            object: ObjectId(r.object),
        }
    }

    #[inline]
    pub(crate) fn name_of(&self, r: &SymRec) -> &str {
        self.name_at(r.name_off, r.name_len)
    }

    #[inline]
    pub(crate) fn name_at(&self, off: u32, len: u32) -> &str {
        // Offsets fall on name boundaries of a UTF-8 arena; `get` keeps a parser bug from
        // turning into a panic.
        self.names
            .get(off as usize..(off + len) as usize)
            .unwrap_or("<invalid name>")
    }

    /// The name of an address-index record, read without touching its bytes when the
    /// index checked its range.
    #[inline]
    pub(crate) fn floor_name(&self, f: &crate::addr_index::FloorRec) -> &str {
        let range = f.name_off as usize..(f.name_off + f.name_len) as usize;
        let name = if f.name_checked {
            self.names.get_checked(range)
        } else {
            self.names.get(range)
        };
        name.unwrap_or("<invalid name>")
    }

    #[inline]
    /// The name of `id` as bytes, read without a UTF-8 check (a walk over every name that
    /// only compares them).
    pub fn raw_name(&self, id: SymbolId) -> &[u8] {
        self.name_bytes(id.0)
    }

    #[inline]
    pub(crate) fn name_bytes(&self, i: u32) -> &[u8] {
        self.columns().name_bytes(i)
    }

    /// The table's columns, as its indexes see them.
    #[inline]
    pub(crate) fn columns(&self) -> crate::columns::Columns<'_> {
        crate::columns::Columns {
            syms: &self.syms,
            names: &self.names,
            objects: &self.objects,
            source_sizes: self.source_sizes.as_deref(),
        }
    }

    /// All symbols in kernel order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Symbol<'_>> + '_ {
        (0..self.syms.len() as u32).map(move |i| self.symbol(SymbolId(i)))
    }

    /// The first symbol (kernel order) whose name starts with `prefix`, compared as bytes:
    /// no name is decoded, so this walks a table read in place without checking each name's
    /// UTF-8 (the answer's own name is checked). A tick per symbol.
    pub fn first_with_prefix(
        &self,
        prefix: &str,
        resched: &mut Resched,
    ) -> Result<Option<Symbol<'_>>, Cancelled> {
        for i in 0..self.syms.len() as u32 {
            resched.tick()?;
            if self.name_bytes(i).starts_with(prefix.as_bytes()) {
                return Ok(Some(self.symbol(SymbolId(i))));
            }
        }
        Ok(None)
    }

    /// The size a source recorded for `id` (ELF `st_size`), or [`SIZE_UNKNOWN`].
    pub fn source_size(&self, id: SymbolId) -> u64 {
        self.source_sizes
            .as_ref()
            .map_or(SIZE_UNKNOWN, |s| s[id.0 as usize])
    }

    /// The size of `id`: the distance to the next higher address in its object, else what the
    /// source knows, else [`SIZE_UNKNOWN`].
    pub fn size(&self, id: SymbolId) -> u64 {
        let inferred = if self.walks() && self.addr_index.get().is_none() {
            self.size_by_walk(id)
        } else {
            self.addr_index().size(id.0)
        };
        if inferred != SIZE_UNKNOWN {
            inferred
        } else {
            self.source_size(id)
        }
    }

    /// The source file of symbol `id` (its translation unit's STT_FILE name, `inode.c`), when
    /// the source said (a vmlinux or module with FILE entries; local symbols only).
    pub fn file(&self, id: SymbolId) -> Option<&str> {
        let (files, names) = self.source_files.as_ref()?;
        let i = *files.get(id.0 as usize)?;
        names.get(i as usize).map(String::as_str)
    }

    /// Gives the symbols source files from elsewhere (a debug build of the same kernel):
    /// `file_of(id)` for every symbol, in order. Replaces what the table knew.
    pub fn attach_files<'f>(
        &mut self,
        mut file_of: impl FnMut(SymbolId) -> Option<&'f str>,
        resched: &mut Resched,
    ) -> Result<(), Cancelled> {
        let mut files = Vec::with_capacity(self.syms.len());
        let mut names: Vec<String> = Vec::new();
        let mut ids: FxHashMap<&'f str, u32> = FxHashMap::default();
        for i in 0..self.syms.len() as u32 {
            resched.tick()?;
            files.push(match file_of(SymbolId(i)) {
                None => u32::MAX,
                Some(f) => *ids.entry(f).or_insert_with(|| {
                    names.push(f.to_string());
                    names.len() as u32 - 1
                }),
            });
        }
        self.source_files = Some((files, names));
        Ok(())
    }

    /// True when the table knows source files (see [`SymbolTable::file`]).
    pub fn has_files(&self) -> bool {
        self.source_files.is_some()
    }

    /// The name index, built now with the table's driver when missing; `None` when that
    /// build was cancelled (a query then walks the table instead).
    #[inline]
    pub(crate) fn lazy_name_index(&self) -> Option<&NameIndex> {
        match self.name_index.get() {
            Some(i) => Some(i),
            None => self.build_lazy_name_index(),
        }
    }

    /// The first lookup's index build, out of the lookup's hot path.
    #[cold]
    #[inline(never)]
    fn build_lazy_name_index(&self) -> Option<&NameIndex> {
        let idx = self
            .with_driver(|rs| NameIndex::build(self.columns(), rs))
            .ok()?;
        Some(self.name_index.get_or_init(|| idx))
    }

    pub(crate) fn name_index(&self) -> &NameIndex {
        match self.lazy_name_index() {
            Some(i) => i,
            // Cancelled: the answer is still owed (a count of names), so built without points.
            None => self.name_index.get_or_init(|| {
                NameIndex::build(self.columns(), &mut Resched::none())
                    .expect("no cancellation without a flag")
            }),
        }
    }

    pub(crate) fn addr_index(&self) -> &AddrIndex {
        if let Some(i) = self.addr_index.get() {
            return i;
        }
        let built = self
            .with_driver(|rs| AddrIndex::build(self.columns(), rs))
            .unwrap_or_else(|Cancelled| {
                // An address query owes its answer: cancelled, the index is built without
                // points (the caller's next point reports the cancellation).
                AddrIndex::build(self.columns(), &mut Resched::none())
                    .expect("no cancellation without a flag")
            });
        self.addr_index.get_or_init(|| built)
    }

    /// Builds both indexes now, reaching reschedule points through `resched`. Queries build
    /// them on first use otherwise.
    ///
    /// When both are missing they are built at once, the address index on a helper thread
    /// (its points do what `resched.sibling()` does), which halves the wait on two cores;
    /// where no thread can be started, one after the other here.
    pub fn build_indexes(&self, resched: &mut Resched) -> Result<(), Cancelled> {
        let names = |rs: &mut Resched| self.build_name_index(rs);
        if self.addr_index.get().is_some() {
            return names(resched);
        }
        let addrs = |rs: &mut Resched| -> Result<(), Cancelled> {
            let idx = AddrIndex::build(self.columns(), rs)?;
            let _ = self.addr_index.set(idx);
            Ok(())
        };
        let mut helper_rs = resched.sibling();
        // What came before is not the spawn's: the spawn is a stretch of its own.
        resched.tick_step()?;
        std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("klpsym-index".into())
                .spawn_scoped(scope, move || {
                    // The thread's start is a stretch of its own, apart from the build's.
                    helper_rs.tick_step()?;
                    addrs(&mut helper_rs)
                });
            match helper {
                Ok(h) => {
                    // Starting a thread is tens of microseconds of this thread's time (its
                    // stack is mapped): a point of its own before the build's first step.
                    let here = resched.tick_step().and_then(|()| names(resched));
                    // A panic in the helper is a bug in the index build: passed on as one.
                    let there = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                    here.and(there)
                }
                Err(_) => names(resched).and_then(|()| addrs(resched)),
            }
        })
    }

    /// Builds the name index alone now, reaching reschedule points through `resched`: for a
    /// caller that asks names only (checking a patch), which never needs the address index.
    pub fn build_name_index(&self, resched: &mut Resched) -> Result<(), Cancelled> {
        if self.name_index.get().is_none() {
            let idx = NameIndex::build(self.columns(), resched)?;
            let _ = self.name_index.set(idx);
        }
        Ok(())
    }

    /// Whether the name index is built (a name query is then one hash lookup; otherwise it
    /// builds the index, or walks the table when set to walk).
    pub fn name_indexed(&self) -> bool {
        self.name_index.get().is_some()
    }

    /// Builds the stem index now (see [`SymbolTable::variants_of`]), reaching reschedule
    /// points through `resched`; it is built on first use otherwise.
    pub fn build_stem_index(&self, resched: &mut Resched) -> Result<(), Cancelled> {
        if self.stem_index.get().is_none() {
            let idx = StemIndex::build(self.columns(), resched)?;
            let _ = self.stem_index.set(idx);
        }
        Ok(())
    }

    /// Compiler-made variants of `name` (`name.isra.0`, `name.constprop.0`, `name.part.0`,
    /// `name.cold`, `name.llvm.N`...): every symbol whose name is `name` followed by a dot and
    /// more, in kernel order, across all objects. One hash lookup (the stem index), or a walk
    /// for a table set to walk ([`SymbolTable::scan_until_indexed`]).
    pub fn variants_of<'t>(&'t self, name: &'t str) -> impl Iterator<Item = Symbol<'t>> + 't {
        let walk = self.walks() && self.stem_index.get().is_none();
        let indexed = (!walk).then(|| {
            if self.stem_index.get().is_none() {
                let built = self
                    .with_driver(|rs| StemIndex::build(self.columns(), rs))
                    .unwrap_or_else(|Cancelled| {
                        StemIndex::build(self.columns(), &mut Resched::none())
                            .expect("no cancellation without a flag")
                    });
                let _ = self.stem_index.set(built);
            }
            self.stem_index
                .get()
                .expect("set just above")
                .variants(self.columns(), name)
        });
        let walked = walk.then(|| {
            self.walk(0..self.syms.len() as u32, move |i| {
                crate::stem_index::is_variant(self.name_bytes(i), name)
            })
        });
        indexed
            .into_iter()
            .flatten()
            .chain(walked.into_iter().flatten())
            .map(move |i| self.symbol(SymbolId(i)))
    }

    /// [`variants_of`](Self::variants_of) for a caller asking about a few names, with
    /// reschedule points through `resched`: while the stem index is not built, the first
    /// [`STEM_WALKS`] questions on this table walk it (about a millisecond each for 100,000
    /// symbols, where building the index costs several), and the next one builds the index
    /// and uses it from then on. The same symbols, in the same order, either way.
    pub fn variants_of_with(
        &self,
        name: &str,
        resched: &mut Resched,
    ) -> Result<Vec<SymbolId>, Cancelled> {
        use std::sync::atomic::Ordering;
        if self.stem_index.get().is_none()
            && self.stem_walks.fetch_add(1, Ordering::Relaxed) < STEM_WALKS
        {
            // The arena and the records looked up once, not per symbol.
            let (names, recs) = (self.names.bytes(), &self.syms[..]);
            let mut out = Vec::new();
            for (i, r) in recs.iter().enumerate() {
                resched.tick()?;
                let at = r.name_off as usize;
                let candidate = names.get(at..at + r.name_len as usize).unwrap_or_default();
                if crate::stem_index::is_variant(candidate, name) {
                    out.push(SymbolId(i as u32));
                }
            }
            return Ok(out);
        }
        self.build_stem_index(resched)?;
        Ok(self.variants_of(name).map(|s| s.id).collect())
    }

    /// Number of distinct names (builds the name index).
    pub fn distinct_names(&self) -> usize {
        self.name_index().distinct()
    }

    /// The indices of every symbol named `name`, in kernel order, across all objects: one
    /// probe of the name index, or a walk of the table while it is set to walk and has no
    /// index.
    #[inline]
    pub(crate) fn ids_by_name<'t>(&'t self, name: &str) -> NameMatches<'t> {
        let index = if self.walks() {
            self.name_index.get()
        } else {
            self.lazy_name_index()
        };
        match index {
            Some(idx) => NameMatches::Indexed(idx.matches(self.columns(), name.as_bytes())),
            None => {
                let wanted: Box<[u8]> = name.as_bytes().into();
                NameMatches::Walk(Box::new(self.walk(0..self.syms.len() as u32, move |i| {
                    self.name_bytes(i) == &wanted[..]
                })))
            }
        }
    }

    /// Every symbol named `name`, in kernel order, across all objects.
    #[inline]
    pub fn by_name<'t>(&'t self, name: &str) -> impl Iterator<Item = Symbol<'t>> + 't {
        self.ids_by_name(name)
            .map(move |i| self.symbol(SymbolId(i)))
    }

    /// Every symbol named `name` in `object`, in the object's kernel order: the order that
    /// defines livepatch positions (sympos). The object is compared on the record, before
    /// the symbol's name is read. (Placing a match by its index in the object's run instead,
    /// which reads fewer records, measured slower: its branches mispredict.)
    #[inline]
    pub fn by_name_in<'t>(
        &'t self,
        name: &str,
        object: ObjectId,
    ) -> impl Iterator<Item = Symbol<'t>> + 't {
        self.ids_by_name_in(name, object)
            .map(move |i| self.symbol(SymbolId(i)))
    }

    /// The indices of [`SymbolTable::by_name_in`].
    #[inline]
    pub(crate) fn ids_by_name_in<'t>(
        &'t self,
        name: &str,
        object: ObjectId,
    ) -> impl Iterator<Item = u32> + 't {
        let recs = &self.syms[..];
        self.ids_by_name(name)
            .filter(move |&i| recs[i as usize].object == object.0)
    }

    /// The records, in kernel order (one slice for a loop, not a deref per record).
    #[inline]
    pub(crate) fn records(&self) -> &[SymRec] {
        &self.syms
    }
}

/// The symbols of one name: a chain of the name index, or a walk.
pub(crate) enum NameMatches<'t> {
    /// One probe found the chain.
    Indexed(crate::name_index::Chain<'t>),
    /// A table set to walk, without its index.
    Walk(Box<dyn Iterator<Item = u32> + 't>),
}

impl Iterator for NameMatches<'_> {
    type Item = u32;
    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            NameMatches::Indexed(c) => c.next(),
            NameMatches::Walk(w) => w.next(),
        }
    }
}

/// True when a symbol's source file `file` (an STT_FILE name: a basename such as `inode.c`,
/// or a path) is the file a user named: equal, or one ends with the other right after a `/`
/// (`fs/inode.c` names `inode.c`; `inode.c` names `fs/inode.c`).
pub fn file_matches(file: &str, wanted: &str) -> bool {
    let suffix = |long: &str, short: &str| {
        long == short
            || long
                .strip_suffix(short)
                .is_some_and(|head| head.ends_with('/'))
    };
    !wanted.is_empty() && (suffix(wanted, file) || suffix(file, wanted))
}

/// How a symbol's source file answers a file a user named (`--file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMatch {
    /// The file is the one named: equal, or its path ends with the name right after a `/`
    /// (`fs/inode.c` for `inode.c` or `fs/inode.c`).
    Exact,
    /// Only the base names agree: the table knows the file by its base name alone (an ELF FILE
    /// symbol: `sysfs.c`) and the user named a path (`drivers/cpuidle/sysfs.c`). Every
    /// `sysfs.c` of the tree looks the same here, so the path cannot be confirmed.
    BaseName,
    /// Another file.
    No,
}

/// How `file` (a symbol's source file: a DWARF path or an ELF FILE base name) answers
/// `wanted` (what the user named: a path, a path suffix or a base name).
pub fn file_match(file: &str, wanted: &str) -> FileMatch {
    let ends_at_slash = |long: &str, short: &str| {
        long.strip_suffix(short)
            .is_some_and(|head| head.is_empty() || head.ends_with('/'))
    };
    if wanted.is_empty() || file.is_empty() {
        FileMatch::No
    } else if ends_at_slash(file, wanted) {
        FileMatch::Exact
    } else if !file.contains('/') && ends_at_slash(wanted, file) {
        FileMatch::BaseName
    } else {
        FileMatch::No
    }
}

#[cfg(test)]
mod tests;
