//! Building a table symbol by symbol, in kernel order, and its name arena validated once.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::object::{ObjectId, ObjectInfo, ObjectKind};
use crate::resched::{Cancelled, Resched};
use crate::storage::{Names, Records, SymRec};

use super::{BuildError, SymbolId, SymbolTable, SIZE_UNKNOWN};

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
