//! Where the module loader puts a module, as `%pS` needs it: the regions of memory the
//! module owns (an address in none of them prints as a number) and the end of its text,
//! which bounds the size `%pS` gives a module symbol (`find_kallsyms_symbol()`: "at worst,
//! next value is at end of module").
//!
//! Read from the kernels (kernel/module.c 5.10, kernel/module/main.c and kallsyms.c 6.1+):
//! - 5.10 to 6.3: one core allocation. `layout_sections()` takes the sections in five passes
//!   (text; read-only data; ro-after-init data; writable data; the small-data pass, ia64
//!   only), in section-header order within a pass, each section aligned to its
//!   `sh_addralign`; every pass ends page-aligned (`debug_align`/`strict_align`: x86
//!   always selects STRICT_MODULE_RWX). `core_layout.text_size` is the first pass, aligned.
//!   `layout_symtab()` then appends the core symbol table, its strings and its type table,
//!   and the whole is page-aligned. Init sections (`.init*`) make the init layout alike.
//! - 6.4 and later: one allocation per memory type (`mod->mem[MOD_TEXT]`, `MOD_RODATA`,
//!   `MOD_RO_AFTER_INIT`, `MOD_DATA`, and the init ones), each laid out from the same passes
//!   and page-aligned when allocated; the core symbol table goes at the end of `MOD_DATA`.
//!   Each type's base is its own: a section of the type placed gives it.

use std::collections::HashMap;

use crate::module::{is_init_section, ModuleOptions, ModuleSymbols};
use crate::raw::{SHF_ALLOC, SHF_EXECINSTR, SHF_RO_AFTER_INIT, SHF_WRITE};

/// x86_64 and arm64 (Debian's) page size.
const PAGE: u64 = 4096;

/// A module's memory as the loader laid it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleLayout {
    /// The ranges of the module's core memory whose base is known, `[start, end)`.
    pub core: Vec<(u64, u64)>,
    /// The end of the core text (`core_layout.base + text_size`; since 6.4
    /// `mem[MOD_TEXT].base + size`), when the text's base is known.
    pub text_end: Option<u64>,
    /// The core text, `[base, text end)`, when its base is known (since 6.4 the region of
    /// `mem[MOD_TEXT]`).
    pub text: Option<(u64, u64)>,
    /// The init text alike (`mem[MOD_INIT_TEXT]`).
    pub init_text: Option<(u64, u64)>,
    /// Where the functions of a livepatch module's init text that have an ftrace call site
    /// start, sorted: the functions ftrace keeps the names of when the loader frees the init
    /// memory. `do_init_module()` calls `ftrace_free_mem()` for the init text, which saves
    /// the function holding each ftrace record there (`save_ftrace_mod_rec()`: its start and
    /// its size as kallsyms gave them then) whenever an ftrace user is registered
    /// (`ftrace_ops_list` not empty), and `kallsyms_lookup()` asks that map last
    /// (`ftrace_mod_address_lookup()`, kernel/trace/ftrace.c, 4.16+), so `%pS` of an address
    /// in such a function still prints its name after init. A livepatch module registers its
    /// own patch's ftrace user during its init (`klp_enable_patch()`), so it always has one;
    /// an ordinary module has one only if something else traced then, which a file cannot
    /// tell: empty for it (its init symbols are not in its core kallsyms either).
    pub traced_init: Vec<u64>,
}

impl ModuleLayout {
    /// True when `addr` is the live module's: in a known core range. Its init memory is
    /// not: once its init function has returned the loader frees it and forgets its regions
    /// (`do_init_module()`: `mem[init type].base = NULL, .size = 0`; `init_layout` before
    /// 6.4), so `__module_address()` finds no module there and `%pS` prints the number,
    /// though a livepatch module's kallsyms still lists its init symbols (it keeps its whole
    /// symbol table).
    pub fn contains(&self, addr: u64) -> bool {
        self.core.iter().any(|&(s, e)| s <= addr && addr < e)
    }

    /// The region of the live module's memory `addr` lies in, `[start, end)`: any known
    /// core one, or with `text_only` the core text alone (since 6.4 one `mem[]` region
    /// each).
    pub fn region_of(&self, addr: u64, text_only: bool) -> Option<(u64, u64)> {
        let inside = |&(s, e): &(u64, u64)| s <= addr && addr < e;
        if text_only {
            self.text.filter(inside)
        } else {
            self.core.iter().copied().find(inside)
        }
    }
}

/// A section's class: init or core, and its pass (0 text, 1 rodata, 2 ro-after-init, 3 data).
fn class(flags: u64, name: &str) -> Option<(bool, usize)> {
    // The loader clears SHF_ALLOC of `__versions` and `.modinfo` before laying out
    // (rewrite_section_headers(), kernel/module/main.c; kernel/module.c in 5.10): they stay
    // in the temporary copy, where kallsyms lists their symbols (`____versions`).
    if name == "__versions" || name == ".modinfo" {
        return None;
    }
    let masks: [(u64, u64); 4] = [
        (SHF_EXECINSTR | SHF_ALLOC, 0),
        (SHF_ALLOC, SHF_WRITE),
        (SHF_RO_AFTER_INIT | SHF_ALLOC, 0),
        (SHF_WRITE | SHF_ALLOC, 0),
    ];
    let pass = masks
        .iter()
        .position(|&(req, forbid)| flags & req == req && flags & forbid == 0)?;
    Some((is_init_section(name, ModuleOptions::default()), pass))
}

fn align_up(v: u64, a: u64) -> u64 {
    let a = a.max(1);
    v.div_ceil(a).saturating_mul(a)
}

/// The bytes `layout_symtab()` appends to the core: the core symbols (24 bytes each, with
/// the null symbol and a livepatch module's unnamed ones), their names (an empty name is
/// its terminating byte), one type byte each.
fn core_symtab_bytes(m: &ModuleSymbols) -> u64 {
    let unnamed = u64::from(m.kept_unnamed);
    let n = m.entries.len() as u64 + 1 + unnamed;
    let names: u64 = m
        .entries
        .iter()
        .map(|e| e.name.len() as u64 + 1)
        .sum::<u64>()
        + 1
        + unnamed;
    // sh_addralign of .symtab is 8: the symbols start aligned, the names and types follow.
    n * 24 + names + n + 8
}

/// The layout of `m` given where its placed sections are (`bases`: section index ->
/// address, as [`crate::section_bases`] finds them), for a kernel of `version`.
pub fn module_layout(
    m: &ModuleSymbols,
    bases: &HashMap<u32, u64>,
    version: (u32, u32),
) -> ModuleLayout {
    // Each section's (init, type) and offset in it.
    let split = version >= (6, 4);
    let mut size: HashMap<(bool, usize), u64> = HashMap::new();
    let mut offset: HashMap<u32, (bool, usize, u64)> = HashMap::new();
    for pass in 0..4 {
        for s in &m.sections {
            let Some((init, p)) = class(s.flags, &s.name) else {
                continue;
            };
            if s.index == 0 || p != pass || offset.contains_key(&s.index) {
                continue;
            }
            // One allocation before 6.4: every pass of a part shares its size.
            let key = if split { (init, pass) } else { (init, 0) };
            let at = size.entry(key).or_insert(0);
            *at = align_up(*at, s.align);
            offset.insert(s.index, (init, if split { pass } else { 0 }, *at));
            *at = at.saturating_add(s.size);
        }
        if !split {
            for init in [false, true] {
                if let Some(at) = size.get_mut(&(init, 0)) {
                    *at = align_up(*at, PAGE);
                }
            }
            if pass == 0 {
                // text_size: the first pass, aligned.
                for init in [false, true] {
                    let t = size.get(&(init, 0)).copied().unwrap_or(0);
                    size.insert((init, 9), t);
                }
            }
        }
    }
    // The core symbol table: the end of the core (before 6.4), of MOD_DATA since.
    let data_key = if split { (false, 3) } else { (false, 0) };
    let d = size.entry(data_key).or_insert(0);
    *d = align_up(align_up(*d, 8) + core_symtab_bytes(m), PAGE);
    // Each part's base, from a placed section of it.
    let mut base: HashMap<(bool, usize), u64> = HashMap::new();
    let mut placed: Vec<(&u32, &(bool, usize, u64))> = offset.iter().collect();
    placed.sort_by_key(|(idx, _)| **idx);
    for (idx, &(init, part, off)) in placed {
        if let Some(&a) = bases.get(idx) {
            base.entry((init, part)).or_insert(a.wrapping_sub(off));
        }
    }
    let region = |init: bool, part: usize| -> Option<(u64, u64)> {
        let b = *base.get(&(init, part))?;
        let sz = align_up(size.get(&(init, part)).copied().unwrap_or(0), PAGE);
        (sz > 0).then(|| (b, b.wrapping_add(sz)))
    };
    let parts: &[usize] = if split { &[0, 1, 2, 3] } else { &[0] };
    let text_end = |init: bool| -> Option<u64> {
        let b = *base.get(&(init, 0))?;
        let t = if split {
            align_up(size.get(&(init, 0)).copied().unwrap_or(0), PAGE)
        } else {
            size.get(&(init, 9)).copied().unwrap_or(0)
        };
        Some(b.wrapping_add(t))
    };
    let text = |init: bool| Some((*base.get(&(init, 0))?, text_end(init)?));
    let livepatch = m.modinfo.iter().any(|(k, v)| k == "livepatch" && v == "Y");
    let mut traced_init = Vec::new();
    if let (true, Some(sites)) = (livepatch, &m.ftrace) {
        for (e, site) in m.entries.iter().zip(sites) {
            if !(site.at_start || site.within) {
                continue;
            }
            let Some(&(true, part, off)) = e.section_index.and_then(|i| offset.get(&i)) else {
                continue;
            };
            if let Some(&b) = base.get(&(true, part)) {
                traced_init.push(b.wrapping_add(off).wrapping_add(e.addr));
            }
        }
        traced_init.sort_unstable();
        traced_init.dedup();
    }
    ModuleLayout {
        core: parts.iter().filter_map(|&p| region(false, p)).collect(),
        text_end: text_end(false),
        text: text(false),
        init_text: text(true),
        traced_init,
    }
}

/// True for a name `find_kallsyms_symbol()` passes over (`is_mapping_symbol()`): assembler
/// locals and arm mapping symbols, by the rule of the kernel's version.
pub fn is_mapping_symbol(name: &str, version: (u32, u32)) -> bool {
    let b = name.as_bytes();
    if name.starts_with(".L") {
        return true;
    }
    if version >= (6, 12) {
        return name.starts_with('$') || name.starts_with("L0");
    }
    let arm = b.len() >= 2
        && b[0] == b'$'
        && matches!(b[1], b'a' | b'd' | b't' | b'x')
        && (b.len() == 2 || b[2] == b'.');
    arm || (version >= (6, 4) && name.starts_with("L0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::module_kallsyms;
    use klpsym_testkit::elf::{At, Fixture};
    use object::{Architecture, SectionKind};

    fn sample() -> ModuleSymbols {
        let mut f = Fixture::new(Architecture::X86_64);
        let text = f.section(".text", SectionKind::Text, &[0x90; 0x24]);
        let ro = f.section(".rodata", SectionKind::ReadOnlyData, &[1; 0x30]);
        let data = f.section(".data", SectionKind::Data, &[2; 0x20]);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=lay\0");
        f.sym("f", At::Sec(text), 0, 'l', 'f');
        f.sym("g", At::Sec(text), 0x20, 'l', 'f');
        f.sym("r", At::Sec(ro), 0, 'l', 'o');
        f.sym("d", At::Sec(data), 0, 'l', 'o');
        module_kallsyms(&f.bytes()).unwrap()
    }

    #[test]
    fn one_core_before_6_4_with_the_text_page_aligned() {
        let m = sample();
        let idx = |n: &str| m.sections.iter().find(|s| s.name == n).unwrap().index;
        let base = 0xffff_ffff_c000_0000;
        let bases: HashMap<u32, u64> = [(idx(".text"), base)].into_iter().collect();
        let l = module_layout(&m, &bases, (6, 1));
        assert_eq!(l.text_end, Some(base + 0x1000));
        // The fixture's sections are a page each: text, rodata, data, and the symbol table
        // after the data (a page more).
        assert_eq!(l.core, vec![(base, base + 0x4000)]);
        assert!(l.contains(base + 0x3fff) && !l.contains(base + 0x4000));
    }

    #[test]
    fn one_allocation_per_type_since_6_4() {
        let m = sample();
        let idx = |n: &str| m.sections.iter().find(|s| s.name == n).unwrap().index;
        let (t, d) = (0xffff_ffff_c000_0000, 0xffff_ffff_c000_5000);
        let bases: HashMap<u32, u64> = [(idx(".text"), t), (idx(".data"), d)].into_iter().collect();
        let l = module_layout(&m, &bases, (6, 12));
        assert_eq!(l.text_end, Some(t + 0x1000));
        assert_eq!(l.core, vec![(t, t + 0x1000), (d, d + 0x2000)]);
        assert!(!l.contains(t + 0x1000), "rodata's base is not known");
        assert_eq!(l.text, Some((t, t + 0x1000)));
        assert_eq!(l.region_of(d + 0x10, false), Some((d, d + 0x2000)));
        assert_eq!(l.region_of(d + 0x10, true), None, "data is not text");
        assert_eq!(l.region_of(t + 0xfff, true), Some((t, t + 0x1000)));
    }

    #[test]
    fn init_memory_is_not_the_live_modules() {
        let mut f = Fixture::new(Architecture::X86_64);
        let text = f.section(".text", SectionKind::Text, &[0x90; 0x20]);
        let init = f.section(".init.text", SectionKind::Text, &[0x90; 0x20]);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=ini\0");
        f.sym("f", At::Sec(text), 0, 'l', 'f');
        f.sym("i", At::Sec(init), 0, 'l', 'f');
        let m = module_kallsyms(&f.bytes()).unwrap();
        let idx = |n: &str| m.sections.iter().find(|s| s.name == n).unwrap().index;
        let (t, i) = (0xffff_ffff_c040_1000, 0xffff_ffff_c041_0000);
        let bases: HashMap<u32, u64> = [(idx(".text"), t), (idx(".init.text"), i)]
            .into_iter()
            .collect();
        for v in [(6, 1), (7, 2)] {
            let l = module_layout(&m, &bases, v);
            assert_eq!(l.init_text, Some((i, i + 0x1000)), "{v:?}: laid out");
            assert!(l.contains(t) && !l.contains(i), "{v:?}: freed after init");
            assert_eq!(l.region_of(i, false), None);
        }
    }

    #[test]
    fn mapping_symbols_by_version() {
        assert!(is_mapping_symbol(".L123", (5, 10)));
        assert!(is_mapping_symbol("$x", (6, 1)) && is_mapping_symbol("$d.1", (6, 1)));
        assert!(!is_mapping_symbol("$xyz", (6, 1)) && is_mapping_symbol("$xyz", (6, 12)));
        assert!(!is_mapping_symbol("L0x", (6, 1)) && is_mapping_symbol("L0x", (6, 4)));
        assert!(!is_mapping_symbol("init_once", (7, 2)));
    }
}
