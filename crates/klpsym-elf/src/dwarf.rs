//! Source files of a vmlinux's code from its DWARF: `.debug_aranges` maps an address to its
//! compilation unit, whose `DW_AT_name` is the source path (`fs/inode.c` and
//! `fs/proc/inode.c` both define a static `init_once`: their STT_FILE entries both say
//! `inode.c`, their compilation units tell them apart).
//!
//! Only the compilation units' root entries are read (one per unit that owns a range), never
//! the whole `.debug_info`; malformed DWARF gives no paths (and a note), never an error.

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};

use klpsym_core::resched::{Cancelled, Resched};

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
    let Ok(file) = object::File::parse(data) else {
        return Ok(None);
    };
    if file.section_by_name(".debug_aranges").is_none() || file.is_little_endian().eq(&false) {
        return Ok(None);
    }
    let load = |id: gimli::SectionId| -> Result<Slice<'_>, gimli::Error> {
        let d = file
            .section_by_name(id.name())
            .and_then(|s| s.data().ok())
            .unwrap_or(&[]);
        Ok(EndianSlice::new(d, LittleEndian))
    };
    let Ok(dwarf) = gimli::Dwarf::load(load) else {
        return Ok(None);
    };
    match read(&dwarf, resched) {
        Ok(r) => Ok(r),
        Err(Stop::Cancelled) => Err(Cancelled),
        Err(Stop::Dwarf) => Ok(None),
    }
}

enum Stop {
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

fn read(dwarf: &gimli::Dwarf<Slice<'_>>, resched: &mut Resched) -> Result<Option<CuPaths>, Stop> {
    let mut out = CuPaths::default();
    let mut by_unit: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next()? {
        resched.tick()?;
        let unit_offset = h.debug_info_offset();
        let idx = match by_unit.get(&unit_offset.0) {
            Some(&i) => i,
            None => {
                let header = dwarf.debug_info.header_from_offset(unit_offset)?;
                let unit = dwarf.unit(header)?;
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
    klpsym_core::bulk::sort_by_u64_key_with_points(&mut out.ranges, |r| r.0, resched)?;
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
