//! `convert`: ordinary relocations against unexported symbols → klp relocations.
//!
//! For every undefined symbol the target does not export that a relocation of an allocated
//! section refers to:
//! - the object and position are found in the target (`vmlinux` and loaded modules, plus
//!   offline module tables): one definition → position 0; several → an error listing them
//!   all unless pinned (`[OBJ:]NAME=POS`); none → an error;
//! - the symbol is renamed in place to `.klp.sym.<obj>.<name>,<pos>` with SHN_LIVEPATCH;
//! - its relocations move from `.rela<sec>` to `.klp.rela.<obj>.<sec>` (SHT_RELA,
//!   SHF_ALLOC|SHF_INFO_LINK|SHF_RELA_LIVEPATCH, sh_info = `<sec>`, sh_link = `.symtab`).
//!
//! Relocations of non-allocated sections (debug info) are left alone: the loader skips them,
//! and a klp section targeting them would be written into freed memory for module objects.
//! Every problem is collected before refusing, and nothing is produced on refusal.

use std::collections::{BTreeMap, HashSet};

use crate::consts as elf;
use klpsym_core::bulk;
use klpsym_core::normalize_module_name;
use klpsym_core::resched::{Cancelled, Resched};
use serde::Serialize;

use crate::edit::{encode_relas, strip_module_signature, ElfEditor, NewSection};
use crate::elf::{Arch, ElfObject, ElfRela, SHF_RELA_LIVEPATCH, SHN_LIVEPATCH};
use crate::error::{ConvertError, ParseError};
use crate::layouts::StructLayouts;
use crate::module::LivepatchModule;
use crate::names::{format_klp_section, format_klp_symbol, parse_klp_symbol, OBJNAME_WIDTH};
use crate::target::Target;
use klpsym_core::bulk::free_with_points;

/// A user's choice for an ambiguous name: `[OBJ:]NAME=POS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// The object, normalized (`None`: wherever the name is).
    pub object: Option<String>,
    /// The symbol name.
    pub name: String,
    /// The position (1-based; 0 = must be unique).
    pub position: u64,
    /// Instead of a position: the source file of the definition (`NAME@fs/inode.c`), matched
    /// on a path suffix against the target's FILE entries.
    pub file: Option<String>,
}

impl Pin {
    /// Parses `[OBJ:]NAME=POS` or `[OBJ:]NAME@PATH` (the definition in that source file).
    pub fn parse(s: &str) -> Result<Pin, String> {
        let (lhs, position, file) = match (s.rsplit_once('='), s.split_once('@')) {
            (Some((lhs, pos)), None) => {
                let position = pos
                    .trim()
                    .parse()
                    .map_err(|_| format!("pin '{s}': position '{pos}' is not a number"))?;
                (lhs, position, None)
            }
            (None, Some((lhs, path))) if !path.is_empty() => (lhs, 0, Some(path.to_string())),
            _ => {
                return Err(format!(
                    "pin '{s}': expected [OBJ:]NAME=POS or [OBJ:]NAME@PATH"
                ))
            }
        };
        let (object, name) = match lhs.split_once(':') {
            Some((o, n)) => (Some(normalize_module_name(o)), n),
            None => (None, lhs),
        };
        if name.is_empty() {
            return Err(format!("pin '{s}': empty symbol name"));
        }
        Ok(Pin {
            object,
            name: name.to_string(),
            position,
            file,
        })
    }

    /// The pin as a user writes it: `[OBJ:]NAME=POS`.
    pub fn spec(&self) -> String {
        let obj = self
            .object
            .as_ref()
            .map_or(String::new(), |o| format!("{o}:"));
        match &self.file {
            Some(f) => format!("{obj}{}@{f}", self.name),
            None => format!("{obj}{}={}", self.name, self.position),
        }
    }
}

/// One converted symbol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conversion {
    /// Symbol index (unchanged).
    pub symbol_index: u32,
    /// The original name.
    pub name: String,
    /// The object it resolves in.
    pub object: String,
    /// The position written (0 = unique).
    pub position: u64,
    /// The new name.
    pub klp_name: String,
    /// Its address on the target, when known.
    #[serde(serialize_with = "crate::report::hex_opt")]
    pub address: Option<u64>,
    /// Number of relocations moved.
    pub relocations: usize,
    /// True when a pin chose the position.
    pub pinned: bool,
}

/// What `convert` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConvertReport {
    /// The module name.
    pub module: String,
    /// Every symbol converted.
    pub conversions: Vec<Conversion>,
    /// Sections created, in order.
    pub sections_created: Vec<String>,
    /// True when nothing needed converting (the output is the input).
    pub unchanged: bool,
    /// True when a signature was dropped.
    pub signature_dropped: bool,
    /// Remarks that do not stop the conversion.
    pub warnings: Vec<String>,
}

impl ConvertReport {
    /// Frees the report with reschedule points between the steps (several strings per
    /// converted symbol).
    pub fn drop_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        free_with_points(self.conversions, resched)?;
        free_with_points(self.sections_created, resched)?;
        free_with_points(self.warnings, resched)
    }
}

/// Relocation types the kernel applies in a klp section (see [`crate::reloc`]).
fn klp_type_supported(arch: Arch, t: u32) -> bool {
    match arch {
        Arch::X86_64 => matches!(
            t,
            elf::R_X86_64_NONE
                | elf::R_X86_64_64
                | elf::R_X86_64_32
                | elf::R_X86_64_32S
                | elf::R_X86_64_PC32
                | elf::R_X86_64_PLT32
                | elf::R_X86_64_PC64
        ),
        Arch::Aarch64 => {
            t == 0
                || (elf::R_AARCH64_NONE..=elf::R_AARCH64_LDST128_ABS_LO12_NC).contains(&t)
                    && t != 281
                    && !(294..299).contains(&t)
        }
    }
}

/// Special sections the loader processes right after relocation; a module-object klp
/// relocation in them is applied too late (upstream forbids it).
const SPECIAL: &[&str] = &[
    "__jump_table",
    ".altinstructions",
    ".static_call_sites",
    "__bug_table",
    ".parainstructions",
    ".retpoline_sites",
    ".return_sites",
    ".call_sites",
    ".smp_locks",
    "__ex_table",
];

/// Converts `module` for `target`. `exported` tells which names the target exports (those
/// stay ordinary relocations).
pub fn convert(
    module: &[u8],
    target: &Target<'_>,
    pins: &[Pin],
    exported: &dyn Fn(&str) -> bool,
) -> Result<(Vec<u8>, ConvertReport), ConvertError> {
    convert_with(module, target, pins, exported, &mut Resched::none())
}

/// [`convert`], reaching reschedule points through `resched`: a tick per section, symbol and
/// relocation (parse, selection, moves, encoding), per lookup against the target's tables
/// (whose name indexes are built first, with points; a patch asks no address, so no
/// address index is built), and between steps of the output's copies.
/// A cancelled point is [`ConvertError::Cancelled`].
pub fn convert_with(
    module: &[u8],
    target: &Target<'_>,
    pins: &[Pin],
    exported: &dyn Fn(&str) -> bool,
    resched: &mut Resched,
) -> Result<(Vec<u8>, ConvertReport), ConvertError> {
    target.kernel.build_name_index(resched)?;
    target.kernel.build_stem_index(resched)?;
    for t in target.unplaced_modules.values() {
        t.build_name_index(resched)?;
        t.build_stem_index(resched)?;
    }
    let mut warnings = Vec::new();
    let mut warned: HashSet<String> = HashSet::new();
    let (data, signature_dropped) = match strip_module_signature(module) {
        Some(d) => {
            warnings.push(
                "module signature dropped: it would not match the converted module; sign it again"
                    .into(),
            );
            (d, true)
        }
        None => (module, false),
    };
    let obj = ElfObject::parse_with(data, resched)?;
    if obj.e_type != elf::ET_REL {
        return Err(ParseError::Unsupported(format!(
            "e_type {}: not a relocatable object (.ko)",
            obj.e_type
        ))
        .into());
    }
    if Arch::from_machine(obj.machine) != Some(target.arch) {
        return Err(ConvertError::Refused(vec![format!(
            "module is for e_machine {}, the target kernel is {:?}",
            obj.machine, target.arch
        )]));
    }
    // The target's layouts (its BTF) decide where the klp_object array and its names are.
    let layouts = target.layouts.unwrap_or(StructLayouts::fallback(6, 1));
    let lp = LivepatchModule::from_elf(obj, &layouts, resched)?;
    let obj = &lp.elf;
    let mut errors = Vec::new();
    if !lp.is_marked_livepatch() {
        errors.push("modinfo has no livepatch=Y: add MODULE_INFO(livepatch, \"Y\")".to_string());
    }
    // Which symbols, and which relocations refer to them.
    let mut uses: BTreeMap<u32, usize> = BTreeMap::new();
    for s in &obj.sections {
        resched.tick()?;
        if s.sh_type != elf::SHT_RELA || s.flags & SHF_RELA_LIVEPATCH != 0 {
            continue;
        }
        // A relocation section whose target does not exist is skipped by the kernel's loader;
        // after conversion appends sections that index could exist, so refuse it here (found
        // by fuzzing: the output then converted differently a second time).
        let Some(target_section) = obj.sections.get(s.info as usize) else {
            errors.push(format!(
                "{}: relocation section targets section {}, which does not exist",
                s.name, s.info
            ));
            continue;
        };
        if target_section.flags & elf::SHF_ALLOC == 0 {
            continue;
        }
        for r in &obj.relas[s.index as usize] {
            // `exported` is the caller's and may look names up: a clock read per item.
            resched.tick_step()?;
            let sym = &obj.symbols[r.sym as usize];
            if r.sym == 0 || !sym.is_undefined() || sym.name.is_empty() || exported(&sym.name) {
                continue;
            }
            if sym.name == "_GLOBAL_OFFSET_TABLE_" {
                continue;
            }
            if sym.bind() == elf::STB_WEAK {
                let w = format!(
                    "weak undefined symbol '{}' left alone (the kernel resolves it to 0)",
                    sym.name
                );
                if warned.insert(w.clone()) {
                    warnings.push(w);
                }
                continue;
            }
            if !klp_type_supported(target.arch, r.r_type) {
                errors.push(format!(
                    "{}: relocation at {:#x} against '{}' has type {}, which the kernel cannot apply in a klp section",
                    s.name, r.offset, sym.name, r.r_type
                ));
            }
            *uses.entry(r.sym).or_default() += 1;
        }
    }
    // A pin must choose something: a typo would otherwise pass silently. A name the module
    // already refers to through a klp symbol counts (converting twice changes nothing).
    let mut already: HashSet<String> = HashSet::new();
    for &i in &lp.klp_symbols {
        resched.tick()?;
        if let Some(k) = parse_klp_symbol(obj.symbols[i as usize].name.as_bytes(), usize::MAX) {
            already.insert(k.name);
        }
    }
    for pin in pins {
        resched.tick()?;
        if !already.contains(&pin.name)
            && !uses
                .keys()
                .any(|&i| obj.symbols[i as usize].name == pin.name)
        {
            errors.push(format!(
                "pin '{}' matches no symbol this conversion turns into a klp relocation (the module's undefined, unexported references)",
                pin.spec()
            ));
        }
    }
    if uses.is_empty() {
        if !errors.is_empty() {
            return Err(ConvertError::Refused(errors));
        }
        let report = ConvertReport {
            module: lp.name.clone(),
            conversions: vec![],
            sections_created: vec![],
            unchanged: true,
            signature_dropped,
            warnings,
        };
        let mut out = Vec::new();
        bulk::extend_from_slice(&mut out, data, resched)?;
        lp.drop_with_points(resched)?;
        return Ok((out, report));
    }
    let mut conversions = Vec::new();
    for (&index, &count) in &uses {
        // A lookup in every table of the target each: a clock read per item.
        resched.tick_step()?;
        let name = obj.symbols[index as usize].name.clone();
        match place_symbol(target, &name, pins) {
            Ok((object, position, address, pinned)) => {
                if object.len() > OBJNAME_WIDTH || object.contains('.') {
                    errors.push(format!(
                        "'{name}': object name '{object}' cannot be written in a klp symbol name"
                    ));
                }
                if name.len() >= target.rules.ksym_name_len {
                    errors.push(format!(
                        "'{name}' is longer than KSYM_NAME_LEN-1 ({})",
                        target.rules.ksym_name_len - 1
                    ));
                }
                let klp_name = format_klp_symbol(&object, &name, position);
                conversions.push(Conversion {
                    symbol_index: index,
                    name,
                    object,
                    position,
                    klp_name,
                    address,
                    relocations: count,
                    pinned,
                });
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(ConvertError::Refused(errors));
    }
    let mut by_index: BTreeMap<u32, &Conversion> = BTreeMap::new();
    let mut names_len = 0usize;
    for c in &conversions {
        resched.tick()?;
        by_index.insert(c.symbol_index, c);
        names_len += c.klp_name.len() + 1;
    }
    let mut ed = ElfEditor::new_with(obj, names_len, resched)?;
    for c in &conversions {
        resched.tick()?;
        ed.set_symbol(c.symbol_index, &c.klp_name, SHN_LIVEPATCH, 0);
    }
    // (object, target section) -> moved relocations, in section order.
    let mut moved: BTreeMap<(u32, String), Vec<ElfRela>> = BTreeMap::new();
    for s in &obj.sections {
        resched.tick()?;
        if s.sh_type != elf::SHT_RELA || s.flags & SHF_RELA_LIVEPATCH != 0 {
            continue;
        }
        let alloc = obj
            .sections
            .get(s.info as usize)
            .is_some_and(|t| t.flags & elf::SHF_ALLOC != 0);
        if !alloc {
            continue;
        }
        let relas = &obj.relas[s.index as usize];
        // Sized once (untouched capacity costs nothing): growing copies everything so far.
        let mut go: Vec<ElfRela> = Vec::with_capacity(relas.len());
        let mut keep: Vec<ElfRela> = Vec::with_capacity(relas.len());
        for r in relas {
            resched.tick()?;
            if by_index.contains_key(&r.sym) {
                go.push(*r);
            } else {
                keep.push(*r);
            }
        }
        if go.is_empty() {
            continue;
        }
        ed.set_contents(s.index, encode_relas(&keep, resched)?);
        free_with_points(keep, resched)?;
        let moving = go.len();
        let tname = &obj.sections[s.info as usize].name;
        for &r in &go {
            resched.tick()?;
            let c = by_index[&r.sym];
            if c.object != "vmlinux" && (tname.starts_with(".init.") || tname.starts_with(".exit."))
            {
                warnings.push(format!(
                    "relocation in {tname} against module symbol '{}': {tname} may be freed before the module \
                     loads and the kernel writes the relocation",
                    c.name
                ));
            }
            if c.object != "vmlinux" && SPECIAL.contains(&tname.as_str()) {
                warnings.push(format!(
                    "relocation in {tname} against module symbol '{}': the kernel applies it after {tname} was processed",
                    c.name
                ));
            }
            moved
                .entry((s.info, c.object.clone()))
                .or_insert_with(|| Vec::with_capacity(moving))
                .push(r);
        }
        free_with_points(go, resched)?;
    }
    let mut sections_created = Vec::new();
    for ((target_index, object), relas) in moved {
        resched.tick()?;
        let name = format_klp_section(&object, &obj.sections[target_index as usize].name);
        sections_created.push(name.clone());
        ed.add_section(NewSection {
            name,
            sh_type: elf::SHT_RELA,
            flags: (elf::SHF_ALLOC | elf::SHF_INFO_LINK) | SHF_RELA_LIVEPATCH,
            link: obj.symtab_index,
            info: target_index,
            addralign: 8,
            entsize: 24,
            data: encode_relas(&relas, resched)?,
        });
        free_with_points(relas, resched)?;
    }
    let out = ed.write_with(resched)?;
    drop(by_index);
    let module = lp.name.clone();
    lp.drop_with_points(resched)?;
    let report = ConvertReport {
        module,
        conversions,
        sections_created,
        unchanged: false,
        signature_dropped,
        warnings,
    };
    Ok((out, report))
}

/// Chooses (object, position, address, pinned) for `name`.
fn place_symbol(
    target: &Target<'_>,
    name: &str,
    pins: &[Pin],
) -> Result<(String, u64, Option<u64>, bool), String> {
    // Every definition, per object, in kernel order: (object, position, address, file).
    let mut defs: Vec<(String, u64, Option<u64>, Option<String>)> = Vec::new();
    let mut push_from = |table: &klpsym_core::SymbolTable, only: Option<&str>| {
        let mut per: BTreeMap<u32, u64> = BTreeMap::new();
        for s in table.by_name(name) {
            let info = table.object_info(s.object);
            // ftrace/kprobe trampolines and BPF programs are not livepatch objects
            if info.kind == klpsym_core::ObjectKind::Pseudo {
                continue;
            }
            let oname = info.name.clone();
            if only.is_some_and(|o| o != oname) {
                continue;
            }
            let pos = per.entry(s.object.0).or_default();
            *pos += 1;
            defs.push((
                oname,
                *pos,
                (!table.addresses_hidden()).then_some(s.addr),
                table.file(s.id).map(str::to_string),
            ));
        }
    };
    push_from(target.kernel, None);
    for (m, t) in &target.unplaced_modules {
        if !target.is_loaded(m) {
            push_from(t, Some(m));
        }
    }
    let list = |defs: &[(String, u64, Option<u64>, Option<String>)]| {
        defs.iter()
            .map(|(o, p, a, f)| {
                let a = a.map_or_else(|| "(hidden)".to_string(), |a| format!("{a:#x}"));
                let f = f.as_ref().map_or(String::new(), |f| format!("  {f}"));
                format!("    position {p}  {o}  {a}{f}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let pin = pins.iter().find(|p| p.name == name);
    if let Some(pin) = pin {
        let objects: Vec<&String> = {
            let mut v: Vec<&String> = defs.iter().map(|d| &d.0).collect();
            v.dedup();
            v
        };
        let object = match &pin.object {
            Some(o) => o.clone(),
            None if objects.len() == 1 => objects[0].clone(),
            None => {
                return Err(format!(
                "'{name}' is defined in several objects; pin it as OBJ:{name}=POS. Candidates:\n{}",
                list(&defs)
            ))
            }
        };
        let in_obj: Vec<_> = defs.iter().filter(|d| d.0 == object).collect();
        if let Some(f) = &pin.file {
            use klpsym_core::{file_match, FileMatch};
            let how = |d: &(String, u64, Option<u64>, Option<String>)| -> FileMatch {
                d.3.as_deref().map_or(FileMatch::No, |x| file_match(x, f))
            };
            let hits: Vec<_> = in_obj
                .iter()
                .filter(|d| how(d) == FileMatch::Exact)
                .collect();
            // A table that knows files by base name only cannot tell this path from any other
            // file of that name (the path may not even exist): the pin chooses nothing, as a
            // lookup by file does not.
            if hits.is_empty() {
                if let Some(d) = in_obj.iter().find(|d| how(d) == FileMatch::BaseName) {
                    let base = d.3.as_deref().unwrap_or_default();
                    return Err(format!(
                        "pin {}: the target's tables name source files by base name only (ELF FILE symbols: '{base}'), so {f} cannot be told from any other {base}: give the target as a vmlinux with DWARF (the -dbg package's), pin a position, or name the file as '{base}'. Candidates:\n{}",
                        pin.spec(),
                        list(&defs)
                    ));
                }
            }
            return match hits.as_slice() {
                // A unique name keeps position 0, as an author would write it.
                [d] => Ok((object, if in_obj.len() == 1 { 0 } else { d.1 }, d.2, true)),
                [] if in_obj.iter().all(|d| d.3.is_none()) => Err(format!(
                    "pin {}: the target's tables have no source files (FILE entries): give the target as a vmlinux with .symtab (the -dbg package's). Candidates:\n{}",
                    pin.spec(),
                    list(&defs)
                )),
                [] => Err(format!(
                    "pin {} matches no definition. Candidates:\n{}",
                    pin.spec(),
                    list(&defs)
                )),
                _ => Err(format!(
                    "pin {} matches {} definitions (one file holds several copies): pin a position. Candidates:\n{}",
                    pin.spec(),
                    hits.len(),
                    list(&defs)
                )),
            };
        }
        let hit = match pin.position {
            0 if in_obj.len() == 1 => in_obj.first(),
            0 => None,
            p => in_obj.iter().find(|d| d.1 == p),
        };
        return match hit {
            Some(d) => Ok((object, pin.position, d.2, true)),
            None => Err(format!(
                "pin {}{name}={} matches no definition. Candidates:\n{}",
                pin.object
                    .as_ref()
                    .map_or(String::new(), |o| format!("{o}:")),
                pin.position,
                list(&defs)
            )),
        };
    }
    match defs.len() {
        0 => {
            let variants = std::iter::once(target.kernel)
                .chain(target.unplaced_modules.values().copied())
                .find_map(|t| crate::hints::variants_hint(t, name));
            Err(format!(
                "'{name}' is not defined in the target kernel (vmlinux, loaded or given modules){}",
                variants.map_or(String::new(), |v| format!(": {v}"))
            ))
        }
        1 => Ok((defs[0].0.clone(), 0, defs[0].2, false)),
        _ => Err(format!(
            "'{name}' is defined {} times; pin one ([OBJ:]{name}=POS). Candidates:\n{}",
            defs.len(),
            list(&defs)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse() {
        assert_eq!(
            Pin::parse("nf-tables:helper=2").unwrap(),
            Pin {
                file: None,
                object: Some("nf_tables".into()),
                name: "helper".into(),
                position: 2
            }
        );
        assert_eq!(Pin::parse("x=0").unwrap().object, None);
        assert!(Pin::parse("x").is_err());
        assert!(Pin::parse("x=a").is_err());
        assert!(Pin::parse("=1").is_err());
    }
}
