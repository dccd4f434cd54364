//! A walk of some units of a DWARF: the definition each entry leads to, the copies of the
//! definitions wanted, with their callers and call sites.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use gimli::AttributeValue;

use klpsym_resched::resched::{Cancelled, Resched};

use super::{CallerCode, CodeCopy, CopyPlace, FunctionCopies, Slice, Unit};
use crate::dwarf::DeclLine;

/// Why a walk stopped.
pub(super) enum Stop {
    Cancelled,
    /// Malformed DWARF: what gimli said.
    Dwarf(String),
}

impl From<gimli::Error> for Stop {
    fn from(e: gimli::Error) -> Self {
        Stop::Dwarf(e.to_string())
    }
}

impl From<Cancelled> for Stop {
    fn from(_: Cancelled) -> Self {
        Stop::Cancelled
    }
}

/// What a walk has read: units, the definitions entries lead to, names.
pub(super) struct Walk<'a, 'd> {
    pub(super) dwarf: &'a gimli::Dwarf<Slice<'d>>,
    /// The source tree prefix stripped from paths.
    roots: &'a [String],
    units: HashMap<u64, Rc<Unit<'d>>>,
    /// Every unit's offset, sorted (read when a reference crosses units).
    unit_starts: Option<Vec<u64>>,
    /// Entry (`.debug_info` offset) -> the definition it leads to.
    definitions: HashMap<u64, Option<u64>>,
    names: HashMap<u64, Option<String>>,
}

/// The offset in `.debug_info` of the entry an attribute refers to.
pub(super) fn reference(unit: &Unit<'_>, v: AttributeValue<Slice<'_>>) -> Option<u64> {
    match v {
        AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header).map(|o| o.0 as u64),
        AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
        _ => None,
    }
}

/// Where an entry's origin is: `DW_AT_abstract_origin`, else `DW_AT_specification`.
fn origin_of(unit: &Unit<'_>, e: &gimli::DebuggingInformationEntry<Slice<'_>>) -> Option<u64> {
    e.attr_value(gimli::DW_AT_abstract_origin)
        .or_else(|| e.attr_value(gimli::DW_AT_specification))
        .and_then(|v| reference(unit, v))
}

fn has_code(e: &gimli::DebuggingInformationEntry<Slice<'_>>) -> bool {
    e.attr_value(gimli::DW_AT_low_pc).is_some() || e.attr_value(gimli::DW_AT_ranges).is_some()
}

pub(super) fn unit_offset(unit: &Unit<'_>) -> u64 {
    unit.header
        .debug_info_offset()
        .map_or(u64::MAX, |o| o.0 as u64)
}

impl<'a, 'd> Walk<'a, 'd> {
    pub(super) fn new(dwarf: &'a gimli::Dwarf<Slice<'d>>, roots: &'a [String]) -> Walk<'a, 'd> {
        Walk {
            dwarf,
            roots,
            units: HashMap::new(),
            unit_starts: None,
            definitions: HashMap::new(),
            names: HashMap::new(),
        }
    }

    /// The unit at `off` (its header's offset), parsed once.
    pub(super) fn unit(&mut self, off: u64) -> Result<Rc<Unit<'d>>, Stop> {
        if let Some(u) = self.units.get(&off) {
            return Ok(Rc::clone(u));
        }
        let header = self
            .dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(off as usize))?;
        let unit = Rc::new(self.dwarf.unit(header)?);
        self.units.insert(off, Rc::clone(&unit));
        Ok(unit)
    }

    /// The unit holding the entry at `.debug_info` offset `at`.
    pub(super) fn unit_holding(&mut self, at: u64, rs: &mut Resched) -> Result<Rc<Unit<'d>>, Stop> {
        if self.unit_starts.is_none() {
            let mut starts = Vec::new();
            let mut headers = self.dwarf.units();
            while let Some(h) = headers.next()? {
                rs.tick()?;
                if let Some(o) = h.debug_info_offset() {
                    starts.push(o.0 as u64);
                }
            }
            self.unit_starts = Some(starts);
        }
        let starts = self.unit_starts.as_deref().unwrap_or_default();
        let i = starts.partition_point(|&s| s <= at);
        let Some(&start) = i.checked_sub(1).and_then(|i| starts.get(i)) else {
            return Err(gimli::Error::NoEntryAtGivenOffset(at).into());
        };
        self.unit(start)
    }

    /// The entry at `.debug_info` offset `at`, with its unit.
    fn entry_at(
        &mut self,
        at: u64,
        near: &Rc<Unit<'d>>,
        rs: &mut Resched,
    ) -> Result<(Rc<Unit<'d>>, gimli::DebuggingInformationEntry<Slice<'d>>), Stop> {
        let start = unit_offset(near);
        let unit = if at >= start && at < start + near.header.length_including_self() as u64 {
            Rc::clone(near)
        } else {
            self.unit_holding(at, rs)?
        };
        let o = gimli::DebugInfoOffset(at as usize)
            .to_unit_offset(&unit.header)
            .ok_or(gimli::Error::NoEntryAtGivenOffset(at))?;
        let e = unit.entry(o)?;
        Ok((unit, e))
    }

    /// The definition the entry at `at` (in `unit`, whose entry `e` is) leads to: the last
    /// entry of its chain of abstract origins and specifications. `None` for a chain that
    /// cannot be followed (a loop, more than 16 steps).
    fn definition(
        &mut self,
        unit: &Rc<Unit<'d>>,
        at: u64,
        e: &gimli::DebuggingInformationEntry<Slice<'d>>,
        rs: &mut Resched,
    ) -> Result<Option<u64>, Stop> {
        if let Some(&d) = self.definitions.get(&at) {
            return Ok(d);
        }
        let mut path = vec![at];
        let mut next = origin_of(unit, e);
        let mut cur_unit = Rc::clone(unit);
        let found = loop {
            let Some(to) = next else {
                break path.last().copied();
            };
            if let Some(&d) = self.definitions.get(&to) {
                break d;
            }
            if path.len() > 16 || path.contains(&to) {
                break None;
            }
            path.push(to);
            let (u, entry) = self.entry_at(to, &cur_unit, rs)?;
            next = origin_of(&u, &entry);
            cur_unit = u;
        };
        for p in path {
            self.definitions.insert(p, found);
        }
        Ok(found)
    }

    /// The name of the definition at `at` (`DW_AT_name`, or that of the entry it specifies).
    fn name_of(
        &mut self,
        at: u64,
        near: &Rc<Unit<'d>>,
        rs: &mut Resched,
    ) -> Result<Option<String>, Stop> {
        if let Some(n) = self.names.get(&at) {
            return Ok(n.clone());
        }
        let (mut unit, mut e) = self.entry_at(at, near, rs)?;
        let mut name = None;
        for _ in 0..4 {
            if let Some(v) = e.attr_value(gimli::DW_AT_name) {
                let s = self.dwarf.attr_string(&unit, v)?;
                name = Some(String::from_utf8_lossy(s.slice()).into_owned());
                break;
            }
            let Some(to) = origin_of(&unit, &e) else {
                break;
            };
            (unit, e) = self.entry_at(to, &unit, rs)?;
        }
        self.names.insert(at, name.clone());
        Ok(name)
    }

    /// The unit's source file, relative to the source tree.
    fn unit_path(&self, unit: &Unit<'_>) -> String {
        let name = unit
            .name
            .map(|n| String::from_utf8_lossy(n.slice()).into_owned())
            .unwrap_or_default();
        let full = match unit.comp_dir {
            Some(d) if !name.starts_with('/') && !d.is_empty() => {
                format!(
                    "{}/{name}",
                    String::from_utf8_lossy(d.slice()).trim_end_matches('/')
                )
            }
            _ => name.clone(),
        };
        match crate::dwarf::strip_tree(&full, self.roots) {
            Some(rel) => rel.to_string(),
            None => name,
        }
    }

    /// A path as the unit's line program names file `index`, relative to the source tree.
    fn file_path(&self, unit: &Unit<'d>, index: u64) -> Result<Option<String>, Stop> {
        let comp_dir = unit
            .comp_dir
            .map(|d| String::from_utf8_lossy(d.slice()).into_owned());
        let Some(f) = crate::dwarf::file_name(self.dwarf, unit, index, comp_dir.as_deref())
            .map_err(|_| Stop::Dwarf("a file name that does not read".to_string()))?
        else {
            return Ok(None);
        };
        Ok(Some(crate::dwarf::tree_relative(f, self.roots)))
    }

    /// The ranges of an entry with code, empty ones and those at address 0 (code the linker
    /// discarded) left out.
    fn ranges(
        &self,
        unit: &Unit<'d>,
        e: &gimli::DebuggingInformationEntry<Slice<'d>>,
        rs: &mut Resched,
    ) -> Result<Vec<(u64, u64)>, Stop> {
        let mut out = Vec::new();
        let mut it = self.dwarf.die_ranges(unit, e)?;
        while let Some(r) = it.next()? {
            rs.tick()?;
            if r.begin != 0 && r.end > r.begin {
                out.push((r.begin, r.end));
            }
        }
        Ok(out)
    }

    /// The entry of a copy: `DW_AT_entry_pc` when an address, else `DW_AT_low_pc`, else the
    /// start of its first range.
    fn entry_pc(
        &self,
        unit: &Unit<'d>,
        e: &gimli::DebuggingInformationEntry<Slice<'d>>,
        ranges: &[(u64, u64)],
    ) -> Option<u64> {
        for at in [gimli::DW_AT_entry_pc, gimli::DW_AT_low_pc] {
            if let Some(v) = e.attr_value(at) {
                if let Ok(Some(a)) = self.dwarf.attr_address(unit, v) {
                    if a != 0 {
                        return Some(a);
                    }
                }
            }
        }
        ranges.first().map(|r| r.0)
    }

    /// The definition whose out-of-line code starts at `addr` in unit `unit_off`: a
    /// `DW_TAG_subprogram` with code one of whose ranges starts there.
    pub(super) fn definition_at(
        &mut self,
        unit_off: u64,
        addr: u64,
        rs: &mut Resched,
    ) -> Result<Option<(u64, u64)>, Stop> {
        let unit = self.unit(unit_off)?;
        let mut cursor = unit.entries();
        while let Some(e) = cursor.next_dfs()? {
            rs.tick()?;
            if e.tag() != gimli::DW_TAG_subprogram || !has_code(e) {
                continue;
            }
            let e = e.clone();
            let ranges = self.ranges(&unit, &e, rs)?;
            if !ranges.iter().any(|r| r.0 == addr) {
                continue;
            }
            let at = e
                .offset()
                .to_debug_info_offset(&unit.header)
                .map_or(0, |o| o.0 as u64);
            return Ok(self.definition(&unit, at, &e, rs)?.map(|d| (at, d)));
        }
        Ok(None)
    }

    /// The named definitions of unit `unit_off` called `name`: (the entry that names it, the
    /// definition it leads to).
    pub(super) fn definitions_named(
        &mut self,
        unit_off: u64,
        name: &str,
        rs: &mut Resched,
    ) -> Result<Vec<(u64, u64)>, Stop> {
        let unit = self.unit(unit_off)?;
        let mut out = Vec::new();
        // Declarations of that name (a prototype, another file's function): a definition
        // that specifies one (a prior prototype of a static function) is named by it.
        let mut declared: Vec<u64> = Vec::new();
        let mut cursor = unit.entries();
        while let Some(e) = cursor.next_dfs()? {
            rs.tick()?;
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let named = match e.attr_value(gimli::DW_AT_name) {
                Some(v) => self.dwarf.attr_string(&unit, v)?.slice() == name.as_bytes(),
                None => false,
            };
            let at = e
                .offset()
                .to_debug_info_offset(&unit.header)
                .map_or(0, |o| o.0 as u64);
            if named && e.attr_value(gimli::DW_AT_declaration).is_some() {
                declared.push(at);
                continue;
            }
            if !named && !origin_of(&unit, e).is_some_and(|o| declared.contains(&o)) {
                continue;
            }
            if let Some(d) = self.definition(&unit, at, e, rs)? {
                if !out.iter().any(|x: &(u64, u64)| x.1 == d) {
                    out.push((at, d));
                }
            }
        }
        Ok(out)
    }

    /// Every copy with code in unit `unit_off` of the definitions `wanted`, into `out`.
    pub(super) fn collect(
        &mut self,
        unit_off: u64,
        wanted: &HashSet<u64>,
        out: &mut BTreeMap<u64, Vec<CodeCopy>>,
        rs: &mut Resched,
    ) -> Result<(), Stop> {
        let unit = self.unit(unit_off)?;
        let mut stack: Vec<Frame> = Vec::new();
        let mut cursor = unit.entries();
        while let Some(e) = cursor.next_dfs()? {
            rs.tick()?;
            let depth = e.depth();
            while stack.last().is_some_and(|f| f.depth >= depth) {
                stack.pop();
            }
            let tag = e.tag();
            if tag != gimli::DW_TAG_subprogram && tag != gimli::DW_TAG_inlined_subroutine {
                continue;
            }
            let e = e.clone();
            let at = e
                .offset()
                .to_debug_info_offset(&unit.header)
                .map_or(0, |o| o.0 as u64);
            let code = has_code(&e);
            let def = if code || origin_of(&unit, &e).is_some() {
                self.definition(&unit, at, &e, rs)?
            } else {
                Some(at)
            };
            let mut frame = Frame {
                depth,
                code: None,
                inlined: None,
            };
            if code {
                let ranges = self.ranges(&unit, &e, rs)?;
                let entry = self.entry_pc(&unit, &e, &ranges);
                if tag == gimli::DW_TAG_subprogram {
                    frame.code = entry.map(|a| (a, def));
                } else {
                    frame.inlined = def;
                }
                match (def, entry) {
                    (Some(d), Some(entry)) if wanted.contains(&d) => {
                        let copy = if tag == gimli::DW_TAG_subprogram {
                            CodeCopy {
                                place: CopyPlace::OutOfLine,
                                entry,
                                ranges,
                                caller: None,
                                through: Vec::new(),
                                call_site: None,
                            }
                        } else {
                            self.inlined_copy(&unit, &e, entry, ranges, &stack, rs)?
                        };
                        out.entry(d).or_default().push(copy);
                    }
                    _ => {}
                }
            }
            if e.has_children() {
                stack.push(frame);
            }
        }
        Ok(())
    }

    /// An inlined copy: its caller (the innermost function with code around it), the inlined
    /// functions between, its call site.
    fn inlined_copy(
        &mut self,
        unit: &Rc<Unit<'d>>,
        e: &gimli::DebuggingInformationEntry<Slice<'d>>,
        entry: u64,
        ranges: Vec<(u64, u64)>,
        stack: &[Frame],
        rs: &mut Resched,
    ) -> Result<CodeCopy, Stop> {
        let mut through = Vec::new();
        let mut caller = None;
        for f in stack.iter().rev() {
            if let Some((entry, def)) = f.code {
                let name = match def {
                    Some(d) => self.name_of(d, unit, rs)?,
                    None => None,
                };
                caller = Some(CallerCode { entry, name });
                break;
            }
            if let Some(d) = f.inlined {
                if let Some(n) = self.name_of(d, unit, rs)? {
                    through.push(n);
                }
            }
        }
        let call_site = match (
            e.attr_value(gimli::DW_AT_call_file),
            e.attr_value(gimli::DW_AT_call_line),
        ) {
            (Some(f), Some(l)) => {
                let index = match f {
                    AttributeValue::FileIndex(i) => Some(i),
                    AttributeValue::Udata(i) => Some(i),
                    AttributeValue::Data1(i) => Some(u64::from(i)),
                    AttributeValue::Data2(i) => Some(u64::from(i)),
                    AttributeValue::Data4(i) => Some(u64::from(i)),
                    _ => None,
                };
                let line = l.udata_value();
                match (index, line) {
                    (Some(i), Some(line)) => {
                        self.file_path(unit, i)?.map(|file| DeclLine { file, line })
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        Ok(CodeCopy {
            place: CopyPlace::Inlined,
            entry,
            ranges,
            caller,
            through,
            call_site,
        })
    }

    /// The function at definition `def` (named by the entry at `named`), with its copies.
    pub(super) fn function(
        &mut self,
        def: u64,
        named: u64,
        copies: Vec<CodeCopy>,
        rs: &mut Resched,
    ) -> Result<FunctionCopies, Stop> {
        let (unit, e) = {
            let any = self.unit_holding(def, rs)?;
            self.entry_at(named, &any, rs)?
        };
        let name = self.name_of(def, &unit, rs)?.unwrap_or_default();
        let comp_dir = unit
            .comp_dir
            .map(|d| String::from_utf8_lossy(d.slice()).into_owned());
        let decl = crate::dwarf::declaration(self.dwarf, &unit, e, comp_dir.as_deref())
            .ok()
            .flatten()
            .map(|d| DeclLine {
                file: crate::dwarf::tree_relative(d.file, self.roots),
                line: d.line,
            });
        let def_unit = self.unit_holding(def, rs)?;
        let mut copies = copies;
        copies.sort_by_key(|c| (c.place == CopyPlace::Inlined, c.entry));
        copies.dedup();
        Ok(FunctionCopies {
            name,
            unit: self.unit_path(&def_unit),
            decl,
            definition: def,
            copies,
            incomplete: Vec::new(),
        })
    }
}

/// An open entry a walk is inside of.
struct Frame {
    depth: isize,
    /// A function with code: its entry and definition.
    code: Option<(u64, Option<u64>)>,
    /// An inlined copy's definition.
    inlined: Option<u64>,
}
