//! Every place a function's code lives, from DWARF: its out-of-line copies (the symbol a
//! livepatch binds, and the compiler's clones of it: `.isra.N`, `.constprop.N`, `.part.N`,
//! whose `DW_TAG_subprogram` has the function as its abstract origin) and each instance
//! inlined into another function (`DW_TAG_inlined_subroutine`), with the function whose
//! out-of-line code holds it, the call site and the address ranges.
//!
//! A function is one DWARF definition: the entry every copy reaches through
//! `DW_AT_abstract_origin` and `DW_AT_specification` (within its unit, or across units with
//! `DW_FORM_ref_addr`, as LTO writes). Two static functions of one name in two files are two
//! definitions, never mixed up.
//!
//! Only the units that can hold a function's copies are read: the unit of its code (from
//! `.debug_aranges`) and, when the DWARF refers across units at all (a linear scan of
//! `.debug_abbrev` tells), the units an index ([`CopiesIndex`], one walk of everything, made
//! once and kept by the caller) says refer to it. Malformed DWARF is reported, never an
//! error.

use std::collections::{BTreeMap, HashSet};

use gimli::{EndianSlice, LittleEndian, Reader, Section};
use serde::Serialize;

use klpsym_resched::resched::{Cancelled, Resched};

use crate::dwarf::DeclLine;
use crate::source_lines::DebugLines;

mod index;
mod walk;

use index::index_all;
pub use index::CopiesIndex;
use walk::{unit_offset, Stop, Walk};

type Slice<'a> = EndianSlice<'a, LittleEndian>;
type Unit<'a> = gimli::Unit<Slice<'a>>;

/// Where a copy of a function's code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyPlace {
    /// A function of its own (a `DW_TAG_subprogram` with code): the out-of-line copy, or a
    /// clone the compiler made of it.
    OutOfLine,
    /// Inlined into another function (a `DW_TAG_inlined_subroutine` with code).
    Inlined,
}

/// The function whose out-of-line code holds an inlined copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallerCode {
    /// Its entry: where its symbol is.
    pub entry: u64,
    /// Its DWARF name (through its abstract origin), when DWARF names it.
    pub name: Option<String>,
}

/// One place a function's code lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeCopy {
    /// Out of line or inlined.
    pub place: CopyPlace,
    /// Its entry (`DW_AT_entry_pc` of an inlined copy, else the start of its first range).
    pub entry: u64,
    /// Its address ranges, `[start, end)`, in the order DWARF lists them (a function split
    /// into a hot and a `.cold` part has two).
    pub ranges: Vec<(u64, u64)>,
    /// An inlined copy: the function whose out-of-line code holds it.
    pub caller: Option<CallerCode>,
    /// An inlined copy inlined into other inlined functions: their names, innermost first
    /// (the copy is in `through[0]`, inlined into ... `caller`).
    pub through: Vec<String>,
    /// An inlined copy: its call site (`DW_AT_call_file`, `DW_AT_call_line`), the file
    /// relative to the source tree.
    pub call_site: Option<DeclLine>,
}

/// A function as DWARF defines it, and every place its code lives.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionCopies {
    /// Its name (`DW_AT_name`).
    pub name: String,
    /// Its compilation unit's source file, relative to the source tree.
    pub unit: String,
    /// Where it is declared (`DW_AT_decl_file`: the unit's file, or a header for a `static
    /// inline` function).
    pub decl: Option<DeclLine>,
    /// The `.debug_info` offset of the entry every copy reaches: the definition's identity
    /// within this DWARF.
    pub definition: u64,
    /// Every copy, out-of-line ones first, each in address order.
    pub copies: Vec<CodeCopy>,
    /// What could not be read (a unit that does not parse, a reference that cannot be
    /// followed): the list may then miss copies.
    pub incomplete: Vec<String>,
}

/// The unit whose code holds `addr`: from `.debug_aranges`, else from each unit's ranges.
fn unit_at(walk: &mut Walk<'_, '_>, addr: u64, rs: &mut Resched) -> Result<Option<u64>, Stop> {
    let dwarf = walk.dwarf;
    let mut any = false;
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next()? {
        rs.tick()?;
        any = true;
        let mut entries = h.entries();
        while let Some(e) = entries.next()? {
            rs.tick()?;
            if addr >= e.address() && addr < e.address().saturating_add(e.length()) {
                return Ok(Some(h.debug_info_offset().0 as u64));
            }
        }
    }
    if any {
        return Ok(None);
    }
    // No `.debug_aranges` (clang writes none by default): each unit's own ranges.
    let mut headers = dwarf.units();
    while let Some(h) = headers.next()? {
        rs.tick()?;
        let Some(off) = h.debug_info_offset() else {
            continue;
        };
        let unit = walk.unit(off.0 as u64)?;
        let mut ranges = dwarf.unit_ranges(&unit)?;
        while let Some(r) = ranges.next()? {
            rs.tick()?;
            if addr >= r.begin && addr < r.end {
                return Ok(Some(off.0 as u64));
            }
        }
    }
    Ok(None)
}

/// True when some abbreviation of `.debug_abbrev` gives an abstract origin or a
/// specification in a form that can refer to another unit (`DW_FORM_ref_addr`, a
/// supplementary file's): a linear scan of the abbreviations, no `.debug_info` read.
fn refers_across_units(abbrev: Slice<'_>, rs: &mut Resched) -> Result<bool, Stop> {
    let mut r = abbrev;
    while !r.is_empty() {
        rs.tick()?;
        // A table ends with code 0 (and tables lie back to back).
        if r.read_uleb128()? == 0 {
            continue;
        }
        r.read_uleb128()?;
        r.read_u8()?;
        loop {
            let (name, form) = (r.read_uleb128()?, r.read_uleb128()?);
            if name == 0 && form == 0 {
                break;
            }
            let form = gimli::DwForm(form as u16);
            if form == gimli::DW_FORM_implicit_const {
                r.read_sleb128()?;
            }
            let name = gimli::DwAt(name as u16);
            if (name == gimli::DW_AT_abstract_origin || name == gimli::DW_AT_specification)
                && matches!(
                    form,
                    gimli::DW_FORM_ref_addr
                        | gimli::DW_FORM_GNU_ref_alt
                        | gimli::DW_FORM_ref_sup4
                        | gimli::DW_FORM_ref_sup8
                )
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The note a walk leaves for malformed DWARF.
fn malformed(e: String) -> String {
    format!("malformed DWARF: {e}")
}

impl DebugLines {
    /// True when this DWARF's entries may refer to entries of other units (LTO's
    /// `DW_FORM_ref_addr`): then [`DebugLines::copies_at`] needs a [`CopiesIndex`] to find
    /// copies in other units. A scan of `.debug_abbrev` alone.
    pub fn refers_across_units(&self, rs: &mut Resched) -> Result<bool, Cancelled> {
        if let Some(&a) = self.across_units.get() {
            return Ok(a);
        }
        let r = self.with_dwarf(|d| refers_across_units(*d.debug_abbrev.reader(), rs));
        let across = match r {
            Some(Err(Stop::Cancelled)) => return Err(Cancelled),
            Some(Ok(true)) => true,
            // Malformed abbreviations: the walks will say so.
            _ => false,
        };
        Ok(*self.across_units.get_or_init(|| across))
    }

    /// The function whose out-of-line code starts at `addr` (an address of this DWARF: a
    /// vmlinux's link address, a module's placed one, see [`DebugLines::place`]) with every
    /// copy of it. `index`: needed when [`DebugLines::refers_across_units`] (else the answer
    /// says it may be incomplete). `Ok(None)` where DWARF has no function starting there.
    pub fn copies_at(
        &self,
        addr: u64,
        index: Option<&CopiesIndex>,
        rs: &mut Resched,
    ) -> Result<Option<FunctionCopies>, Cancelled> {
        let across = self.refers_across_units(rs)?;
        let roots = self.roots();
        let r = self.with_dwarf(|dwarf| -> Result<Option<FunctionCopies>, Stop> {
            let mut walk = Walk::new(dwarf, roots);
            let Some(unit) = unit_at(&mut walk, addr, rs)? else {
                return Ok(None);
            };
            let Some((named, def)) = walk.definition_at(unit, addr, rs)? else {
                return Ok(None);
            };
            let mut found = gather(&mut walk, &[(named, def)], unit, across, index, rs)?;
            Ok(found.pop())
        });
        match r {
            None => Ok(None),
            Some(Ok(f)) => Ok(f),
            Some(Err(Stop::Cancelled)) => Err(Cancelled),
            Some(Err(Stop::Dwarf(e))) => Ok(Some(FunctionCopies {
                name: String::new(),
                unit: String::new(),
                decl: None,
                definition: 0,
                copies: Vec::new(),
                incomplete: vec![malformed(e)],
            })),
        }
    }

    /// Every function DWARF defines under `name` (a static function of that name in each file
    /// that has one; an inline function of a header in each unit that uses it), each with every
    /// copy of it. `index` names the units to read; without one every unit is read (a
    /// module's few; a whole vmlinux's is slow: make an index once).
    pub fn copies_named(
        &self,
        name: &str,
        index: Option<&CopiesIndex>,
        rs: &mut Resched,
    ) -> Result<Vec<FunctionCopies>, Cancelled> {
        let across = self.refers_across_units(rs)?;
        let roots = self.roots();
        let r = self.with_dwarf(|dwarf| -> Result<Vec<FunctionCopies>, Stop> {
            let mut walk = Walk::new(dwarf, roots);
            let units: Vec<u64> = match index {
                Some(i) => i.units_of(name).to_vec(),
                None => {
                    let mut all = Vec::new();
                    let mut headers = dwarf.units();
                    while let Some(h) = headers.next()? {
                        rs.tick()?;
                        if let Some(o) = h.debug_info_offset() {
                            all.push(o.0 as u64);
                        }
                    }
                    all
                }
            };
            let mut out = Vec::new();
            let mut done: HashSet<u64> = HashSet::new();
            for u in units {
                let defs: Vec<(u64, u64)> = walk
                    .definitions_named(u, name, rs)?
                    .into_iter()
                    .filter(|d| done.insert(d.1))
                    .collect();
                if !defs.is_empty() {
                    out.extend(gather(&mut walk, &defs, u, across, index, rs)?);
                }
            }
            out.sort_by(|a, b| (&a.unit, a.definition).cmp(&(&b.unit, b.definition)));
            Ok(out)
        });
        match r {
            None => Ok(Vec::new()),
            Some(Ok(f)) => Ok(f),
            Some(Err(Stop::Cancelled)) => Err(Cancelled),
            Some(Err(Stop::Dwarf(e))) => Ok(vec![FunctionCopies {
                name: name.to_string(),
                unit: String::new(),
                decl: None,
                definition: 0,
                copies: Vec::new(),
                incomplete: vec![malformed(e)],
            }]),
        }
    }

    /// The index of every unit's named functions and references to other units: one walk of
    /// all of `.debug_info` (seconds for a distribution's vmlinux), for the caller to keep.
    /// Malformed units are left out (their functions are then not found by name).
    pub fn copies_index(&self, rs: &mut Resched) -> Result<CopiesIndex, Cancelled> {
        let mapped = self.mapped_info();
        let r = self.with_dwarf(|dwarf| index_all(dwarf, mapped, rs));
        match r {
            None => Ok(CopiesIndex::default()),
            Some(r) => r,
        }
    }
}

/// The copies of the definitions `defs` ((entry naming it, definition)), found in unit
/// `unit`: read there, in the definitions' own units, and in the units that refer to those.
fn gather(
    walk: &mut Walk<'_, '_>,
    defs: &[(u64, u64)],
    unit: u64,
    across: bool,
    index: Option<&CopiesIndex>,
    rs: &mut Resched,
) -> Result<Vec<FunctionCopies>, Stop> {
    let mut units = vec![unit];
    for &(_, d) in defs {
        let held = walk.unit_holding(d, rs)?;
        let du = unit_offset(&held);
        if !units.contains(&du) {
            units.push(du);
        }
    }
    let mut incomplete = Vec::new();
    if across {
        match index {
            Some(i) => {
                for u in units.clone() {
                    for r in i.referring_to(u) {
                        rs.tick()?;
                        if !units.contains(&r) {
                            units.push(r);
                        }
                    }
                }
            }
            None => incomplete.push(
                "this DWARF refers across units and no index of it was given: copies in other units are not listed".to_string(),
            ),
        }
    }
    let wanted: HashSet<u64> = defs.iter().map(|d| d.1).collect();
    let mut copies: BTreeMap<u64, Vec<CodeCopy>> = BTreeMap::new();
    for &u in &units {
        match walk.collect(u, &wanted, &mut copies, rs) {
            Ok(()) => {}
            Err(Stop::Dwarf(e)) => incomplete.push(format!("unit at {u:#x}: {}", malformed(e))),
            Err(Stop::Cancelled) => return Err(Stop::Cancelled),
        }
    }
    let mut out = Vec::new();
    for &(named, d) in defs {
        let mut f = walk.function(d, named, copies.remove(&d).unwrap_or_default(), rs)?;
        f.incomplete = incomplete.clone();
        out.push(f);
    }
    Ok(out)
}
