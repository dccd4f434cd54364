//! The kallsyms view of a kernel module (.ko, ET_REL) once loaded and
//! initialised, following kernel/module/kallsyms.c (kernel/module.c before 5.19):
//! `layout_symtab()`/`add_kallsyms()` keep symbol 0 and every `is_core_symbol()`
//! in `.symtab` order (all symbols for livepatch modules); `elf_type()` gives the
//! letter, computed on the section flags as the loader left them (`.modinfo`,
//! `__versions` and the percpu section lose SHF_ALLOC before layout); `s_show()`
//! upper-cases the letter when `is_exported()` and lower-cases it otherwise, and
//! skips entries with an empty name.

use klpsym_resched::resched::{Cancelled, Resched};

use crate::error::{machine_name, ElfError};
use crate::names::NameTable;
use crate::raw::SHF_RO_AFTER_INIT;
use crate::raw::{
    RawElf, RawSection, RawSymbol, EM_IA_64, ET_REL, SHF_ALLOC, SHF_EXECINSTR, SHF_IA_64_SHORT,
    SHF_WRITE, SHN_ABS, SHN_LORESERVE, SHN_UNDEF, SHT_NOBITS, STB_LOCAL, STB_WEAK, STT_FILE,
    STT_OBJECT,
};
use crate::symbol::{KallsymTable, KallsymTableBuilder};
use klpsym_resched::bulk::free_with_points;

/// Offset of `name` in `struct module` on 64-bit kernels: after `enum
/// module_state state` (padded to 8) and `struct list_head list`.
const THIS_MODULE_NAME_OFFSET_64: usize = 24;
/// The same on 32-bit kernels.
const THIS_MODULE_NAME_OFFSET_32: usize = 12;
/// MODULE_NAME_LEN on 64-bit kernels (64 - sizeof(unsigned long)).
const MODULE_NAME_LEN: usize = 56;

/// Result of [`module_kallsyms`].
#[derive(Debug, Clone)]
pub struct ModuleSymbols {
    /// Module name as the kernel spells it (from `.modinfo` `name=`, else
    /// `.gnu.linkonce.this_module`).
    pub name: String,
    /// ELF `e_machine`.
    pub machine: u16,
    /// The /proc/kallsyms lines of this module, in the kernel's order, with
    /// section-relative addresses.
    pub entries: KallsymTable,
    /// `.modinfo` key/value pairs in file order.
    pub modinfo: Vec<(String, String)>,
    /// `vermagic=` from `.modinfo`.
    pub vermagic: Option<String>,
    /// `depends=` from `.modinfo`, split on commas.
    pub depends: Vec<String>,
    /// The `.symtab` entries a kallsyms walk visits while the module is loading: every one
    /// but the undefined ones (index 0 included). Until `do_init_module()` switches the module
    /// to its core symbols, `add_kallsyms()` points `mod->kallsyms` at the whole symbol table,
    /// so a livepatch lookup made when the module comes (`klp_module_coming()`) walks these.
    pub loading_symbols: u32,
    /// The symbols without a name the loader keeps in the module's core symbol table: a
    /// livepatch module keeps every symbol (`layout_symtab()`: `is_livepatch_module()`),
    /// section symbols included, though kallsyms prints none of them; 0 for any other
    /// module (`is_core_symbol()` refuses an unnamed one). Their room counts in the core.
    pub kept_unnamed: u32,
    /// For each entry of `entries`, its 0-based place in that loading walk (the defined
    /// `.symtab` entries in file order), so a lookup that stops at a match while the module
    /// loads visits `place + 1` entries.
    pub loading_order: Vec<u32>,
    /// Section headers the entries refer to (index -> facts), for placement.
    pub sections: Vec<ModuleSection>,
    /// For each entry of `entries`, whether it has an ftrace call site (`__mcount_loc`), as
    /// livepatch needs to redirect a function; `None` where this is not modelled (not
    /// x86_64).
    pub ftrace: Option<Vec<crate::ftrace::SiteFacts>>,
    /// The GNU build id (`.note.gnu.build-id`, lower-case hex), when the object has one.
    pub build_id: Option<String>,
}

impl ModuleSymbols {
    /// Frees the result in steps, a reschedule point between them: a big module's entries
    /// and `.modinfo` strings are hundreds of microseconds of `free` and `munmap` at once
    /// (amdgpu: 24k entries, 1k `.modinfo` pairs).
    pub fn free_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.entries.free_with_points(resched)?;
        free_with_points(self.modinfo, resched)?;
        free_with_points(self.depends, resched)?;
        free_with_points(self.loading_order, resched)?;
        if let Some(f) = self.ftrace {
            free_with_points(f, resched)?;
        }
        free_with_points(self.sections, resched)
    }
}

/// A section of the module as the loader sees it, for address computation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSection {
    /// Section header index.
    pub index: u32,
    /// Section name.
    pub name: String,
    /// `sh_flags` after the loader's adjustments.
    pub flags: u64,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_size`.
    pub size: u64,
    /// `sh_addralign`.
    pub align: u64,
}

/// Assumptions about the running kernel's configuration that change the module
/// view. Defaults match Debian/Ubuntu/Fedora kernels.
#[derive(Debug, Clone, Copy)]
pub struct ModuleOptions {
    /// CONFIG_KALLSYMS_ALL: without it only executable sections' symbols stay.
    pub kallsyms_all: bool,
    /// CONFIG_MODULE_UNLOAD: without it `.exit*` sections go with init (6.4+).
    pub module_unload: bool,
}

impl Default for ModuleOptions {
    fn default() -> Self {
        ModuleOptions {
            kallsyms_all: true,
            module_unload: true,
        }
    }
}

/// The /proc/kallsyms view of a module with default [`ModuleOptions`].
pub fn module_kallsyms(ko: &[u8]) -> Result<ModuleSymbols, ElfError> {
    module_kallsyms_with(ko, ModuleOptions::default(), &mut Resched::none())
}

/// [`module_kallsyms`] with explicit kernel configuration assumptions (`opts`), reaching a
/// reschedule point through `resched` per section and per
/// symbol; a cancelled point ends it with [`ElfError::Cancelled`].
pub fn module_kallsyms_with(
    ko: &[u8],
    opts: ModuleOptions,
    resched: &mut Resched,
) -> Result<ModuleSymbols, ElfError> {
    let mut raw = RawElf::parse(ko, resched)?;
    let m = module_from_raw(&raw, opts, resched)?;
    free_with_points(std::mem::take(&mut raw.symbols), resched)?;
    Ok(m)
}

/// [`module_kallsyms`], refusing objects for another machine than `machine`.
pub fn module_kallsyms_for_machine(ko: &[u8], machine: u16) -> Result<ModuleSymbols, ElfError> {
    let mut resched = Resched::none();
    let raw = RawElf::parse(ko, &mut resched)?;
    if raw.machine != machine {
        return Err(ElfError::WrongMachine {
            found: raw.machine,
            found_name: machine_name(raw.machine),
            expected: machine,
            expected_name: machine_name(machine),
        });
    }
    module_from_raw(&raw, ModuleOptions::default(), &mut resched)
}

fn module_from_raw(
    raw: &RawElf<'_>,
    opts: ModuleOptions,
    resched: &mut Resched,
) -> Result<ModuleSymbols, ElfError> {
    if raw.e_type != ET_REL {
        return Err(ElfError::WrongType {
            found: raw.e_type,
            expected: "ET_REL (1)",
            operation: "module_kallsyms",
        });
    }
    if !raw.has_symtab {
        return Err(ElfError::NoSymtab);
    }
    let modinfo = parse_modinfo(raw, resched)?;
    let mut get = |k: &str| -> Result<Option<String>, Cancelled> {
        for (key, v) in &modinfo {
            resched.tick()?;
            if key == k {
                return Ok(Some(v.clone()));
            }
        }
        Ok(None)
    };
    let livepatch = get("livepatch")?.as_deref() == Some("Y");
    let vermagic = get("vermagic")?;
    let depends = get("depends")?;
    let name = match get("name")? {
        Some(n) => n,
        None => this_module_name(raw, resched)?,
    };

    // Section flags as the loader leaves them before layout_symtab().
    let mut flags: Vec<u64> = Vec::with_capacity(raw.sections.len());
    for s in &raw.sections {
        resched.tick()?;
        flags.push(s.flags);
    }
    let pcpu = alloc_named(raw, ".data..percpu", resched)?;
    for idx in [
        alloc_named(raw, ".modinfo", resched)?,
        alloc_named(raw, "__versions", resched)?,
        pcpu,
    ]
    .into_iter()
    .flatten()
    {
        flags[idx] &= !SHF_ALLOC;
    }
    // layout_and_allocate() marks these read-only-after-init (no effect on the
    // letters; it places them in their own layout class).
    for idx in [
        alloc_named(raw, ".data..ro_after_init", resched)?,
        alloc_named(raw, "__jump_table", resched)?,
    ]
    .into_iter()
    .flatten()
    {
        flags[idx] |= SHF_RO_AFTER_INIT;
    }
    let small = if raw.machine == EM_IA_64 {
        SHF_IA_64_SHORT
    } else {
        0
    };
    let shnum = raw.sections.len();
    let exports = ExportTargets::new(raw, resched)?;

    // Which symbols stay, and the room their names need.
    let keep = |sym: &RawSymbol<'_>| {
        let keep =
            sym.index == 0 || livepatch || is_core_symbol(raw, sym, &flags, shnum, pcpu, opts);
        // Symbol 0 and unnamed symbols are kept by the loader but s_show() prints nothing
        // for an empty name.
        keep && !sym.name.is_empty()
    };
    let (mut rows, mut name_bytes) = (0usize, 0usize);
    for s in &raw.sections {
        resched.tick()?;
        name_bytes = name_bytes.saturating_add(s.name.len());
    }
    for sym in &raw.symbols {
        resched.tick()?;
        if keep(sym) || sym.typ == STT_FILE {
            rows += 1;
            name_bytes = name_bytes.saturating_add(sym.name.len());
        }
    }
    let mut entries = KallsymTableBuilder::with_capacity(rows, name_bytes);
    entries.reserve_sections(shnum);
    for s in &raw.sections {
        resched.tick()?;
        entries.push_section(&s.name);
    }
    // The source file of each local symbol: the last STT_FILE entry before it.
    let mut file: Option<&str> = None;
    let mut loading_order = Vec::with_capacity(rows);
    let mut walked = 0u32;
    for sym in &raw.symbols {
        resched.tick()?;
        if sym.typ == STT_FILE {
            file = (!sym.name.is_empty()).then_some(&*sym.name);
        }
        let place = walked;
        if sym.shndx != SHN_UNDEF {
            walked += 1;
        }
        if !keep(sym) {
            continue;
        }
        loading_order.push(place);
        let lower = elf_type(raw, sym, &flags, pcpu, small);
        let exported = exports.target(&sym.name).is_some_and(|(shndx, value)| {
            sym.shndx == shndx && sym.value == value && sym.shndx != SHN_UNDEF
        });
        let kind = if exported {
            lower.to_ascii_uppercase()
        } else {
            lower.to_ascii_lowercase()
        };
        let section_index =
            (sym.shndx != SHN_UNDEF && sym.shndx < SHN_LORESERVE).then_some(u32::from(sym.shndx));
        entries.push(
            &sym.name,
            kind,
            sym.value,
            Some(sym.size),
            section_index,
            exported,
        );
        if let (Some(f), true) = (file, sym.bind == STB_LOCAL) {
            entries.set_last_file(f);
        }
    }
    exports.free_with_points(resched)?;
    let mut sections = Vec::with_capacity(shnum);
    for (i, s) in raw.sections.iter().enumerate() {
        resched.tick()?;
        sections.push(ModuleSection {
            index: i as u32,
            name: s.name.clone().into_owned(),
            flags: flags[i],
            sh_type: s.sh_type,
            size: s.size,
            align: s.align,
        });
    }
    let mut loading_symbols = 0u32;
    let mut kept_unnamed = 0u32;
    for s in &raw.symbols {
        resched.tick()?;
        loading_symbols += u32::from(s.shndx != SHN_UNDEF);
        kept_unnamed += u32::from(livepatch && s.index != 0 && s.name.is_empty());
    }
    let entries = entries.finish();
    let ftrace = match crate::ftrace::module_sites(raw, resched)? {
        Some(sites) => {
            let size = |i: u32| raw.sections.get(i as usize).map_or(0, |s| s.size);
            let facts = crate::ftrace::site_facts(&entries, &sites, &size, resched)?;
            free_with_points(sites, resched)?;
            Some(facts)
        }
        None => None,
    };
    let build_id = build_id_note(raw);
    Ok(ModuleSymbols {
        build_id,
        name,
        machine: raw.machine,
        loading_symbols,
        kept_unnamed,
        loading_order,
        entries,
        ftrace,
        vermagic,
        depends: depends
            .map(|d| {
                d.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        modinfo,
        sections,
    })
}

/// The GNU build id of `.note.gnu.build-id` (namesz, descsz, type 3, "GNU\0", the id).
fn build_id_note(raw: &RawElf<'_>) -> Option<String> {
    let data = raw
        .sections
        .iter()
        .find(|s| s.name == ".note.gnu.build-id")?
        .data?;
    let u32_at = |at: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if raw.little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let (namesz, descsz, typ) = (u32_at(0)? as usize, u32_at(4)? as usize, u32_at(8)?);
    if typ != 3 || data.get(12..12 + namesz)? != b"GNU\0" {
        return None;
    }
    let at = 12 + namesz.div_ceil(4) * 4;
    let id = data.get(at..at.checked_add(descsz)?)?;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// The first section named `name` that has SHF_ALLOC.
fn alloc_named(
    raw: &RawElf<'_>,
    name: &str,
    resched: &mut Resched,
) -> Result<Option<usize>, Cancelled> {
    for (i, s) in raw.sections.iter().enumerate() {
        resched.tick()?;
        if s.name == name && s.flags & SHF_ALLOC != 0 {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Sections the loader lays out with the init part, freed after init:
/// `module_init_layout_section()`.
pub(crate) fn is_init_section(name: &str, opts: ModuleOptions) -> bool {
    name.starts_with(".init") || (!opts.module_unload && name.starts_with(".exit"))
}

/// kernel/module/kallsyms.c is_core_symbol(), on the raw 16-bit st_shndx.
fn is_core_symbol(
    raw: &RawElf<'_>,
    sym: &RawSymbol<'_>,
    flags: &[u64],
    shnum: usize,
    pcpu: Option<usize>,
    opts: ModuleOptions,
) -> bool {
    let shndx = usize::from(sym.shndx);
    if sym.shndx == SHN_UNDEF || shndx >= shnum || sym.st_name == 0 {
        return false;
    }
    if opts.kallsyms_all && Some(shndx) == pcpu {
        return true;
    }
    let f = flags[shndx];
    if f & SHF_ALLOC == 0 || (!opts.kallsyms_all && f & SHF_EXECINSTR == 0) {
        return false;
    }
    !is_init_section(&raw.sections[shndx].name, opts)
}

/// kernel/module/kallsyms.c elf_type() ("As per nm").
fn elf_type(
    raw: &RawElf<'_>,
    sym: &RawSymbol<'_>,
    flags: &[u64],
    pcpu: Option<usize>,
    small: u64,
) -> u8 {
    if sym.bind == STB_WEAK {
        return if sym.typ == STT_OBJECT { b'v' } else { b'w' };
    }
    if sym.shndx == SHN_UNDEF {
        return b'U';
    }
    if sym.shndx == SHN_ABS || Some(usize::from(sym.shndx)) == pcpu {
        return b'a';
    }
    if sym.shndx >= SHN_LORESERVE {
        return b'?';
    }
    let Some(sec): Option<&RawSection<'_>> = raw.sections.get(usize::from(sym.shndx)) else {
        return b'?';
    };
    let f = flags[usize::from(sym.shndx)];
    if f & SHF_EXECINSTR != 0 {
        return b't';
    }
    if f & SHF_ALLOC != 0 && sec.sh_type != SHT_NOBITS {
        return if f & SHF_WRITE == 0 {
            b'r'
        } else if f & small != 0 {
            b'g'
        } else {
            b'd'
        };
    }
    if sec.sh_type == SHT_NOBITS {
        return if f & small != 0 { b's' } else { b'b' };
    }
    if sec.name.starts_with(".debug") {
        return b'n';
    }
    b'?'
}

/// For every exported name, the (st_shndx, st_value) of the symbol the export
/// points at: the kernel's `is_exported()` compares the ksymtab value with the
/// symbol's value, so a static namesake elsewhere is not exported. Exports are
/// recognised by their `__ksymtab_<name>` symbols (EXPORT_SYMBOL before 6.5,
/// modpost-generated since); the target is the non-local definition of `<name>`.
///
/// Only the plain `__ksymtab` counts: `is_exported()` searches `mod->syms`, never
/// `mod->gpl_syms`, so EXPORT_SYMBOL_GPL symbols print lower-case (seen on Debian
/// 6.1: `t garp_request_join [garp]`).
struct ExportTargets<'r, 'a> {
    raw: &'r RawElf<'a>,
    /// The first non-local definition of each name.
    defs: NameTable,
    /// `__ksymtab_<name>` symbols in a plain ksymtab section whose `<name>` has a definition.
    exports: NameTable,
}

const KSYMTAB: &str = "__ksymtab_";

impl<'r, 'a> ExportTargets<'r, 'a> {
    fn new(raw: &'r RawElf<'a>, resched: &mut Resched) -> Result<Self, Cancelled> {
        let in_ksymtab = |s: &RawSymbol<'_>| {
            s.section
                .and_then(|i| raw.section_name(i))
                .is_some_and(|sec| sec == "__ksymtab" || sec.starts_with("___ksymtab+"))
        };
        let is_def = |s: &RawSymbol<'_>| s.bind != STB_LOCAL && s.shndx != SHN_UNDEF;
        let (mut n_defs, mut n_exports) = (0usize, 0usize);
        for s in &raw.symbols {
            resched.tick()?;
            n_defs += usize::from(is_def(s));
            n_exports += usize::from(in_ksymtab(s));
        }
        let mut defs = NameTable::with_capacity(n_defs, resched)?;
        for (i, s) in raw.symbols.iter().enumerate() {
            resched.tick()?;
            if is_def(s) {
                defs.insert_first(i as u32, &s.name, |i| Self::name(raw, i));
            }
        }
        let mut exports = NameTable::with_capacity(n_exports, resched)?;
        for (i, s) in raw.symbols.iter().enumerate() {
            resched.tick()?;
            if !in_ksymtab(s) {
                continue;
            }
            if let Some(n) = s.name.strip_prefix(KSYMTAB) {
                if defs.get(n, |i| Self::name(raw, i)).is_some() {
                    exports.insert_first(i as u32, n, |i| Self::exported_name(raw, i));
                }
            }
        }
        Ok(ExportTargets { raw, defs, exports })
    }

    fn name(raw: &'r RawElf<'a>, i: u32) -> &'r str {
        &raw.symbols[i as usize].name
    }

    /// `<name>` of a `__ksymtab_<name>` symbol.
    fn exported_name(raw: &'r RawElf<'a>, i: u32) -> &'r str {
        &raw.symbols[i as usize].name[KSYMTAB.len()..]
    }

    /// The (st_shndx, st_value) the export of `name` points at, if `name` is exported.
    fn target(&self, name: &str) -> Option<(u16, u64)> {
        let raw = self.raw;
        self.exports.get(name, |i| Self::exported_name(raw, i))?;
        let d = self.defs.get(name, |i| Self::name(raw, i))?;
        let s = &raw.symbols[d as usize];
        Some((s.shndx, s.value))
    }

    fn free_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.defs.free_with_points(resched)?;
        self.exports.free_with_points(resched)
    }
}

/// `.modinfo`: NUL-separated `key=value` strings, with NUL padding between them.
fn parse_modinfo(
    raw: &RawElf<'_>,
    resched: &mut Resched,
) -> Result<Vec<(String, String)>, ElfError> {
    let Some(idx) = raw.find_section(".modinfo", resched)? else {
        return Ok(Vec::new());
    };
    let data = raw.sections[idx].data.unwrap_or(&[]);
    let mut out = Vec::new();
    let mut offset = 0usize;
    for chunk in data.split(|&b| b == 0) {
        resched.tick()?;
        if !chunk.is_empty() {
            let text = std::str::from_utf8(chunk).map_err(|e| {
                ElfError::malformed(
                    format!("modinfo string is not UTF-8: {e}"),
                    format!(".modinfo offset {offset:#x}"),
                )
            })?;
            let (k, v) = text.split_once('=').ok_or_else(|| {
                ElfError::malformed(
                    format!("modinfo entry {text:?} has no '='"),
                    format!(".modinfo offset {offset:#x}"),
                )
            })?;
            out.push((k.to_owned(), v.to_owned()));
        }
        offset += chunk.len() + 1;
    }
    Ok(out)
}

/// `struct module.name` inside `.gnu.linkonce.this_module`.
fn this_module_name(raw: &RawElf<'_>, resched: &mut Resched) -> Result<String, ElfError> {
    let idx = raw
        .find_section(".gnu.linkonce.this_module", resched)?
        .ok_or_else(|| {
            ElfError::malformed(
                "no .modinfo name= and no .gnu.linkonce.this_module section",
                "module name",
            )
        })?;
    let data = raw.sections[idx].data.unwrap_or(&[]);
    let off = if raw.is_64 {
        THIS_MODULE_NAME_OFFSET_64
    } else {
        THIS_MODULE_NAME_OFFSET_32
    };
    let field = data
        .get(off..(off + MODULE_NAME_LEN).min(data.len()))
        .ok_or_else(|| {
            ElfError::malformed(
                format!(
                    "section is {} bytes, struct module.name needs offset {off}",
                    data.len()
                ),
                ".gnu.linkonce.this_module",
            )
        })?;
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let name = String::from_utf8_lossy(&field[..end]).into_owned();
    if name.is_empty() {
        return Err(ElfError::malformed(
            format!("empty struct module.name at offset {off}"),
            ".gnu.linkonce.this_module",
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_testkit::elf::{At, Fixture};
    use object::{Architecture, SectionKind};

    /// A module with every kind of symbol the loader treats differently.
    fn sample(modinfo: &[u8]) -> Vec<u8> {
        let mut f = Fixture::new(Architecture::X86_64);
        let text = f.section(".text", SectionKind::Text, &[]);
        let init = f.section(".init.text", SectionKind::Text, &[]);
        let exit = f.section(".exit.text", SectionKind::Text, &[]);
        let rodata = f.section(".rodata", SectionKind::ReadOnlyData, &[]);
        let data = f.section(".data", SectionKind::Data, &[]);
        let bss = f.section(".bss", SectionKind::UninitializedData, &[]);
        let pcpu = f.section(".data..percpu", SectionKind::Data, &[]);
        let info = f.section(".modinfo", SectionKind::ReadOnlyData, modinfo);
        let ksym = f.section("___ksymtab+exported_fn", SectionKind::ReadOnlyData, &[]);
        let ksym_gpl = f.section("___ksymtab_gpl+gpl_fn", SectionKind::ReadOnlyData, &[]);
        f.sym("helper", At::Sec(text), 0x10, 'l', 'f');
        f.sym("dup", At::Sec(text), 0x20, 'l', 'f');
        f.sym("dup", At::Sec(text), 0x30, 'l', 'f');
        f.sym("init_fn", At::Sec(init), 0, 'l', 'f');
        f.sym("exit_fn", At::Sec(exit), 0, 'l', 'f');
        f.sym("table", At::Sec(rodata), 0, 'l', 'o');
        f.sym("counter", At::Sec(data), 8, 'l', 'o');
        f.sym("zeroed", At::Sec(bss), 0, 'l', 'o');
        f.sym("pcpu_var", At::Sec(pcpu), 0x40, 'l', 'o');
        f.sym("__UNIQUE_ID_vermagic1", At::Sec(info), 0, 'l', 'o');
        f.sym("__ksymtab_exported_fn", At::Sec(ksym), 0, 'l', 'o');
        f.sym("__ksymtab_gpl_fn", At::Sec(ksym_gpl), 0, 'l', 'o');
        // A static namesake of the exported function: not exported.
        f.sym("exported_fn", At::Sec(data), 0x40, 'l', 'o');
        f.sym("exported_fn", At::Sec(text), 0x40, 'g', 'f');
        f.sym("plain_global", At::Sec(text), 0x50, 'g', 'f');
        f.sym("weak_fn", At::Sec(text), 0x60, 'w', 'f');
        f.sym("gpl_fn", At::Sec(text), 0x70, 'g', 'f');
        f.sym("printk", At::Undef, 0, 'g', 'n');
        f.bytes()
    }

    const MODINFO: &[u8] = b"license=GPL\0\0\0depends=dep_a,dep_b\0name=sample_mod\0vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \0";

    fn lines(m: &ModuleSymbols) -> Vec<String> {
        m.entries
            .iter()
            .map(|e| format!("{} {} {:#x}", e.kind as char, e.name, e.addr))
            .collect()
    }

    #[test]
    fn kallsyms_all_keeps_core_symbols_in_symtab_order() {
        let m = module_kallsyms(&sample(MODINFO)).unwrap();
        assert_eq!(m.name, "sample_mod");
        assert_eq!(m.machine, 62);
        assert_eq!(m.depends, ["dep_a", "dep_b"]);
        assert_eq!(
            m.vermagic.as_deref(),
            Some("6.1.0-57-amd64 SMP preempt mod_unload modversions ")
        );
        assert_eq!(
            lines(&m),
            [
                "t helper 0x10",
                "t dup 0x20",
                "t dup 0x30",
                "t exit_fn 0x0",
                "r table 0x0",
                "d counter 0x8",
                "b zeroed 0x0",
                "a pcpu_var 0x40",
                "r __ksymtab_exported_fn 0x0",
                "r __ksymtab_gpl_fn 0x0",
                "d exported_fn 0x40",
                "T exported_fn 0x40",
                "t plain_global 0x50",
                "w weak_fn 0x60",
                "t gpl_fn 0x70",
            ]
        );
        let exported: Vec<_> = m.entries.iter().filter(|e| e.exported).collect();
        assert_eq!(exported.len(), 1);
        assert_eq!(exported[0].section, Some(".text"));
        m.free_with_points(&mut Resched::none()).unwrap();
    }

    #[test]
    fn without_kallsyms_all_only_text_remains() {
        let opts = ModuleOptions {
            kallsyms_all: false,
            module_unload: true,
        };
        let m = module_kallsyms_with(&sample(MODINFO), opts, &mut Resched::none()).unwrap();
        assert_eq!(
            lines(&m),
            [
                "t helper 0x10",
                "t dup 0x20",
                "t dup 0x30",
                "t exit_fn 0x0",
                "T exported_fn 0x40",
                "t plain_global 0x50",
                "w weak_fn 0x60",
                "t gpl_fn 0x70",
            ]
        );
    }

    #[test]
    fn exit_sections_go_with_init_without_module_unload() {
        let opts = ModuleOptions {
            kallsyms_all: true,
            module_unload: false,
        };
        let m = module_kallsyms_with(&sample(MODINFO), opts, &mut Resched::none()).unwrap();
        assert!(m.entries.iter().all(|e| e.name != "exit_fn"));
        assert!(m.entries.iter().any(|e| e.name == "helper"));
    }

    #[test]
    fn livepatch_modules_keep_every_named_symbol() {
        let info = b"name=lp\0livepatch=Y\0";
        let m = module_kallsyms(&sample(info)).unwrap();
        let names: Vec<_> = lines(&m);
        assert!(names.contains(&"t init_fn 0x0".to_owned()), "{names:?}");
        // Undefined entries stay, lower-cased by s_show() like every
        // non-exported module symbol.
        assert!(names.contains(&"u printk 0x0".to_owned()), "{names:?}");
        // .modinfo lost SHF_ALLOC in the loader: elf_type() says '?'.
        assert!(
            names.contains(&"? __UNIQUE_ID_vermagic1 0x0".to_owned()),
            "{names:?}"
        );
    }

    #[test]
    fn name_falls_back_to_this_module() {
        let mut f = Fixture::new(Architecture::X86_64);
        let mut this = vec![0u8; 0x380];
        this[24..24 + 6].copy_from_slice(b"fromtm");
        f.section(".gnu.linkonce.this_module", SectionKind::Data, &this);
        let text = f.section(".text", SectionKind::Text, &[]);
        f.sym("fn_a", At::Sec(text), 0, 'l', 'f');
        let m = module_kallsyms(&f.bytes()).unwrap();
        assert_eq!(m.name, "fromtm");
        assert_eq!(lines(&m), ["t fn_a 0x0"]);
    }

    #[test]
    fn other_machine_is_a_clear_error() {
        let mut f = Fixture::new(Architecture::Aarch64);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=arm\0");
        let bytes = f.bytes();
        let err = module_kallsyms_for_machine(&bytes, 62).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("183 (aarch64)") && msg.contains("62 (x86_64)"),
            "{msg}"
        );
        // Without a machine requirement it parses.
        assert_eq!(module_kallsyms(&bytes).unwrap().machine, 183);
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        assert!(matches!(
            module_kallsyms(b"not an elf"),
            Err(ElfError::Parse(_))
        ));
        let good = sample(MODINFO);
        for cut in [16, 64, 200, good.len() / 2, good.len() - 1] {
            let _ = module_kallsyms(&good[..cut]);
        }
        let bad_info = sample(b"noequals\0");
        let err = module_kallsyms(&bad_info).unwrap_err().to_string();
        assert!(err.contains(".modinfo offset 0x0"), "{err}");
    }
}
