//! Source files of a vmlinux's code from its DWARF: `.debug_aranges` maps an address to its
//! compilation unit, whose `DW_AT_name` is the source path (`fs/inode.c` and
//! `fs/proc/inode.c` both define a static `init_once`: their STT_FILE entries both say
//! `inode.c`, their compilation units tell them apart).
//!
//! Only the compilation units' root entries are read (one per unit that owns a range), never
//! the whole `.debug_info`; malformed DWARF gives no paths (and a note), never an error.

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};

use klpsym_resched::resched::{Cancelled, Resched};

/// Address ranges of compilation units and the units' source paths.
#[derive(Debug, Default)]
pub struct CuPaths {
    /// (start, end, index into `paths`), sorted by start.
    ranges: Vec<(u64, u64, u32)>,
    paths: Vec<String>,
}

impl CuPaths {
    /// The source path of the compilation unit whose code holds `addr`.
    pub fn path_of(&self, addr: u64) -> Option<&str> {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        let (start, end, p) = *self.ranges.get(i.checked_sub(1)?)?;
        (addr >= start && addr < end).then(|| self.paths[p as usize].as_str())
    }

    /// Number of compilation units with a path.
    pub fn units(&self) -> usize {
        self.paths.len()
    }
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// Reads the compilation units' ranges and paths; `Ok(None)` when the ELF has no
/// `.debug_aranges`/`.debug_info` or they do not parse. Paths are relative to the source tree
/// when it can be told (the directory holding `init/main.c`), else as the compiler wrote them.
pub fn cu_paths(data: &[u8], resched: &mut Resched) -> Result<Option<CuPaths>, Cancelled> {
    let Some(sections) = DebugSections::read(data) else {
        return Ok(None);
    };
    let Some(dwarf) = sections.dwarf() else {
        return Ok(None);
    };
    let mut behind = Behind::new(&sections);
    let result = read(&dwarf, &mut behind, resched);
    let released = behind.release_all(&sections, resched);
    match result {
        Ok(r) => released.map(|()| r),
        Err(Stop::Cancelled) => Err(Cancelled),
        Err(Stop::Dwarf) => released.map(|()| None),
    }
}

/// What a pass over the units leaves behind it in `.debug_info`, taken out of the process's
/// memory as it goes: a mapped 7.x `-dbg` vmlinux has 250 MB of it, and the kernel maps 64
/// KiB around each page a unit's header is read from, so reading every unit's header alone
/// would keep most of it. Only sections borrowed from the input (a mapped file) are released;
/// a page read again comes back from its file.
struct Behind<'d> {
    info: Option<&'d [u8]>,
    released: usize,
}

impl<'d> Behind<'d> {
    /// Released once this many bytes are passed.
    const STEP: usize = 16 << 20;

    /// Bytes released per `madvise` call, with a reschedule point after each: reclaiming
    /// 16 MiB of mapped file pages at once took 1.2-1.3 ms here (`klpsym-bench resched`).
    const CALL: usize = 256 << 10;

    fn new(sections: &DebugSections<'d>) -> Behind<'d> {
        Behind {
            info: sections.mapped_info(),
            released: 0,
        }
    }

    /// The pass is at unit offset `off` and reads nothing before it again.
    fn passed(&mut self, off: usize, resched: &mut Resched) -> Result<(), Cancelled> {
        if let Some(done) = self.info.and_then(|i| i.get(self.released..off)) {
            if done.len() >= Self::STEP {
                release_in_steps(done, resched)?;
                self.released = off;
            }
        }
        Ok(())
    }

    /// The pass is over: every borrowed section it read leaves memory.
    fn release_all(
        self,
        sections: &DebugSections<'d>,
        resched: &mut Resched,
    ) -> Result<(), Cancelled> {
        for bytes in sections.mapped() {
            release_in_steps(bytes, resched)?;
        }
        Ok(())
    }
}

/// [`klpsym_resched::bulk::release_pages`] of `bytes`, [`Behind::CALL`] bytes a step.
fn release_in_steps(bytes: &[u8], resched: &mut Resched) -> Result<(), Cancelled> {
    for c in bytes.chunks(Behind::CALL) {
        klpsym_resched::bulk::release_pages(c);
        resched.tick_step()?;
    }
    Ok(())
}

/// A little-endian ELF's `.debug_*` sections, decompressed when compressed (`SHF_COMPRESSED`,
/// zlib or zstd, as `--compress-debug-sections` and distributions' debuginfo make them);
/// uncompressed ones are borrowed, not copied. `None` without `.debug_aranges`.
struct DebugSections<'d> {
    sections: Vec<(String, std::borrow::Cow<'d, [u8]>)>,
}

impl<'d> DebugSections<'d> {
    fn read(data: &'d [u8]) -> Option<DebugSections<'d>> {
        let file = object::File::parse(data).ok()?;
        if !file.is_little_endian() || file.section_by_name(".debug_aranges").is_none() {
            return None;
        }
        let sections = file
            .sections()
            .filter_map(|s| {
                let name = s.name().ok()?;
                // Only what compilation units, their entries and line programs need: location
                // lists and frame tables (large, and compressed in debuginfo) stay untouched.
                crate::source_lines::DEBUG_SECTIONS
                    .contains(&name)
                    .then(|| Some((name.to_string(), s.uncompressed_data().ok()?)))?
            })
            .collect();
        Some(DebugSections { sections })
    }

    /// The sections borrowed from the input (not decompressed copies).
    fn mapped(&self) -> impl Iterator<Item = &'d [u8]> + '_ {
        self.sections.iter().filter_map(|(_, d)| match d {
            std::borrow::Cow::Borrowed(b) => Some(*b),
            std::borrow::Cow::Owned(_) => None,
        })
    }

    /// `.debug_info` when borrowed from the input.
    fn mapped_info(&self) -> Option<&'d [u8]> {
        self.sections.iter().find_map(|(n, d)| match d {
            std::borrow::Cow::Borrowed(b) if n == ".debug_info" => Some(*b),
            _ => None,
        })
    }

    fn dwarf(&self) -> Option<gimli::Dwarf<Slice<'_>>> {
        let load = |id: gimli::SectionId| -> Result<Slice<'_>, gimli::Error> {
            let d = self
                .sections
                .iter()
                .find(|(n, _)| n == id.name())
                .map_or(&[][..], |(_, d)| d.as_ref());
            Ok(EndianSlice::new(d, LittleEndian))
        };
        gimli::Dwarf::load(load).ok()
    }
}

pub(crate) enum Stop {
    Cancelled,
    Dwarf,
}

impl From<gimli::Error> for Stop {
    fn from(_: gimli::Error) -> Self {
        Stop::Dwarf
    }
}

impl From<Cancelled> for Stop {
    fn from(_: Cancelled) -> Self {
        Stop::Cancelled
    }
}

fn read(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    behind: &mut Behind<'_>,
    resched: &mut Resched,
) -> Result<Option<CuPaths>, Stop> {
    let mut out = CuPaths::default();
    let mut by_unit: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next()? {
        resched.tick()?;
        let unit_offset = h.debug_info_offset();
        let idx = match by_unit.get(&unit_offset.0) {
            Some(&i) => i,
            None => {
                // `.debug_aranges` lists the units in the order they lie in `.debug_info`.
                behind.passed(unit_offset.0, resched)?;
                let header = dwarf.debug_info.header_from_offset(unit_offset)?;
                let unit = dwarf.unit(header)?;
                // Parsing a unit (its abbreviations, its first entry) is tens to hundreds of
                // microseconds: a step, not an item of the stride the entries taught.
                resched.tick_step()?;
                let Some(name) = unit.name else { continue };
                let name = String::from_utf8_lossy(name.slice()).into_owned();
                let i = out.paths.len() as u32;
                out.paths.push(name);
                by_unit.insert(unit_offset.0, i);
                i
            }
        };
        let mut entries = h.entries();
        while let Some(e) = entries.next()? {
            resched.tick()?;
            let (start, len) = (e.address(), e.length());
            if len > 0 {
                out.ranges.push((start, start.saturating_add(len), idx));
            }
        }
    }
    if out.ranges.is_empty() {
        return Ok(None);
    }
    klpsym_resched::bulk::sort_by_u64_key_with_points(&mut out.ranges, |r| r.0, resched)?;
    // The source tree: the directory above `init/main.c`, which every kernel has.
    let root = out
        .paths
        .iter()
        .find_map(|p| p.strip_suffix("init/main.c").map(str::to_string));
    if let Some(root) = root.filter(|r| r.is_empty() || r.ends_with('/')) {
        for p in &mut out.paths {
            resched.tick()?;
            if let Some(rel) = p.strip_prefix(root.as_str()) {
                *p = rel.to_string();
            }
        }
    }
    Ok(Some(out))
}

/// Where a function is declared, from its DWARF subprogram entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeclLine {
    /// `DW_AT_decl_file`: the compilation unit's own file, or a header for a `static inline`
    /// copy; relative to the build directory when it lies under it.
    pub file: String,
    /// `DW_AT_decl_line`.
    pub line: u64,
}

/// The declaration line of the function whose code starts at each of `addrs` (`DW_AT_low_pc`
/// of a `DW_TAG_subprogram`, following `DW_AT_abstract_origin`/`DW_AT_specification` to the
/// entry that holds `DW_AT_decl_line`, as an out-of-line copy of an inlined function needs).
/// Only the compilation units holding the addresses are read (found through
/// `.debug_aranges`). `None` where the DWARF does not tell; malformed DWARF tells nothing.
pub fn decl_lines(
    data: &[u8],
    addrs: &[u64],
    resched: &mut Resched,
) -> Result<Vec<Option<DeclLine>>, Cancelled> {
    let mut out = vec![None; addrs.len()];
    let Some(sections) = DebugSections::read(data) else {
        return Ok(out);
    };
    let Some(dwarf) = sections.dwarf() else {
        return Ok(out);
    };
    let mut behind = Behind::new(&sections);
    let result = read_lines(&dwarf, addrs, &mut out, &mut behind, resched);
    let released = behind.release_all(&sections, resched);
    match result {
        Ok(()) | Err(Stop::Dwarf) => released.map(|()| out),
        Err(Stop::Cancelled) => Err(Cancelled),
    }
}

fn read_lines(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    addrs: &[u64],
    out: &mut [Option<DeclLine>],
    behind: &mut Behind<'_>,
    resched: &mut Resched,
) -> Result<(), Stop> {
    // The units owning the addresses: unit offset -> indexes into `addrs` (all of a kernel's
    // functions at once when a line index is made: hashed, not searched).
    let mut units: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    let mut sorted: Vec<usize> = (0..addrs.len()).collect();
    klpsym_resched::bulk::sort_by_u64_key_with_points(&mut sorted, |&i| addrs[i], resched)?;
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next()? {
        resched.tick()?;
        let mut entries = h.entries();
        while let Some(e) = entries.next()? {
            resched.tick()?;
            let (start, end) = (e.address(), e.address().saturating_add(e.length()));
            let first = sorted.partition_point(|&i| addrs[i] < start);
            for &i in sorted[first..].iter().take_while(|&&i| addrs[i] < end) {
                units.entry(h.debug_info_offset().0).or_default().push(i);
            }
        }
    }
    // In offset order, each unit read only within itself: what lies before it is done.
    for (off, wanted) in units {
        behind.passed(off, resched)?;
        let mut at: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        for &i in &wanted {
            at.entry(addrs[i]).or_default().push(i);
        }
        let header = dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(off))?;
        let unit = dwarf.unit(header)?;
        // A unit's parse is a step (see `read`).
        resched.tick_step()?;
        let comp_dir = unit
            .comp_dir
            .map(|d| String::from_utf8_lossy(d.slice()).into_owned());
        let mut cursor = unit.entries();
        while let Some(entry) = cursor.next_dfs()? {
            resched.tick()?;
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some(v) = entry.attr_value(gimli::DW_AT_low_pc) else {
                continue;
            };
            let Some(pc) = dwarf.attr_address(&unit, v)? else {
                continue;
            };
            let Some(hits) = at.get(&pc) else {
                continue;
            };
            let decl = declaration(dwarf, &unit, entry.clone(), comp_dir.as_deref())?;
            for &i in hits {
                // The first entry that tells wins; a later one with the same address (a
                // declaration-only copy) does not take it back.
                if out[i].is_none() {
                    out[i] = decl.clone();
                }
            }
        }
    }
    Ok(())
}

/// `DW_AT_decl_file`/`DW_AT_decl_line` of `entry`, or of the entry it is a concrete copy or
/// definition of (a few hops at most, within the unit).
pub(crate) fn declaration<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    unit: &gimli::Unit<Slice<'a>>,
    mut entry: gimli::DebuggingInformationEntry<Slice<'a>>,
    comp_dir: Option<&str>,
) -> Result<Option<DeclLine>, Stop> {
    for _ in 0..4 {
        if let Some(gimli::AttributeValue::Udata(line)) = entry.attr_value(gimli::DW_AT_decl_line) {
            let file = match entry.attr_value(gimli::DW_AT_decl_file) {
                Some(gimli::AttributeValue::FileIndex(i)) => file_name(dwarf, unit, i, comp_dir)?,
                _ => None,
            };
            return Ok(file.map(|file| DeclLine { file, line }));
        }
        let next = entry
            .attr_value(gimli::DW_AT_abstract_origin)
            .or_else(|| entry.attr_value(gimli::DW_AT_specification));
        match next {
            Some(gimli::AttributeValue::UnitRef(o)) => entry = unit.entry(o)?,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The path of file `index` of the unit's line program, relative to `comp_dir` when under it.
pub(crate) fn file_name(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    index: u64,
    comp_dir: Option<&str>,
) -> Result<Option<String>, Stop> {
    let Some(program) = &unit.line_program else {
        return Ok(None);
    };
    let header = program.header();
    let Some(f) = header.file(index) else {
        return Ok(None);
    };
    let name = dwarf.attr_string(unit, f.path_name())?;
    let name = String::from_utf8_lossy(name.slice()).into_owned();
    let full = if name.starts_with('/') {
        name
    } else {
        match f.directory(header) {
            Some(d) => {
                let d = dwarf.attr_string(unit, d)?;
                let d = String::from_utf8_lossy(d.slice());
                if d.is_empty() {
                    name
                } else {
                    format!("{}/{name}", d.trim_end_matches('/'))
                }
            }
            None => name,
        }
    };
    Ok(Some(match comp_dir.and_then(|c| full.strip_prefix(c)) {
        Some(rel) if rel.starts_with('/') => rel.trim_start_matches('/').to_string(),
        _ => full,
    }))
}
