//! The symbol table: objects and their symbols in kernel order, with lazily built indexes.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::addr_index::AddrIndex;
use crate::name_index::NameIndex;
use crate::object::{ObjectId, ObjectInfo, ObjectKind};
use crate::resched::{Cancelled, Resched};
use crate::stem_index::StemIndex;
use crate::storage::{Names, Records, SymRec};

pub use crate::columns::SIZE_UNKNOWN;

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
    start: u32,
    end: u32,
    sorted: bool,
}

/// Per symbol an index into the file names (`u32::MAX`: none), the names, and their indices.
type FileBuilder = (Vec<u32>, Vec<String>, FxHashMap<String, u32>);

/// Builds a [`SymbolTable`] symbol by symbol, in kernel order.
#[derive(Debug)]
pub struct SymbolTableBuilder {
    names: Vec<u8>,
    syms: Vec<SymRec>,
    objects: Vec<ObjectInfo>,
    object_ids: FxHashMap<String, u32>,
    last_object: u32,
    source_sizes: Option<Vec<u64>>,
    source_files: Option<FileBuilder>,
    addr_width: u8,
    any_nonzero: bool,
}

impl Default for SymbolTableBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SymbolTableBuilder {
    /// An empty builder; vmlinux is object 0.
    pub fn new() -> Self {
        SymbolTableBuilder {
            names: Vec::new(),
            syms: Vec::new(),
            objects: vec![ObjectInfo {
                name: "vmlinux".to_string(),
                kind: ObjectKind::Vmlinux,
                symbol_count: 0,
                unplaced: false,
            }],
            object_ids: FxHashMap::default(),
            last_object: 0,
            source_sizes: None,
            source_files: None,
            addr_width: 16,
            any_nonzero: false,
        }
    }

    /// Pre-sizes the builder for `symbols` symbols with `name_bytes` bytes of names in total.
    pub fn with_capacity(symbols: usize, name_bytes: usize) -> Self {
        let mut b = Self::new();
        b.syms.reserve(symbols);
        b.names.reserve(name_bytes);
        b
    }

    /// Takes an existing byte buffer as the name arena: names already in it can be added with
    /// [`push_arena_name`](Self::push_arena_name) without copying (the text parsers hand over
    /// the file they read).
    pub fn with_name_arena(arena: Vec<u8>, symbols: usize) -> Self {
        let mut b = Self::new();
        b.names = arena;
        b.syms.reserve(symbols);
        b
    }

    /// Number of hex digits addresses print with in `dump` (16 on 64-bit kernels).
    pub fn set_addr_width(&mut self, digits: u8) {
        self.addr_width = digits.clamp(1, 16);
    }

    /// The object id for `name` (a module or pseudo-object name; `vmlinux` is 0), created with
    /// `kind` on first use.
    pub fn object(&mut self, name: &str, kind: ObjectKind) -> ObjectId {
        if name == "vmlinux" && kind == ObjectKind::Vmlinux {
            return ObjectId::VMLINUX;
        }
        let last = &self.objects[self.last_object as usize];
        if last.name == name && self.last_object != 0 {
            return ObjectId(self.last_object);
        }
        let id = match self.object_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = self.objects.len() as u32;
                self.objects.push(ObjectInfo {
                    name: name.to_string(),
                    kind,
                    symbol_count: 0,
                    unplaced: false,
                });
                self.object_ids.insert(name.to_string(), id);
                id
            }
        };
        self.last_object = id;
        ObjectId(id)
    }

    /// Marks an object as unplaced (see [`ObjectInfo::unplaced`]).
    pub fn set_unplaced(&mut self, object: ObjectId, unplaced: bool) {
        self.objects[object.0 as usize].unplaced = unplaced;
    }

    /// Adds a symbol whose name is copied into the arena.
    pub fn push(
        &mut self,
        object: ObjectId,
        addr: u64,
        kind: u8,
        name: &str,
    ) -> Result<SymbolId, BuildError> {
        let off = self.names.len();
        self.names.extend_from_slice(name.as_bytes());
        self.push_arena_name(object, addr, kind, off, name.len())
    }

    /// Adds a symbol whose name is already at `name_off..name_off+name_len` of the arena.
    ///
    /// The caller guarantees those bytes are valid UTF-8 (the text parsers check it).
    pub fn push_arena_name(
        &mut self,
        object: ObjectId,
        addr: u64,
        kind: u8,
        name_off: usize,
        name_len: usize,
    ) -> Result<SymbolId, BuildError> {
        let id =
            u32::try_from(self.syms.len()).map_err(|_| BuildError::TooLarge("over 4G symbols"))?;
        let name_off =
            u32::try_from(name_off).map_err(|_| BuildError::TooLarge("over 4 GiB of names"))?;
        let name_len =
            u32::try_from(name_len).map_err(|_| BuildError::TooLarge("name over 4 GiB"))?;
        debug_assert!(std::str::from_utf8(
            &self.names[name_off as usize..(name_off + name_len) as usize]
        )
        .is_ok());
        self.any_nonzero |= addr != 0;
        self.objects[object.0 as usize].symbol_count += 1;
        self.syms.push(SymRec {
            addr,
            name_off,
            name_len,
            object: object.0,
            kind,
            pad: [0; 3],
        });
        if let Some(sizes) = &mut self.source_sizes {
            sizes.push(SIZE_UNKNOWN);
        }
        if let Some((files, _, _)) = &mut self.source_files {
            files.push(u32::MAX);
        }
        Ok(SymbolId(id))
    }

    /// Records the source file (a vmlinux's or module's STT_FILE) of the most recent symbol.
    pub fn set_last_file(&mut self, file: &str) {
        let n = self.syms.len();
        if n == 0 {
            return;
        }
        let (files, names, ids) = self
            .source_files
            .get_or_insert_with(|| (vec![u32::MAX; n], Vec::new(), FxHashMap::default()));
        let id = match ids.get(file) {
            Some(&id) => id,
            None => {
                let id = names.len() as u32;
                names.push(file.to_string());
                ids.insert(file.to_string(), id);
                id
            }
        };
        files[n - 1] = id;
    }

    /// Records a size the source knows (an ELF `st_size`) for the most recent symbol.
    pub fn set_last_size(&mut self, size: u64) {
        let n = self.syms.len();
        if n == 0 {
            return;
        }
        let sizes = self
            .source_sizes
            .get_or_insert_with(|| vec![SIZE_UNKNOWN; n]);
        sizes[n - 1] = size;
    }

    /// Appends `bytes` to the name arena, for names pushed by offset afterwards
    /// ([`push_arena_name`](Self::push_arena_name)): a text read as it arrives.
    pub fn extend_arena(&mut self, bytes: &[u8]) {
        self.names.extend_from_slice(bytes);
    }

    /// Number of symbols so far.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The name arena (the buffer handed to [`with_name_arena`](Self::with_name_arena) plus
    /// names copied since).
    pub fn arena(&self) -> &[u8] {
        &self.names
    }

    /// True when no symbol was added.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Finishes the table. Addresses count as hidden when the table has symbols and every one
    /// of them is zero (what /proc/kallsyms prints under kptr_restrict).
    pub fn build(self) -> SymbolTable {
        match self.build_with(&mut Resched::none()) {
            Ok(t) => t,
            Err(Cancelled) => unreachable!("a driver without a cancel flag never cancels"),
        }
    }

    /// [`build`](Self::build) with reschedule points: the name arena (a whole file for text
    /// sources) is checked for UTF-8 in steps.
    pub fn build_with(self, resched: &mut Resched) -> Result<SymbolTable, Cancelled> {
        // Hidden: there are absolute addresses and every one is zero. Skipped when a nonzero
        // address was seen (the common case), so this costs nothing on real tables.
        let hidden = !self.any_nonzero && !self.syms.is_empty()
            || self.any_nonzero && {
                let mut absolute = self
                    .syms
                    .iter()
                    .filter(|r| !self.objects[r.object as usize].unplaced);
                absolute.clone().next().is_some() && absolute.all(|r| r.addr == 0)
            };
        let (names, syms) = into_utf8_arena(self.names, self.syms, resched)?;
        let source_files = match self.source_files {
            Some((f, n, seen)) => {
                // A -dbg vmlinux names thousands of files: the lookup map built on the way
                // is given back in steps.
                crate::bulk::free_each_with_points(seen.into_iter(), resched)?;
                Some((f, n))
            }
            None => None,
        };
        Ok(SymbolTable {
            names: Names::Owned(names),
            syms: Records::Owned(syms),
            objects: self.objects,
            source_sizes: self.source_sizes,
            source_files,
            addr_width: self.addr_width,
            addresses_hidden: hidden,
            name_index: OnceLock::new(),
            addr_index: OnceLock::new(),
            stem_index: OnceLock::new(),
            walks: false,
            driver: std::sync::Mutex::new(Some(resched.sibling())),
            spans: OnceLock::new(),
            stem_walks: Default::default(),
        })
    }
}

/// `arena` as a `String` when every byte of it is UTF-8 (checked once, in steps), else `None`:
/// for decoders that refuse other bytes rather than replace them.
pub(crate) fn utf8_exact(
    arena: Vec<u8>,
    resched: &mut Resched,
) -> Result<Option<String>, Cancelled> {
    if crate::bulk::validate_utf8(&arena, resched)?.is_err() {
        return Ok(None);
    }
    // SAFETY: `validate_utf8` checked every byte of `arena` with `std::str::from_utf8` (in
    // steps that never split a character).
    #[allow(unsafe_code)]
    let names = unsafe { String::from_utf8_unchecked(arena) };
    Ok(Some(names))
}

/// Validates the arena once. Parsers only hand in UTF-8 names, but an arena handed over whole
/// (a file buffer) may hold other bytes between names: then the names are copied out, lossily.
fn into_utf8_arena(
    arena: Vec<u8>,
    mut syms: Vec<SymRec>,
    resched: &mut Resched,
) -> Result<(String, Vec<SymRec>), Cancelled> {
    if crate::bulk::validate_utf8(&arena, resched)?.is_ok() {
        debug_assert!(std::str::from_utf8(&arena).is_ok());
        // SAFETY: `validate_utf8` checked every byte of `arena` with `std::str::from_utf8`
        // (in steps that never split a character), which is what `String::from_utf8` would
        // do in one unbounded stretch.
        #[allow(unsafe_code)]
        let names = unsafe { String::from_utf8_unchecked(arena) };
        return Ok((names, syms));
    }
    let mut names = String::with_capacity(arena.len());
    for r in &mut syms {
        resched.tick()?;
        let name = String::from_utf8_lossy(
            &arena[r.name_off as usize..(r.name_off + r.name_len) as usize],
        );
        r.name_off = names.len() as u32;
        r.name_len = name.len() as u32;
        names.push_str(&name);
    }
    Ok((names, syms))
}

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

    fn walks(&self) -> bool {
        self.walks
    }

    /// The symbols of `range` (kernel order) for which `keep` holds, reaching the walk
    /// driver's reschedule points.
    fn walk<'t>(
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
    fn spans(&self) -> &[Span] {
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
    fn size_by_walk(&self, id: SymbolId) -> u64 {
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
    fn with_driver<T>(&self, build: impl FnOnce(&mut Resched) -> T) -> T {
        let mut d = WalkDriver::take(&self.driver);
        match d.driver.as_mut() {
            Some(rs) => build(rs),
            None => build(&mut Resched::none()),
        }
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
mod tests {
    use super::*;

    fn sample() -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        let v = ObjectId::VMLINUX;
        b.push(v, 0x1000, b'T', "_text").unwrap();
        b.push(v, 0x1000, b'T', "start").unwrap();
        b.push(v, 0x1010, b't', "dup").unwrap();
        b.push(v, 0x1040, b't', "dup").unwrap();
        let m = b.object("mod_a", ObjectKind::Module);
        b.push(m, 0x9000, b't', "dup").unwrap();
        b.push(m, 0x8000, b'T', "exported").unwrap();
        b.build()
    }

    #[test]
    fn objects_and_order() {
        let t = sample();
        assert_eq!(t.objects().len(), 2);
        assert_eq!(t.object_info(ObjectId(1)).name, "mod_a");
        assert_eq!(t.object_info(ObjectId(1)).symbol_count, 2);
        assert_eq!(t.object_info(ObjectId::VMLINUX).symbol_count, 4);
        let dups: Vec<_> = t.by_name("dup").map(|s| s.addr).collect();
        assert_eq!(dups, vec![0x1010, 0x1040, 0x9000]);
        let in_mod: Vec<_> = t.by_name_in("dup", ObjectId(1)).map(|s| s.addr).collect();
        assert_eq!(in_mod, vec![0x9000]);
        assert!(!t.addresses_hidden());
    }

    #[test]
    fn variants_asked_a_few_at_a_time_walk_then_index_alike() {
        let make = || {
            let mut b = SymbolTableBuilder::new();
            let v = ObjectId::VMLINUX;
            for (i, n) in [
                "f.isra.0",
                "f",
                "g.cold",
                "f.part.1",
                "fx.isra.0",
                "f.",
                ".f",
            ]
            .iter()
            .enumerate()
            {
                b.push(v, 0x1000 + i as u64, b't', n).unwrap();
            }
            let m = b.object("m", ObjectKind::Module);
            b.push(m, 0x9000, b't', "f.cold").unwrap();
            b.build()
        };
        // The stem index's answers, on a table of its own.
        let reference = make();
        reference.build_stem_index(&mut Resched::none()).unwrap();
        let t = make();
        let mut walked_rounds = 0;
        for round in 0..STEM_WALKS + 3 {
            let before = t.stem_index.get().is_none();
            let got = t.variants_of_with("f", &mut Resched::none()).unwrap();
            let want: Vec<SymbolId> = reference.variants_of("f").map(|s| s.id).collect();
            assert_eq!(got, want, "round {round}");
            assert_eq!(
                want.len(),
                4,
                "f.isra.0, f.part.1, f. and the module's f.cold"
            );
            walked_rounds += usize::from(before && t.stem_index.get().is_none());
            for name in ["g", "fx", "", "f.isra", "nope"] {
                let want: Vec<SymbolId> = reference.variants_of(name).map(|s| s.id).collect();
                let got = t.variants_of_with(name, &mut Resched::none()).unwrap();
                assert_eq!(got, want, "round {round}, {name:?}");
            }
        }
        assert_eq!(
            walked_rounds, 2,
            "{STEM_WALKS} walks (6 names a round), then the index"
        );
        assert!(t.stem_index.get().is_some());
    }

    #[test]
    fn sizes_follow_the_next_address_of_the_same_object() {
        let t = sample();
        // _text and start are aliases at 0x1000: both end at 0x1010.
        assert_eq!(t.size(SymbolId(0)), 0x10);
        assert_eq!(t.size(SymbolId(1)), 0x10);
        assert_eq!(t.size(SymbolId(2)), 0x30);
        // last of vmlinux: unknown
        assert_eq!(t.size(SymbolId(3)), SIZE_UNKNOWN);
        // module symbols in symtab order, not address order: exported (0x8000) ends at dup (0x9000)
        assert_eq!(t.size(SymbolId(5)), 0x1000);
        assert_eq!(t.size(SymbolId(4)), SIZE_UNKNOWN);
    }

    #[test]
    fn source_files_are_kept_per_symbol() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x10, b't', "a").unwrap();
        b.push(ObjectId::VMLINUX, 0x20, b't', "b").unwrap();
        b.set_last_file("fs/inode.c");
        b.push(ObjectId::VMLINUX, 0x30, b't', "c").unwrap();
        b.set_last_file("fs/inode.c");
        let t = b.build();
        assert!(t.has_files());
        assert_eq!(t.file(SymbolId(0)), None);
        assert_eq!(t.file(SymbolId(1)), Some("fs/inode.c"));
        assert_eq!(t.file(SymbolId(2)), Some("fs/inode.c"));
        assert!(!SymbolTableBuilder::new().build().has_files());
    }

    #[test]
    fn source_size_fills_in_for_the_last_symbol() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0x10, b'T', "a").unwrap();
        b.push(ObjectId::VMLINUX, 0x20, b'T', "b").unwrap();
        b.set_last_size(8);
        let t = b.build();
        assert_eq!(t.size(SymbolId(0)), 0x10);
        assert_eq!(t.size(SymbolId(1)), 8);
    }

    #[test]
    fn a_non_utf8_arena_keeps_its_names() {
        let mut arena = b"\xff\xfeabc".to_vec();
        arena.extend_from_slice(b"def");
        let mut b = SymbolTableBuilder::with_name_arena(arena, 2);
        b.push_arena_name(ObjectId::VMLINUX, 1, b'T', 2, 3).unwrap();
        b.push_arena_name(ObjectId::VMLINUX, 2, b'T', 5, 3).unwrap();
        let t = b.build();
        assert_eq!(t.iter().map(|s| s.name).collect::<Vec<_>>(), ["abc", "def"]);
    }

    #[test]
    fn all_zero_addresses_are_hidden() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0, b'T', "a").unwrap();
        b.push(ObjectId::VMLINUX, 0, b'T', "b").unwrap();
        assert!(b.build().addresses_hidden());
        assert!(!SymbolTableBuilder::new().build().addresses_hidden());
    }

    #[test]
    fn free_with_reaches_points_and_can_be_cancelled() {
        let indexed = || {
            let mut b = SymbolTableBuilder::new();
            for i in 0..50_000u64 {
                b.push(ObjectId::VMLINUX, 0x1000 + i * 16, b't', &format!("f{i}"))
                    .unwrap();
            }
            let t = b.build();
            t.build_indexes(&mut Resched::none()).unwrap();
            t
        };
        let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
        indexed().free_with(&mut r).unwrap();
        assert!(r.stats().items >= 8, "{:?}", r.stats());
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(std::time::Duration::ZERO)
            .with_cancel_flag(flag);
        assert_eq!(indexed().free_with(&mut r), Err(Cancelled));
    }

    mod walks {
        use super::*;
        use proptest::prelude::*;

        /// Symbols over three objects (one of section offsets), few names so names repeat,
        /// addresses in any order (some objects unsorted) with aliases.
        fn tables() -> impl Strategy<Value = Vec<(u8, u16, u8, u8)>> {
            prop::collection::vec((0u8..3, 0u16..64, 0u8..12, 0u8..3), 1..80)
        }

        fn build(spec: &[(u8, u16, u8, u8)]) -> SymbolTable {
            let mut b = SymbolTableBuilder::new();
            let m = b.object("mod_a", ObjectKind::Module);
            let r = b.object("mod_r", ObjectKind::Module);
            b.set_unplaced(r, true);
            for &(o, addr, name, dotted) in spec {
                let obj = [ObjectId::VMLINUX, m, r][o as usize];
                let name = match dotted {
                    1 => format!("f{}.isra.0", name % 4),
                    2 => format!(".Lf{}.1", name % 4),
                    _ => format!("f{name}"),
                };
                b.push(obj, 0x1000 + u64::from(addr) * 16, b't', &name)
                    .unwrap();
            }
            b.build()
        }

        proptest! {
            #[test]
            fn walks_answer_as_the_indexes_do(spec in tables()) {
                let indexed = build(&spec);
                let mut walked = build(&spec);
                walked.scan_until_indexed(Resched::none());
                let odd = ["", ".", ".Lf1", "f1.isra", "f1.isra.0", "f1."].map(String::from);
                for name in (0..13u8).map(|n| format!("f{n}")).chain(odd) {
                    let a: Vec<_> = indexed.by_name(&name).map(|s| s.id).collect();
                    let b: Vec<_> = walked.by_name(&name).map(|s| s.id).collect();
                    prop_assert_eq!(&a, &b);
                    for o in 0..3u32 {
                        let a: Vec<_> = indexed.by_name_in(&name, ObjectId(o)).map(|s| s.id).collect();
                        let b: Vec<_> = walked.by_name_in(&name, ObjectId(o)).map(|s| s.id).collect();
                        prop_assert_eq!(a, b);
                    }
                    let a: Vec<_> = indexed.variants_of(&name).map(|s| s.id).collect();
                    let b: Vec<_> = walked.variants_of(&name).map(|s| s.id).collect();
                    prop_assert_eq!(a, b);
                }
                for s in indexed.iter() {
                    prop_assert_eq!(indexed.size(s.id), walked.size(s.id), "size of {:?}", s.id);
                }
                // Nothing was built for the walks; building ends them with the same answers.
                prop_assert!(walked.name_index.get().is_none() && walked.addr_index.get().is_none());
                prop_assert!(walked.driver.lock().unwrap().as_ref().unwrap().stats().items > 0);
                walked.build_indexes(&mut Resched::none()).unwrap();
                for s in indexed.iter() {
                    prop_assert_eq!(indexed.size(s.id), walked.size(s.id));
                }
            }
        }
    }

    /// Regression: `--file drivers/cpuidle/sysfs.c` on a table that knows only ELF FILE base
    /// names matched `sysfs.c` as if the path were known, and so did a path that does not exist.
    #[test]
    fn a_path_against_a_base_name_is_only_a_base_name_match() {
        assert_eq!(file_match("fs/inode.c", "inode.c"), FileMatch::Exact);
        assert_eq!(file_match("fs/inode.c", "fs/inode.c"), FileMatch::Exact);
        assert_eq!(file_match("inode.c", "inode.c"), FileMatch::Exact);
        assert_eq!(file_match("fs/inode.c", "proc/inode.c"), FileMatch::No);
        assert_eq!(file_match("fs/xinode.c", "inode.c"), FileMatch::No);
        assert_eq!(
            file_match("sysfs.c", "drivers/cpuidle/sysfs.c"),
            FileMatch::BaseName
        );
        assert_eq!(
            file_match("sysfs.c", "no/such/dir/sysfs.c"),
            FileMatch::BaseName
        );
        assert_eq!(
            file_match("drivers/acpi/sysfs.c", "drivers/cpuidle/sysfs.c"),
            FileMatch::No
        );
        assert_eq!(file_match("sysfs.c", "xsysfs.c"), FileMatch::No);
        assert_eq!(file_match("inode.c", ""), FileMatch::No);
    }
}
