//! Finding `struct klp_patch` in a module and following it to its objects and functions.
//!
//! In a `.ko`, every pointer field of those tables is zero in the section bytes and carried by
//! a relocation (RELA) at the field's offset, so pointers are followed through the module's
//! own relocation sections; plain integers (`old_sympos`) are read from the bytes.
//!
//! Which data object is the patch? Two heuristics, the first confirmed by the second:
//! 1. **init call**: the module's `init_module` calls `klp_enable_patch(&patch)`; the last
//!    relocation in `init_module` before the call's relocation that points into a data section
//!    is taken as `&patch` (x86 `mov $patch,%rdi` = R_X86_64_32S, or `lea` = PC32 with
//!    addend -4; arm64 `adrp`+`add`).
//! 2. **layout**: `klp_patch.mod` is `THIS_MODULE`, so the patch is where a relocation against
//!    `__this_module` sits at offset 0 and a pointer relocation at `patch_objs`.
//!
//! When (1) finds a candidate confirmed by (2), the result is `certain`; when only (2)
//! matches, the first match is used and `certain` is false when there were several.

use std::collections::{BTreeMap, HashMap};

use crate::consts as elf;
use serde::Serialize;

use klpsym_core::resched::{Cancelled, Resched};

use crate::elf::{ElfObject, ElfRela};
use crate::layouts::StructLayouts;

/// A pointer field of the patch tables, as the module's relocations describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pointer {
    /// Zero bytes and no relocation: NULL.
    Null,
    /// Into one of the module's own sections.
    Local {
        /// Section index.
        section: u32,
        /// Offset in the section (S + A).
        offset: u64,
        /// The symbol the relocation names (a section symbol shows as the section name).
        symbol: String,
    },
    /// Against an undefined symbol.
    External {
        /// Symbol name.
        symbol: String,
        /// Addend.
        addend: i64,
    },
    /// Nonzero bytes without a relocation.
    Raw(u64),
}

/// One `struct klp_func` as the module describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KlpFuncDesc {
    /// `old_name`, when it points at a readable string.
    pub old_name: Option<String>,
    /// `new_func`.
    pub new_func: Pointer,
    /// The function symbol `new_func` points at, when there is one.
    pub new_func_symbol: Option<String>,
    /// `old_sympos`.
    pub old_sympos: u64,
    /// Where the entry sits: (section, offset).
    pub at: (u32, u64),
}

/// One `struct klp_object`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KlpObjectDesc {
    /// `name`: `None` for vmlinux (NULL).
    pub name: Option<String>,
    /// The functions, in array order.
    pub funcs: Vec<KlpFuncDesc>,
    /// `funcs` was NULL (klp_enable_patch returns -EINVAL).
    pub funcs_null: bool,
    /// Where the entry sits: (section, offset).
    pub at: (u32, u64),
}

impl KlpObjectDesc {
    /// The object name as the kernel compares it (`vmlinux` for NULL).
    pub fn object_name(&self) -> &str {
        self.name.as_deref().unwrap_or("vmlinux")
    }
}

/// How the patch was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    /// The argument of `klp_enable_patch()` in `init_module`, confirmed by the layout.
    InitCall,
    /// A data object that looks like a klp_patch (`mod = THIS_MODULE`, `objs` set).
    Layout,
    /// The layout the kernel's klp-build emits (6.19+): no klp_patch in the module; its
    /// `.init.klp_objects` and `.init.klp_funcs` sections describe the patch, and a generic
    /// init (scripts/livepatch/init.c) builds it at load time.
    KlpBuild,
}

/// The patch description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatchDesc {
    /// Where `struct klp_patch` sits: (section, offset).
    pub at: (u32, u64),
    /// How it was found.
    pub discovery: Discovery,
    /// False when the heuristics had to guess between several candidates.
    pub certain: bool,
    /// The objects, in array order.
    pub objects: Vec<KlpObjectDesc>,
    /// The layouts used.
    pub layouts: StructLayouts,
    /// Remarks: layout mismatches, guesses.
    pub notes: Vec<String>,
}

/// Pointer-sized relocations of the module's ordinary relocation sections, by (target
/// section, offset): ordered, so the relocations of a range are found without a walk over
/// all of them. Only sections the module loader relocates: those applying to an SHF_ALLOC
/// section (apply_relocations skips the rest). A module built with debug info has most of
/// its relocations in `.rela.debug_*` (6,830 of 7,258 in the lab's patches), which no
/// structure of the patch lies in.
pub(crate) struct RelocMap<'a> {
    map: BTreeMap<(u32, u64), &'a ElfRela>,
}

impl<'a> RelocMap<'a> {
    pub(crate) fn new(
        obj: &'a ElfObject<'_>,
        is_klp: impl Fn(u32) -> bool,
        resched: &mut Resched,
    ) -> Result<Self, Cancelled> {
        let mut map = BTreeMap::new();
        for s in &obj.sections {
            resched.tick()?;
            let allocated = obj
                .sections
                .get(s.info as usize)
                .is_some_and(|t| t.flags & elf::SHF_ALLOC != 0);
            if s.sh_type != elf::SHT_RELA || !allocated || is_klp(s.index) {
                continue;
            }
            for r in &obj.relas[s.index as usize] {
                map.entry((s.info, r.offset)).or_insert(r);
                resched.tick()?;
            }
        }
        Ok(RelocMap { map })
    }

    /// Frees the map node by node, a tick each (tens of thousands of relocations are
    /// thousands of nodes).
    pub(crate) fn drop_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        for _ in self.map {
            resched.tick()?;
        }
        Ok(())
    }

    fn get(&self, section: u32, offset: u64) -> Option<&'a ElfRela> {
        self.map.get(&(section, offset)).copied()
    }

    /// The relocations at offsets `start..end` of `section`, in offset order.
    fn in_range(
        &self,
        section: u32,
        start: u64,
        end: u64,
    ) -> impl Iterator<Item = &'a ElfRela> + '_ {
        let range = (start < end).then_some((section, start)..(section, end));
        range
            .into_iter()
            .flat_map(|r| self.map.range(r))
            .map(|(_, r)| *r)
    }
}

/// Function symbols by (section, value), the first of each place (what a walk in symbol order
/// finds first).
struct Functions<'a> {
    at: HashMap<(u32, u64), &'a str>,
}

impl<'a> Functions<'a> {
    fn new(obj: &'a ElfObject<'_>, resched: &mut Resched) -> Result<Self, Cancelled> {
        // Sized once: growing rehashes every entry in one go.
        let mut at = HashMap::with_capacity(obj.symbols.len());
        for s in &obj.symbols {
            resched.tick()?;
            if s.kind() == elf::STT_FUNC {
                at.entry((u32::from(s.shndx), s.value))
                    .or_insert(s.name.as_str());
            }
        }
        Ok(Functions { at })
    }

    fn at(&self, section: u32, offset: u64) -> Option<String> {
        self.at.get(&(section, offset)).map(|n| (*n).to_string())
    }
}

fn read_u64(obj: &ElfObject<'_>, section: u32, offset: u64) -> Option<u64> {
    let b = obj.read_bytes(section, offset, 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn symbol_label(obj: &ElfObject<'_>, sym: u32) -> String {
    let s = &obj.symbols[sym as usize];
    if s.kind() == elf::STT_SECTION {
        obj.sections
            .get(s.shndx as usize)
            .map_or_else(String::new, |x| x.name.clone())
    } else {
        s.name.clone()
    }
}

fn pointer_at(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    section: u32,
    offset: u64,
) -> Option<Pointer> {
    if let Some(r) = relocs.get(section, offset) {
        let s = &obj.symbols[r.sym as usize];
        let label = symbol_label(obj, r.sym);
        if s.in_section() {
            return Some(Pointer::Local {
                section: u32::from(s.shndx),
                offset: s.value.wrapping_add(r.addend as u64),
                symbol: label,
            });
        }
        return Some(Pointer::External {
            symbol: label,
            addend: r.addend,
        });
    }
    let v = read_u64(obj, section, offset)?;
    Some(if v == 0 {
        Pointer::Null
    } else {
        Pointer::Raw(v)
    })
}

/// Candidate patch locations by the init-call heuristic.
fn init_call_candidate(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    resched: &mut Resched,
) -> Result<Option<(u32, u64)>, Cancelled> {
    let mut init = None;
    for s in &obj.symbols {
        resched.tick()?;
        if s.name == "init_module" && s.in_section() && s.kind() == elf::STT_FUNC {
            init = Some(s);
            break;
        }
    }
    let Some(init) = init else { return Ok(None) };
    let sec = u32::from(init.shndx);
    let end = init.value.saturating_add(init.size.max(1));
    // In offset order (the map is ordered), up to the call.
    let mut before_call: Vec<&ElfRela> = Vec::new();
    let mut called = false;
    for r in relocs.in_range(sec, init.value, end) {
        resched.tick()?;
        if obj.symbols[r.sym as usize].name == "klp_enable_patch" {
            called = true;
            break;
        }
        before_call.push(r);
    }
    if !called {
        return Ok(None);
    }
    let mut found = None;
    for r in before_call.iter().rev() {
        resched.tick()?;
        found = patch_reference(obj, r);
        if found.is_some() {
            break;
        }
    }
    Ok(found)
}

/// Where `r` (a relocation in `init_module`) points, when into a data section.
fn patch_reference(obj: &ElfObject<'_>, r: &ElfRela) -> Option<(u32, u64)> {
    {
        let s = &obj.symbols[r.sym as usize];
        if !s.in_section() {
            return None;
        }
        let target_sec = obj.sections.get(s.shndx as usize)?;
        if target_sec.flags & elf::SHF_EXECINSTR != 0 {
            return None;
        }
        // x86 RIP-relative: the reference is to S + A + 4 (the displacement ends the insn).
        let pcrel = matches!(r.r_type, elf::R_X86_64_PC32 | elf::R_X86_64_PLT32)
            && obj.machine == elf::EM_X86_64;
        let fix = if pcrel { 4 } else { 0 };
        Some((
            u32::from(s.shndx),
            s.value.wrapping_add(r.addend as u64).wrapping_add(fix),
        ))
    }
}

/// Candidate patch locations by the layout heuristic.
fn layout_candidates(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    l: &StructLayouts,
    resched: &mut Resched,
) -> Result<Vec<(u32, u64)>, Cancelled> {
    // In (section, offset) order: the map is ordered.
    let mut out: Vec<(u32, u64)> = Vec::new();
    for (&(sec, off), r) in &relocs.map {
        resched.tick()?;
        let this_module = obj.symbols[r.sym as usize].name == "__this_module"
            && obj
                .sections
                .get(sec as usize)
                .is_some_and(|s| s.name != ".gnu.linkonce.this_module");
        if this_module
            && matches!(
                pointer_at(obj, relocs, sec, off.wrapping_add(l.patch_objs)),
                Some(Pointer::Local { .. })
            )
        {
            out.push((sec, off));
        }
    }
    Ok(out)
}

/// Why the patch description was not read: the module's tables (the message), or a cancelled
/// reschedule point.
enum ReadError {
    Tables(String),
    Cancelled(Cancelled),
}

impl From<String> for ReadError {
    fn from(s: String) -> Self {
        ReadError::Tables(s)
    }
}

impl From<Cancelled> for ReadError {
    fn from(c: Cancelled) -> Self {
        ReadError::Cancelled(c)
    }
}

/// Finds and reads the patch description, or explains why not (the inner error).
pub(crate) fn read_patch(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    l: &StructLayouts,
    resched: &mut Resched,
) -> Result<Result<PatchDesc, String>, Cancelled> {
    let read = match obj.section_by_name(KLP_OBJECTS_SEC) {
        Some(sec) => read_klp_build(obj, relocs, sec.index, l, resched),
        None => read_patch_inner(obj, relocs, l, resched),
    };
    match read {
        Ok(p) => Ok(Ok(p)),
        Err(ReadError::Tables(s)) => Ok(Err(s)),
        Err(ReadError::Cancelled(c)) => Err(c),
    }
}

fn read_patch_inner(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    l: &StructLayouts,
    resched: &mut Resched,
) -> Result<PatchDesc, ReadError> {
    let layout = layout_candidates(obj, relocs, l, resched)?;
    let mut notes = Vec::new();
    let init_call = init_call_candidate(obj, relocs, resched)?;
    let (at, discovery, certain) = match init_call {
        Some(c) if layout.contains(&c) => (c, Discovery::InitCall, true),
        Some(c) => {
            notes.push(format!(
                "klp_enable_patch() argument at section {} offset {:#x} does not look like a klp_patch \
                 (no THIS_MODULE/objs relocations); using it anyway",
                c.0, c.1
            ));
            (c, Discovery::InitCall, false)
        }
        None => {
            match layout.first() {
                Some(&c) => {
                    if layout.len() > 1 {
                        notes.push(format!(
                            "{} data objects look like a klp_patch; using the first",
                            layout.len()
                        ));
                    }
                    (c, Discovery::Layout, layout.len() == 1)
                }
                None => return Err(String::from(
                    "no klp_patch found: no klp_enable_patch() call in init_module and no data \
                            object with .mod = THIS_MODULE and .objs set",
                )
                .into()),
            }
        }
    };
    let objs = match pointer_at(obj, relocs, at.0, at.1.wrapping_add(l.patch_objs)) {
        Some(Pointer::Local {
            section, offset, ..
        }) => (section, offset),
        other => {
            return Err(
                format!("klp_patch.objs is not a pointer into the module: {other:?}").into(),
            )
        }
    };
    let functions = Functions::new(obj, resched)?;
    let mut objects = Vec::new();
    let osize = obj.sections.get(objs.0 as usize).map_or(0, |s| s.size);
    let max_objects = osize / l.object_size.max(1) + 1;
    let mut terminated = false;
    for i in 0..max_objects {
        resched.tick()?;
        let entry = objs.1.wrapping_add(i.wrapping_mul(l.object_size));
        let name = pointer_at(obj, relocs, objs.0, entry.wrapping_add(l.object_name));
        let funcs = pointer_at(obj, relocs, objs.0, entry.wrapping_add(l.object_funcs));
        let (Some(name), Some(funcs)) = (name, funcs) else {
            break;
        };
        if name == Pointer::Null && funcs == Pointer::Null {
            terminated = true;
            break;
        }
        let name = match name {
            Pointer::Null => None,
            Pointer::Local {
                section, offset, ..
            } => Some(obj.read_cstr(section, offset).ok_or_else(|| {
                format!(
                    "klp_object[{i}].name points outside section {section} (offset {offset:#x})"
                )
            })?),
            other => {
                return Err(format!(
                    "klp_object[{i}].name is not a string of the module: {other:?}"
                )
                .into())
            }
        };
        let mut desc = KlpObjectDesc {
            name,
            funcs: Vec::new(),
            funcs_null: false,
            at: (objs.0, entry),
        };
        match funcs {
            Pointer::Null => desc.funcs_null = true,
            Pointer::Local {
                section, offset, ..
            } => {
                let at = FuncArray {
                    section,
                    start: offset,
                    object: i,
                };
                desc.funcs = read_funcs(obj, relocs, &functions, l, at, &mut notes, resched)??;
            }
            other => {
                return Err(format!(
                    "klp_object[{i}].funcs is not a pointer into the module: {other:?}"
                )
                .into())
            }
        }
        objects.push(desc);
    }
    if !terminated {
        return Err(format!(
            "klp_object array at section {} offset {:#x} has no terminating empty entry (stride {})",
            objs.0, objs.1, l.object_size
        ).into());
    }
    Ok(PatchDesc {
        at,
        discovery,
        certain,
        objects,
        layouts: *l,
        notes,
    })
}

/// klp-build's sections (tools/objtool/include/objtool/klp.h, 6.19-7.1).
pub(crate) const KLP_OBJECTS_SEC: &str = ".init.klp_objects";
/// `struct klp_object_ext` (include/linux/livepatch_external.h, 6.19-7.1, 64-bit): `name`,
/// `funcs`, `struct klp_callbacks` (four pointers and a bool), `nr_funcs`.
const OBJECT_EXT_SIZE: u64 = 64;
const OBJECT_EXT_FUNCS: u64 = 8;
const OBJECT_EXT_NR_FUNCS: u64 = 56;
/// `struct klp_func_ext`: `old_name`, `new_func`, `sympos`.
const FUNC_EXT_SIZE: u64 = 24;

/// The klp-build layout: scripts/livepatch/init.c takes `sh_size / sizeof(struct
/// klp_object_ext)` objects from `.init.klp_objects` (found with klp_find_section_by_name())
/// and for each `nr_funcs` entries of its `funcs` array, and builds zero-terminated
/// klp_object and klp_func arrays from them (name, funcs, callbacks; old_name, new_func,
/// sympos as old_sympos). An empty section gives no objects: init.c then prints
/// "nothing to patch!" and fails with -EINVAL (see the enable step).
fn read_klp_build(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    section: u32,
    l: &StructLayouts,
    resched: &mut Resched,
) -> Result<PatchDesc, ReadError> {
    let size = obj.sections.get(section as usize).map_or(0, |s| s.size);
    let mut notes = Vec::new();
    if !size.is_multiple_of(OBJECT_EXT_SIZE) {
        notes.push(format!(
            "{KLP_OBJECTS_SEC} holds {size} bytes, not a multiple of the {OBJECT_EXT_SIZE}-byte \
             struct klp_object_ext of 6.19-7.1: the target's layout may differ"
        ));
    }
    let functions = Functions::new(obj, resched)?;
    let mut objects = Vec::new();
    for i in 0..size / OBJECT_EXT_SIZE {
        resched.tick()?;
        let entry = i * OBJECT_EXT_SIZE;
        let name = match pointer_at(obj, relocs, section, entry) {
            Some(Pointer::Null) => None,
            Some(Pointer::Local {
                section: s, offset, ..
            }) => Some(obj.read_cstr(s, offset).ok_or_else(|| {
                format!("klp_object_ext[{i}].name points outside section {s} (offset {offset:#x})")
            })?),
            other => {
                return Err(format!(
                    "klp_object_ext[{i}].name is not a string of the module: {other:?}"
                )
                .into())
            }
        };
        let nr = obj
            .read_bytes(section, entry + OBJECT_EXT_NR_FUNCS, 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let mut desc = KlpObjectDesc {
            name,
            funcs: Vec::new(),
            funcs_null: false,
            at: (section, entry),
        };
        match pointer_at(obj, relocs, section, entry + OBJECT_EXT_FUNCS) {
            Some(Pointer::Local {
                section: fs,
                offset,
                ..
            }) => {
                for j in 0..u64::from(nr) {
                    resched.tick_step()?;
                    let at = offset.wrapping_add(j.wrapping_mul(FUNC_EXT_SIZE));
                    let old_name = pointer_at(obj, relocs, fs, at);
                    let new_func = pointer_at(obj, relocs, fs, at.wrapping_add(8));
                    let sympos = read_u64(obj, fs, at.wrapping_add(16));
                    let (Some(old_name), Some(new_func), Some(old_sympos)) =
                        (old_name, new_func, sympos)
                    else {
                        return Err(format!(
                            "klp_object_ext[{i}]: its {nr} klp_func_ext entries run past section {fs}"
                        )
                        .into());
                    };
                    desc.funcs.push(func_desc(
                        obj,
                        &functions,
                        &old_name,
                        new_func,
                        old_sympos,
                        (fs, at),
                    ));
                }
            }
            // init.c copies the (NULL) pointer only when there is nothing to copy.
            Some(Pointer::Null) if nr == 0 => {}
            other => {
                return Err(format!(
                    "klp_object_ext[{i}].funcs is not a pointer into the module: {other:?}"
                )
                .into())
            }
        }
        objects.push(desc);
    }
    Ok(PatchDesc {
        at: (section, 0),
        discovery: Discovery::KlpBuild,
        certain: true,
        objects,
        layouts: *l,
        notes,
    })
}

/// One function as a layout describes it: the `old_name` string, `new_func` and the function
/// symbol it points at, `old_sympos`, where the entry sits.
fn func_desc(
    obj: &ElfObject<'_>,
    functions: &Functions<'_>,
    old_name: &Pointer,
    new_func: Pointer,
    old_sympos: u64,
    at: (u32, u64),
) -> KlpFuncDesc {
    let old_name = match old_name {
        Pointer::Local {
            section, offset, ..
        } => obj.read_cstr(*section, *offset),
        _ => None,
    };
    let new_func_symbol = match &new_func {
        Pointer::Local {
            section,
            offset,
            symbol,
        } => functions
            .at(*section, *offset)
            .or_else(|| Some(symbol.clone())),
        Pointer::External { symbol, .. } => Some(symbol.clone()),
        _ => None,
    };
    KlpFuncDesc {
        old_name,
        new_func,
        new_func_symbol,
        old_sympos,
        at,
    }
}

/// Where a `klp_func` array sits, and whose it is.
struct FuncArray {
    section: u32,
    start: u64,
    /// Index of the klp_object.
    object: u64,
}

fn read_funcs(
    obj: &ElfObject<'_>,
    relocs: &RelocMap<'_>,
    functions: &Functions<'_>,
    l: &StructLayouts,
    at: FuncArray,
    notes: &mut Vec<String>,
    resched: &mut Resched,
) -> Result<Result<Vec<KlpFuncDesc>, String>, Cancelled> {
    let FuncArray {
        section,
        start,
        object: oi,
    } = at;
    let size = obj.sections.get(section as usize).map_or(0, |s| s.size);
    let max = size / l.func_size.max(1) + 1;
    let mut out = Vec::new();
    for j in 0..max {
        // Two map lookups, two reads and a few strings per entry: a clock read each.
        resched.tick_step()?;
        let entry = start.wrapping_add(j.wrapping_mul(l.func_size));
        let old_name = pointer_at(obj, relocs, section, entry.wrapping_add(l.func_old_name));
        let new_func = pointer_at(obj, relocs, section, entry.wrapping_add(l.func_new_func));
        let sympos = read_u64(obj, section, entry.wrapping_add(l.func_old_sympos));
        let (Some(old_name), Some(new_func), Some(old_sympos)) = (old_name, new_func, sympos)
        else {
            return Ok(Err(format!(
                "klp_object[{oi}].funcs array at section {section} offset {start:#x} runs past the section \
                 without a terminating empty entry (stride {})",
                l.func_size
            )));
        };
        if old_name == Pointer::Null && new_func == Pointer::Null && old_sympos == 0 {
            // Cross-check the stride: every pointer relocation inside the array must sit on a
            // pointer field of some entry.
            let end = entry;
            let mut odd: Vec<u64> = Vec::new();
            for r in relocs.in_range(section, start, end) {
                resched.tick()?;
                let o = r.offset - start;
                let f = o % l.func_size;
                if f != l.func_old_name && f != l.func_new_func {
                    odd.push(o);
                }
            }
            if !odd.is_empty() {
                notes.push(format!(
                    "klp_object[{oi}].funcs: relocations at +{odd:#x?} are not on old_name/new_func of a \
                     {}-byte klp_func: the target's struct layout probably differs (use its BTF)",
                    l.func_size
                ));
            }
            return Ok(Ok(out));
        }
        out.push(func_desc(
            obj,
            functions,
            &old_name,
            new_func,
            old_sympos,
            (section, entry),
        ));
    }
    Ok(Err(format!(
        "klp_object[{oi}].funcs: no terminating empty entry"
    )))
}
