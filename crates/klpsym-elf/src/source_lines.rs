//! `file:line` and the inline chain of a code address, as binutils' `addr2line -f -i -p`
//! prints them (and `scripts/faddr2line`, `scripts/decode_stacktrace.sh` around it), read from
//! DWARF with the `addr2line` crate.
//!
//! - A vmlinux with debug info (a `-dbg` package's): its sections are used where they lie
//!   (decompressed when `SHF_COMPRESSED`); only what line tables and inline chains need is
//!   read ([`DEBUG_SECTIONS`]), never the location lists or frame tables.
//! - A module's debug file (`/usr/lib/debug/lib/modules/$release/…/x.ko`): a relocatable
//!   object, whose DWARF names every section at address 0. Its debug sections are copied and
//!   relocated with each allocated section at its own address (see [`DebugLines::module`]),
//!   so `.text` and `.text.unlikely` do not collide as they do for binutils without
//!   `--section`; a place is then (section, offset), as `faddr2line` asks
//!   `addr2line --section=…`.
//!
//! Paths are made relative to the source tree (the directory above `init/main.c`, found in
//! the vmlinux's units; given to a module's by the caller), as `faddr2line` strips it.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection, ObjectSymbol};

use crate::dwarf::DEBUG_SECTIONS;

/// Bytes shared with whoever holds them (a mapped file).
pub type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// One frame of a place's inline chain: innermost first; every frame after the first is the
/// call site its predecessor was inlined at (`(inlined by)`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceFrame {
    /// The function (`DW_AT_name` through `DW_AT_abstract_origin`), when DWARF names one.
    pub function: Option<String>,
    /// The file, relative to the source tree when under it; `None` where DWARF has no line
    /// for the place (`??` to addr2line).
    pub file: Option<String>,
    /// The line; `None` with `file`, or 0 where the line table says 0.
    pub line: Option<u32>,
    /// The line table row's discriminator, innermost frame only (as `addr2line -p` prints
    /// ` (discriminator N)`); `None` when 0.
    pub discriminator: Option<u32>,
}

impl std::fmt::Display for SourceFrame {
    /// `function at file:line`, as `addr2line -f -p` prints a frame (`??` for what is not
    /// known, `?` for an unknown line).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}:",
            self.function.as_deref().unwrap_or("??"),
            self.file.as_deref().unwrap_or("??")
        )?;
        match self.line {
            Some(l) => write!(f, "{l}")?,
            None => f.write_str("?")?,
        }
        if let Some(d) = self.discriminator {
            write!(f, " (discriminator {d})")?;
        }
        Ok(())
    }
}

/// Where one debug section's bytes are.
enum Bytes {
    /// A range of the shared bytes.
    Shared(Range<usize>),
    /// Made here (decompressed or relocated).
    Owned(Vec<u8>),
}

/// The debug sections, owned or shared.
struct Store {
    shared: Option<Shared>,
    sections: Vec<(gimli::SectionId, Bytes)>,
}

impl Store {
    fn get(&self, id: gimli::SectionId) -> &[u8] {
        let Some((_, b)) = self.sections.iter().find(|(s, _)| *s == id) else {
            return &[];
        };
        match b {
            Bytes::Owned(v) => v,
            Bytes::Shared(r) => self
                .shared
                .as_ref()
                .and_then(|s| (**s).as_ref().get(r.clone()))
                .unwrap_or(&[]),
        }
    }
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;
/// The `addr2line` context, made on the first lookup of a place: it reads every unit's
/// header and ranges, which a copies walk (`crate::copies`) does not need.
type Ctx<'a> = std::cell::OnceCell<Option<addr2line::Context<Slice<'a>>>>;

/// The `addr2line` context of `s`'s sections; `None` for DWARF it cannot read.
fn context<'q, 'o>(s: &'q Store, c: &'o Ctx<'q>) -> Option<&'o addr2line::Context<Slice<'q>>> {
    c.get_or_init(|| {
        let dwarf = gimli::Dwarf::load(|id| {
            Ok::<_, gimli::Error>(EndianSlice::new(s.get(id), LittleEndian))
        })
        .ok()?;
        addr2line::Context::from_dwarf(dwarf).ok()
    })
    .as_ref()
}

self_cell::self_cell!(
    struct Cell {
        owner: Store,
        #[not_covariant]
        dependent: Ctx,
    }
);

/// A module section placed for lookups: its name and address.
#[derive(Debug, Clone)]
struct Placed {
    name: String,
    base: u64,
    size: u64,
}

/// An object's line tables and inline chains, ready for lookups.
pub struct DebugLines {
    cell: Cell,
    /// The source tree prefixes stripped from paths: the directory above `init/main.c`, and
    /// its absolute form where some units kept it (see `crate::dwarf::absolute_root`).
    roots: Vec<String>,
    /// A module's allocated sections as placed for its DWARF (empty for a vmlinux).
    placed: Vec<Placed>,
    /// A module's symbols: (name, section index into `placed`, value, size).
    symbols: Vec<(String, usize, u64, u64)>,
    /// Whether its entries may refer across units (see `DebugLines::refers_across_units`),
    /// found once.
    pub(crate) across_units: std::sync::OnceLock<bool>,
}

impl std::fmt::Debug for DebugLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugLines")
            .field("roots", &self.roots)
            .field("sections", &self.placed.len())
            .finish()
    }
}

/// The debug sections of an ELF that has them: (name, bytes), uncompressed ones borrowed.
/// Empty without `.debug_info` (or for bytes that are not a little-endian ELF).
pub fn debug_sections(data: &[u8]) -> Vec<(&'static str, Cow<'_, [u8]>)> {
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    if !file.is_little_endian() || file.section_by_name(".debug_info").is_none() {
        return Vec::new();
    }
    DEBUG_SECTIONS
        .iter()
        .filter_map(|&name| {
            let s = file.section_by_name(name)?;
            Some((name, s.uncompressed_data().ok()?))
        })
        .collect()
}

fn section_id(name: &str) -> Option<gimli::SectionId> {
    use gimli::SectionId::*;
    [
        DebugAranges,
        DebugInfo,
        DebugAbbrev,
        DebugStr,
        DebugLine,
        DebugLineStr,
        DebugStrOffsets,
        DebugAddr,
        DebugRanges,
        DebugRngLists,
    ]
    .into_iter()
    .find(|id| id.name() == name)
}

impl DebugLines {
    /// The lines of a vmlinux (an executable with DWARF) whose bytes are `data`: its
    /// uncompressed debug sections are read where they lie. `None` without DWARF.
    pub fn vmlinux(data: Shared) -> Option<DebugLines> {
        let bytes: &[u8] = (*data).as_ref();
        let base = bytes.as_ptr() as usize;
        let mut sections = Vec::new();
        for (name, d) in debug_sections(bytes) {
            let id = section_id(name)?;
            let b = match d {
                Cow::Borrowed(s) => {
                    let start = s.as_ptr() as usize - base;
                    Bytes::Shared(start..start + s.len())
                }
                Cow::Owned(v) => Bytes::Owned(v),
            };
            sections.push((id, b));
        }
        Self::from_store(Store {
            shared: Some(data),
            sections,
        })
    }

    /// The lines of debug sections stored apart (a cache's copy of a vmlinux's):
    /// `(name, range of data)` each.
    pub fn from_ranges(data: Shared, ranges: &[(String, Range<usize>)]) -> Option<DebugLines> {
        let len = (*data).as_ref().len();
        let sections = ranges
            .iter()
            .filter(|(_, r)| r.start <= r.end && r.end <= len)
            .filter_map(|(n, r)| Some((section_id(n)?, Bytes::Shared(r.clone()))))
            .collect();
        Self::from_store(Store {
            shared: Some(data),
            sections,
        })
    }

    fn from_store(store: Store) -> Option<DebugLines> {
        if store.get(gimli::SectionId::DebugInfo).is_empty() {
            return None;
        }
        let cell = Cell::new(store, |_| std::cell::OnceCell::new());
        let mut lines = DebugLines {
            cell,
            roots: Vec::new(),
            placed: Vec::new(),
            symbols: Vec::new(),
            across_units: std::sync::OnceLock::new(),
        };
        lines.roots = lines.find_roots();
        Some(lines)
    }

    /// The lines of a module's debug file (a relocatable `.ko` with DWARF): every allocated
    /// section is given its own address (in section order, aligned), and the debug sections
    /// are relocated against those (`R_X86_64_64`/`_32`, `R_AARCH64_ABS64`/`ABS32`: every
    /// absolute relocation). `None` without DWARF or for bytes that do not parse.
    pub fn module(data: &[u8]) -> Option<DebugLines> {
        let file = object::File::parse(data).ok()?;
        if !file.is_little_endian() || file.section_by_name(".debug_info").is_none() {
            return None;
        }
        // Allocated sections at distinct addresses, from 0x10000 (0 is no address).
        let mut bases = std::collections::HashMap::new();
        let mut placed = Vec::new();
        let mut at = 0x10000u64;
        for s in file.sections() {
            let object::SectionFlags::Elf { sh_flags, .. } = s.flags() else {
                continue;
            };
            if sh_flags.0 & object::elf::SHF_ALLOC.0 == 0 {
                continue;
            }
            let align = s.align().max(16);
            at = at.div_ceil(align).checked_mul(align)?;
            bases.insert(s.index(), (placed.len(), at));
            placed.push(Placed {
                name: s.name().ok()?.to_string(),
                base: at,
                size: s.size(),
            });
            at = at.checked_add(s.size().max(1))?;
        }
        let symbol_value = |sym: &object::Symbol<'_, '_>| -> Option<u64> {
            match sym.section_index() {
                Some(i) => Some(bases.get(&i).map_or(0, |b| b.1).wrapping_add(sym.address())),
                None => (sym.section() == object::SymbolSection::Absolute).then(|| sym.address()),
            }
        };
        let mut sections = Vec::new();
        for &name in DEBUG_SECTIONS {
            let Some(s) = file.section_by_name(name) else {
                continue;
            };
            let mut bytes = s.uncompressed_data().ok()?.into_owned();
            for (offset, r) in s.relocations() {
                let object::RelocationTarget::Symbol(si) = r.target() else {
                    continue;
                };
                let Ok(sym) = file.symbol_by_index(si) else {
                    continue;
                };
                if r.kind() != object::RelocationKind::Absolute {
                    continue;
                }
                let Some(s_value) = symbol_value(&sym) else {
                    continue;
                };
                let value = s_value.wrapping_add(r.addend() as u64);
                let at = offset as usize;
                match r.size() {
                    64 => {
                        if let Some(dst) = bytes.get_mut(at..at + 8) {
                            dst.copy_from_slice(&value.to_le_bytes());
                        }
                    }
                    32 => {
                        if let Some(dst) = bytes.get_mut(at..at + 4) {
                            dst.copy_from_slice(&(value as u32).to_le_bytes());
                        }
                    }
                    _ => {}
                }
            }
            sections.push((section_id(name)?, Bytes::Owned(bytes)));
        }
        let symbols = file
            .symbols()
            .filter(|s| {
                s.kind() == object::SymbolKind::Text || s.kind() == object::SymbolKind::Data
            })
            .filter_map(|s| {
                let (i, _) = bases.get(&s.section_index()?)?;
                Some((s.name().ok()?.to_string(), *i, s.address(), s.size()))
            })
            .collect();
        let mut lines = Self::from_store(Store {
            shared: None,
            sections,
        })?;
        lines.placed = placed;
        lines.symbols = symbols;
        Some(lines)
    }

    /// Runs `f` over the DWARF sections (for the walks of [`crate::copies`]); `None` when they
    /// do not load.
    pub(crate) fn with_dwarf<T>(&self, f: impl FnOnce(&gimli::Dwarf<Slice<'_>>) -> T) -> Option<T> {
        self.cell.with_dependent(|s, _| {
            let dwarf = gimli::Dwarf::load(|id| {
                Ok::<_, gimli::Error>(EndianSlice::new(s.get(id), LittleEndian))
            })
            .ok()?;
            Some(f(&dwarf))
        })
    }

    /// The compilation units' paths and ranges (see [`crate::CuPaths`]), relative to this
    /// object's roots: for a module's debug file, whose addresses [`DebugLines::place`]
    /// gives. `Ok(None)` without unit ranges.
    pub fn unit_paths(
        &self,
        resched: &mut klpsym_resched::resched::Resched,
    ) -> Result<Option<crate::CuPaths>, klpsym_resched::resched::Cancelled> {
        self.with_dwarf(|d| crate::dwarf::cu_paths_of(d, &self.roots, resched))
            .unwrap_or(Ok(None))
    }

    /// `.debug_info` when it lies in the shared bytes (a mapped file), for a walk to take out
    /// of memory behind it.
    pub(crate) fn mapped_info(&self) -> Option<&[u8]> {
        self.cell.with_dependent(|s, _| {
            let (_, b) = s
                .sections
                .iter()
                .find(|(id, _)| *id == gimli::SectionId::DebugInfo)?;
            match b {
                Bytes::Shared(_) => Some(s.get(gimli::SectionId::DebugInfo)),
                Bytes::Owned(_) => None,
            }
        })
    }

    /// True for a module's debug file (its sections placed at addresses of their own).
    pub fn is_module(&self) -> bool {
        !self.placed.is_empty()
    }

    /// The module symbol whose code holds `addr` (an address [`DebugLines::place`] gives):
    /// its name, section and offset in it; `None` for a vmlinux or outside every symbol.
    pub fn symbol_at(&self, addr: u64) -> Option<(&str, &str, u64)> {
        self.symbols
            .iter()
            .filter(|s| {
                let base = self.placed[s.1].base + s.2;
                addr >= base && (addr < base + s.3.max(1))
            })
            // A symbol starting there over one that only covers it (an alias of size 0).
            .min_by_key(|s| (self.placed[s.1].base + s.2 != addr, s.0.len()))
            .map(|s| (s.0.as_str(), self.placed[s.1].name.as_str(), s.2))
    }

    /// A module's text symbols (name, section, offset in it) in its symbol table's order, as
    /// the module's kallsyms lists them.
    pub fn module_symbols(&self) -> impl Iterator<Item = (&str, &str, u64)> + '_ {
        self.symbols
            .iter()
            .map(|s| (s.0.as_str(), self.placed[s.1].name.as_str(), s.2))
    }

    /// The source tree prefix stripped from paths (the directory above `init/main.c`).
    pub fn root(&self) -> Option<&str> {
        self.roots.first().map(String::as_str)
    }

    /// Every source tree prefix stripped from paths (see [`DebugLines::root`]; its absolute
    /// form where some units kept it).
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// Strips `root` from paths (a module's, given its vmlinux's tree).
    pub fn set_root(&mut self, root: Option<String>) {
        if let Some(r) = root {
            self.roots = vec![r];
        }
    }

    /// Strips `roots` from paths (a module's, given its vmlinux's tree); none: keeps its own.
    pub fn set_roots(&mut self, roots: &[String]) {
        if !roots.is_empty() {
            self.roots = roots.to_vec();
        }
    }

    /// The directory above `init/main.c` among the units' names (the first units: `init/`
    /// is linked first) and, where the units of the tree name relative paths while others
    /// (the assembler's) kept absolute ones, the tree's absolute form.
    fn find_roots(&self) -> Vec<String> {
        self.cell.with_dependent(|s, _| {
            let Ok(dwarf) = gimli::Dwarf::load(|id| {
                Ok::<_, gimli::Error>(EndianSlice::new(s.get(id), LittleEndian))
            }) else {
                return Vec::new();
            };
            let mut main: Option<(String, String)> = None;
            let mut absolute_dirs: Vec<String> = Vec::new();
            // Only each unit's root entry (its abbreviations, not its line program). Past
            // `init/main.c`, a few units more for an absolute one.
            let mut units = dwarf.units();
            let mut after_main = 0;
            for _ in 0..100_000 {
                let Ok(Some(header)) = units.next() else {
                    break;
                };
                if main.is_some() {
                    after_main += 1;
                    if after_main > 256 {
                        break;
                    }
                }
                let Ok(abbrevs) = header.abbreviations(&dwarf.debug_abbrev) else {
                    continue;
                };
                let mut entries = header.entries(&abbrevs);
                let Ok(Some(root)) = entries.next_dfs() else {
                    continue;
                };
                let string = |attr| -> Option<String> {
                    let value = root.attr_value(attr)?;
                    let s = match value {
                        gimli::AttributeValue::String(s) => Ok(s),
                        gimli::AttributeValue::DebugStrRef(o) => dwarf.debug_str.get_str(o),
                        gimli::AttributeValue::DebugLineStrRef(o) => {
                            dwarf.debug_line_str.get_str(o)
                        }
                        v => match dwarf.unit(header) {
                            Ok(unit) => dwarf.attr_string(&unit, v),
                            Err(e) => Err(e),
                        },
                    };
                    Some(String::from_utf8_lossy(s.ok()?.slice()).into_owned())
                };
                let Some(name) = string(gimli::DW_AT_name) else {
                    continue;
                };
                let dir = string(gimli::DW_AT_comp_dir).unwrap_or_default();
                if name.starts_with('/')
                    && dir.starts_with('/')
                    && absolute_dirs.len() < 8
                    && !absolute_dirs.contains(&dir)
                {
                    absolute_dirs.push(dir.clone());
                }
                if main.is_none() && name.ends_with("init/main.c") {
                    main = Some((name, dir));
                }
                if let Some((_, d)) = &main {
                    if crate::dwarf::absolute_root(d, absolute_dirs.iter().map(String::as_str))
                        .is_some()
                    {
                        break;
                    }
                }
            }
            let Some((name, dir)) = main else {
                return Vec::new();
            };
            // A relative name is under the unit's directory (as line tables join them).
            let joined = if !name.starts_with('/') && !dir.is_empty() {
                format!("{}/{name}", dir.trim_end_matches('/'))
            } else {
                name
            };
            let mut roots: Vec<String> = joined
                .strip_suffix("init/main.c")
                .filter(|r| r.is_empty() || r.ends_with('/'))
                .map(str::to_string)
                .into_iter()
                .collect();
            if let Some(abs) =
                crate::dwarf::absolute_root(&dir, absolute_dirs.iter().map(String::as_str))
            {
                roots.push(abs);
            }
            roots
        })
    }

    /// The inline chain at `addr` (a vmlinux address; a module's from [`DebugLines::place`]),
    /// innermost first, as `addr2line -f -i` gives it; empty where DWARF knows nothing of it.
    pub fn frames(&self, addr: u64) -> Vec<SourceFrame> {
        let roots = &self.roots;
        self.cell.with_dependent(|s, c| {
            let Some(ctx) = context(s, c) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            let Ok(mut iter) = ctx.find_frames(addr).skip_all_loads() else {
                return out;
            };
            while let Ok(Some(f)) = iter.next() {
                let function = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok())
                    .map(|n| n.into_owned());
                let (file, line) = match &f.location {
                    Some(l) => (
                        l.file
                            .map(|p| crate::dwarf::tree_relative(p.to_string(), roots)),
                        l.line,
                    ),
                    None => (None, None),
                };
                out.push(SourceFrame {
                    function,
                    file,
                    line: line.or(Some(0)).filter(|_| f.location.is_some()),
                    discriminator: None,
                });
                if out.len() > 64 {
                    break;
                }
            }
            if let Some(first) = out.first_mut() {
                first.discriminator = discriminator(ctx, addr);
            }
            out
        })
    }

    /// [`DebugLines::frames`], with the outermost frame named `symbol` (the symbol table's
    /// name for `addr`) where DWARF names no function there, as both addr2lines do for an
    /// assembly function (`startup_64 at arch/x86/kernel/head_64.S:65`).
    pub fn frames_named(&self, addr: u64, symbol: Option<&str>) -> Vec<SourceFrame> {
        let mut frames = self.frames(addr);
        if let (Some(last), Some(name)) = (frames.last_mut(), symbol) {
            if last.function.is_none() {
                last.function = Some(name.to_string());
            }
        }
        frames
    }

    /// The address [`DebugLines::frames`] takes for `offset` into section `section` of a
    /// module's debug file; `None` for a section it does not have.
    pub fn place(&self, section: &str, offset: u64) -> Option<u64> {
        let p = self.placed.iter().find(|p| p.name == section)?;
        (offset <= p.size).then(|| p.base + offset)
    }

    /// The address [`DebugLines::frames`] takes for `offset` into the module's symbol `name`
    /// (the one in section `section` when several share the name and one is given), with the
    /// symbol's section.
    pub fn place_symbol(
        &self,
        name: &str,
        offset: u64,
        section: Option<&str>,
    ) -> Option<(u64, &str)> {
        let mut hits = self.symbols.iter().filter(|s| s.0 == name);
        let first = hits.next()?;
        let chosen = match section {
            Some(sec) if self.placed[first.1].name != sec => self
                .symbols
                .iter()
                .filter(|s| s.0 == name)
                .find(|s| self.placed[s.1].name == sec)
                .unwrap_or(first),
            _ => first,
        };
        let p = &self.placed[chosen.1];
        Some((p.base + chosen.2 + offset, p.name.as_str()))
    }
}

/// The discriminator of the line table row holding `addr` (the row binutils reports).
fn discriminator(ctx: &addr2line::Context<Slice<'_>>, addr: u64) -> Option<u32> {
    let unit = ctx.find_dwarf_and_unit(addr).skip_all_loads()?;
    let program = unit.line_program.clone()?;
    let mut rows = program.rows();
    let mut prev: Option<(u64, u64)> = None;
    while let Ok(Some((_, row))) = rows.next_row() {
        if let Some((a, d)) = prev {
            if a <= addr && addr < row.address() {
                return u32::try_from(d).ok().filter(|&d| d != 0);
            }
        }
        prev = if row.end_sequence() {
            None
        } else {
            Some((row.address(), row.discriminator()))
        };
    }
    None
}
