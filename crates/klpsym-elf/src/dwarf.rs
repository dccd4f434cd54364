//! Source files of a vmlinux's code from its DWARF: `.debug_aranges` maps an address to its
//! compilation unit, whose `DW_AT_name` is the source path (`fs/inode.c` and
//! `fs/proc/inode.c` both define a static `init_once`: their STT_FILE entries both say
//! `inode.c`, their compilation units tell them apart).
//!
//! Data symbols are told by the units' file-scope variables (`DW_TAG_variable` with a
//! `DW_OP_addr` location): each unit's top-level entries are read, their children skipped.
//! Malformed DWARF gives no paths (and a note), never an error.

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};

use klpsym_resched::resched::{Cancelled, Resched};

/// The sections line tables and inline chains need (and the units' paths: see
/// `crate::source_lines`, which reads its line tables from the same sections).
pub const DEBUG_SECTIONS: &[&str] = &[
    ".debug_aranges",
    ".debug_info",
    ".debug_abbrev",
    ".debug_str",
    ".debug_line",
    ".debug_line_str",
    ".debug_str_offsets",
    ".debug_addr",
    ".debug_ranges",
    ".debug_rnglists",
];

/// Address ranges of compilation units and the units' source paths.
#[derive(Debug, Default)]
pub struct CuPaths {
    /// (start, end, index into `paths`), sorted by start.
    ranges: Vec<(u64, u64, u32)>,
    /// The file-scope variables' addresses (`DW_TAG_variable` at a unit's top level with a
    /// `DW_OP_addr` location) with their unit (index into `paths`), sorted.
    variables: Vec<(u64, u32)>,
    paths: Vec<String>,
}

impl CuPaths {
    /// Frees the map in steps with reschedule points (a -dbg vmlinux's units name thousands
    /// of paths).
    pub fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        klpsym_resched::bulk::free_with_points(self.ranges, resched)?;
        klpsym_resched::bulk::free_with_points(self.variables, resched)?;
        klpsym_resched::bulk::free_with_points(self.paths, resched)
    }

    /// The source path of the compilation unit whose code holds `addr`, else of the one
    /// defining a variable at `addr` (`saved_command_line`: init/main.c).
    pub fn path_of(&self, addr: u64) -> Option<&str> {
        let code = || {
            let i = self.ranges.partition_point(|r| r.0 <= addr);
            let (start, end, p) = *self.ranges.get(i.checked_sub(1)?)?;
            (addr >= start && addr < end).then_some(p)
        };
        let data = || {
            let i = self.variables.partition_point(|v| v.0 < addr);
            let &(a, p) = self.variables.get(i)?;
            // Two units defining one address (a variable and its alias) tell nothing.
            let unique = self
                .variables
                .get(i + 1)
                .is_none_or(|n| n.0 != a || n.1 == p);
            (a == addr && unique).then_some(p)
        };
        code()
            .or_else(data)
            .map(|p| self.paths[p as usize].as_str())
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
    // The ELF's section headers parsed again, the DWARF sections found: steps of their own
    // (a page of the headers not mapped yet is a fault).
    resched.tick_step()?;
    let Some(sections) = DebugSections::read(data) else {
        return Ok(None);
    };
    resched.tick_step()?;
    let Some(dwarf) = sections.dwarf() else {
        return Ok(None);
    };
    // The sections read at random (abbreviations, strings, line programs) asked into the page
    // cache in steps first; `.debug_info` a window ahead of the pass (see `Behind`).
    for (name, bytes) in sections.mapped_named() {
        if name != ".debug_info" {
            klpsym_resched::bulk::prefetch_with(bytes, resched)?;
        }
    }
    let mut behind = Behind::new(&sections);
    let result = read(&dwarf, &mut behind, resched);
    let released = behind.release_all(&sections, resched);
    match result {
        Ok(r) => released.map(|()| r),
        Err(Stop::Cancelled) => Err(Cancelled),
        Err(Stop::Dwarf) => released.map(|()| None),
    }
}

/// The compilation units' paths of DWARF loaded already (a module's debug file, relocated by
/// [`crate::DebugLines::module`]), made relative to the source tree by `roots` (a module has
/// no `init/main.c` to tell its tree: its kernel's roots are given); `Ok(None)` when it has
/// no unit ranges or does not parse.
pub(crate) fn cu_paths_of(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    roots: &[String],
    resched: &mut Resched,
) -> Result<Option<CuPaths>, Cancelled> {
    // Owned sections: nothing mapped to leave behind.
    let mut behind = Behind {
        info: None,
        released: 0,
        ahead: Default::default(),
    };
    match read(dwarf, &mut behind, resched) {
        Ok(Some(mut paths)) => {
            for p in &mut paths.paths {
                resched.tick()?;
                *p = tree_relative(std::mem::take(p), roots);
            }
            Ok(Some(paths))
        }
        Ok(None) | Err(Stop::Dwarf) => Ok(None),
        Err(Stop::Cancelled) => Err(Cancelled),
    }
}

/// What a pass over the units leaves behind it in `.debug_info`, taken out of the process's
/// memory as it goes: a mapped 7.x `-dbg` vmlinux has 250 MB of it, and the kernel maps 64
/// KiB around each page a unit's header is read from, so reading every unit's header alone
/// would keep most of it. Only sections borrowed from the input (a mapped file) are released;
/// a page read again comes back from its file.
///
/// Ahead of the pass, a window of it is asked into the page cache in bounded steps
/// (`bulk::prefetch_with`): a fault of the pass itself would otherwise read ahead inside one
/// stretch, allocating tens of page-cache pages (0.3-2.2 ms stretches on a -dbg vmlinux,
/// `klpsym-bench resched`, 2026-12-07).
struct Behind<'d> {
    info: Option<&'d [u8]>,
    released: usize,
    /// `.debug_info` asked for ahead of the pass.
    ahead: klpsym_resched::bulk::ReadAhead,
}

impl<'d> Behind<'d> {
    /// Released once this many bytes are passed.
    const STEP: usize = 16 << 20;

    /// Bytes released per `madvise` call, with a reschedule point after each: reclaiming
    /// 16 MiB of mapped file pages at once took 1.2-1.3 ms here (`klpsym-bench resched`).
    const CALL: usize = 64 << 10;

    fn new(sections: &DebugSections<'d>) -> Behind<'d> {
        Behind {
            info: sections.mapped_info(),
            released: 0,
            ahead: Default::default(),
        }
    }

    /// The pass is at unit offset `off` and reads nothing before it again.
    fn passed(&mut self, off: usize, resched: &mut Resched) -> Result<(), Cancelled> {
        if let Some(info) = self.info {
            self.ahead.at(info, off, resched)?;
        }
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
                DEBUG_SECTIONS
                    .contains(&name)
                    .then(|| Some((name.to_string(), s.uncompressed_data().ok()?)))?
            })
            .collect();
        Some(DebugSections { sections })
    }

    /// The sections borrowed from the input (not decompressed copies).
    fn mapped(&self) -> impl Iterator<Item = &'d [u8]> + '_ {
        self.mapped_named().map(|(_, b)| b)
    }

    /// The same, with their names.
    fn mapped_named(&self) -> impl Iterator<Item = (&str, &'d [u8])> + '_ {
        self.sections.iter().filter_map(|(n, d)| match d {
            std::borrow::Cow::Borrowed(b) => Some((n.as_str(), *b)),
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
    let mut main_dir: Option<String> = None;
    let mut absolute_dirs: Vec<String> = Vec::new();
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
                // The build directories the root is told from (see `absolute_root`).
                if let Some(d) = unit.comp_dir {
                    let d = String::from_utf8_lossy(d.slice());
                    if name.ends_with("init/main.c") && main_dir.is_none() {
                        main_dir = Some(d.into_owned());
                    } else if name.starts_with('/')
                        && d.starts_with('/')
                        && absolute_dirs.len() < 8
                        && !absolute_dirs.iter().any(|a| *a == d)
                    {
                        absolute_dirs.push(d.into_owned());
                    }
                }
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
    variables(dwarf, &mut out, &mut by_unit, behind.info, resched)?;
    // The source tree: the directory above `init/main.c`, which every kernel has, and its
    // absolute form where other units kept it (see `absolute_root`).
    let mut roots: Vec<String> = out
        .paths
        .iter()
        .find_map(|p| p.strip_suffix("init/main.c").map(str::to_string))
        .filter(|r| r.is_empty() || r.ends_with('/'))
        .into_iter()
        .collect();
    if let Some(abs) = main_dir
        .as_deref()
        .and_then(|m| absolute_root(m, absolute_dirs.iter().map(String::as_str)))
    {
        roots.push(abs);
    }
    if !roots.is_empty() {
        for p in &mut out.paths {
            resched.tick()?;
            // An empty root strips nothing but keeps the path as it is.
            *p = tree_relative(std::mem::take(p), &roots);
        }
    }
    Ok(Some(out))
}

/// The file-scope variables of every unit into `out.variables` (and the paths of units that
/// hold no code): each unit's top-level entries, their children skipped.
fn variables(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    out: &mut CuPaths,
    by_unit: &mut std::collections::HashMap<usize, u32>,
    info: Option<&[u8]>,
    resched: &mut Resched,
) -> Result<(), Stop> {
    // A pass of its own over `.debug_info`, leaving it behind as it goes.
    let mut behind = Behind {
        info,
        released: 0,
        ahead: Default::default(),
    };
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        resched.tick()?;
        let Some(off) = header.debug_info_offset() else {
            continue;
        };
        behind.passed(off.0, resched)?;
        let unit = dwarf.unit(header)?;
        // A unit's parse is a step (see `read`).
        resched.tick_step()?;
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        let mut children = root.children();
        let mut idx = by_unit.get(&off.0).copied();
        while let Some(child) = children.next()? {
            resched.tick()?;
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_variable {
                continue;
            }
            let Some(gimli::AttributeValue::Exprloc(expr)) = e.attr_value(gimli::DW_AT_location)
            else {
                continue;
            };
            let b = expr.0.slice();
            if b.len() != 9 || b[0] != gimli::DW_OP_addr.0 {
                continue;
            }
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[1..]);
            let i = match idx {
                Some(i) => i,
                None => {
                    let Some(name) = unit.name else { break };
                    let i = out.paths.len() as u32;
                    out.paths
                        .push(String::from_utf8_lossy(name.slice()).into_owned());
                    by_unit.insert(off.0, i);
                    idx = Some(i);
                    i
                }
            };
            out.variables.push((u64::from_le_bytes(a), i));
        }
    }
    klpsym_resched::bulk::sort_by_u64_key_with_points(&mut out.variables, |v| v.0, resched)
        .map_err(Stop::from)
}

/// The source tree's absolute prefix where the compiler mapped the tree's own units to a
/// relative path but left others absolute: Debian builds with `-ffile-prefix-map` (C units:
/// `init/main.c` in `debian/build/build_amd64_none_amd64`) while the assembler's units keep
/// `/build/reproducible-path/linux-6.1.192/arch/x86/entry/entry_64.S` in
/// `/build/reproducible-path/linux-6.1.192/debian/build/build_amd64_none_amd64`. The tree is
/// the absolute build directory without the relative one (`main_dir`, the directory of the
/// unit of `init/main.c`); an empty or `.` relative one is the tree itself. `None` when
/// `main_dir` is absolute (every path then shares it) or no absolute directory ends with it.
pub(crate) fn absolute_root<'a>(
    main_dir: &str,
    absolute_dirs: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    if main_dir.starts_with('/') {
        return None;
    }
    let rel = main_dir.trim_end_matches('/');
    let rel = rel.strip_prefix("./").unwrap_or(rel);
    absolute_dirs.into_iter().find_map(|d| {
        let d = d.trim_end_matches('/');
        let root = if rel.is_empty() || rel == "." {
            d
        } else {
            d.strip_suffix(rel)?.strip_suffix('/')?
        };
        root.starts_with('/').then(|| format!("{root}/"))
    })
}

/// `path` relative to the source tree: without the longest of `roots` it lies under (an
/// empty root strips nothing; none may leave it empty), else as it is.
pub(crate) fn tree_relative(path: String, roots: &[String]) -> String {
    match strip_tree(&path, roots) {
        Some(rel) => rel.to_string(),
        None => path,
    }
}

/// `path` without the longest non-empty of `roots` it lies under, when one leaves something.
pub(crate) fn strip_tree<'p>(path: &'p str, roots: &[String]) -> Option<&'p str> {
    roots
        .iter()
        .filter(|r| !r.is_empty())
        .filter_map(|r| path.strip_prefix(r.as_str()).filter(|rel| !rel.is_empty()))
        .min_by_key(|rel| rel.len())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assembler_s_absolute_path_is_made_relative_to_the_tree() {
        let debian_build =
            "/build/reproducible-path/linux-6.1.192/debian/build/build_amd64_none_amd64";
        let root = absolute_root("debian/build/build_amd64_none_amd64", [debian_build]);
        assert_eq!(
            root.as_deref(),
            Some("/build/reproducible-path/linux-6.1.192/")
        );
        let roots = vec![String::new(), root.unwrap()];
        assert_eq!(
            tree_relative(
                "/build/reproducible-path/linux-6.1.192/arch/x86/entry/entry_64.S".into(),
                &roots
            ),
            "arch/x86/entry/entry_64.S"
        );
        assert_eq!(tree_relative("init/main.c".into(), &roots), "init/main.c");
        // The longest root wins, whatever their order.
        let both = vec![
            "/build/".to_string(),
            "/build/reproducible-path/linux-6.1.192/".to_string(),
        ];
        assert_eq!(
            tree_relative(
                "/build/reproducible-path/linux-6.1.192/init/main.c".into(),
                &both
            ),
            "init/main.c"
        );
        // An in-tree build mapped to `.`: the absolute directory is the tree.
        assert_eq!(
            absolute_root(".", ["/src/linux"]).as_deref(),
            Some("/src/linux/")
        );
        // Unmapped: every unit shares the absolute root already.
        assert_eq!(absolute_root("/src/linux", ["/src/linux"]), None);
        // A directory that is not the build one: nothing.
        assert_eq!(absolute_root("debian/build/x", ["/elsewhere/y"]), None);
    }
}
