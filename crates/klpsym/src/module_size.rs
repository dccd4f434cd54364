//! How `find_kallsyms_symbol()` bounds a module symbol by the rule of the kernel's version
//! ([`ModuleLookup`]), and the size `%pS` gives a symbol of a module that a kallsyms lists but
//! whose layout nobody gave (a saved `/proc/kallsyms`, a live one) by that rule.
//!
//! Before "module/kallsyms: fix nextval for data symbol lookup" (see
//! [`ModuleLookup::by_region`] for the kernels that took it),
//! `find_kallsyms_symbol()` (kernel/module/kallsyms.c; kernel/module.c in 5.10) bounds the
//! size of any symbol by the end of the module's core text ("at worse, next value is at end
//! of module"): a function's size is `min(next symbol, text end) - value`, a data symbol's
//! `text end - value`, which wraps (`/0xffffffffffffff40`). After it, the size runs to the
//! next symbol of the address's own region, which is what a kallsyms table alone infers (the
//! next higher symbol of the object).
//!
//! The end of the core text is not in a kallsyms; it is found from where the module's text
//! and its other symbols lie:
//! - before 6.4 the module is one allocation, its text first, each pass of the layout
//!   page-aligned (`layout_sections()`, x86's STRICT_MODULE_RWX): the text ends at the page
//!   boundary below the first symbol after the core text's (every module's read-only data
//!   begins with its notes, `.note.gnu.build-id` then `.note.Linux`'s `_note_N`, 0x24 bytes
//!   in), else at the page boundary above its last text symbol;
//! - since 6.4 the text is an allocation of its own (`mod->mem[MOD_TEXT]`), page-aligned: the
//!   page boundary above the core text's last symbol.

use std::collections::HashMap;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{ObjectId, ObjectKind, SymbolTable};

const PAGE: u64 = 4096;

/// For each module a kallsyms lists (and no layout places), its symbols' addresses in order
/// and the end of its core text.
#[derive(Debug, Default)]
pub(crate) struct ListedModules {
    modules: HashMap<ObjectId, Listed>,
}

#[derive(Debug)]
struct Listed {
    /// Every symbol's address, sorted.
    addrs: Vec<u64>,
    /// The end of the core text, when the module lists text.
    text_end: Option<u64>,
    /// The first core text symbol's address.
    text_start: Option<u64>,
}

/// What the newer rule ("fix nextval") makes of an address whose best symbol is a module's
/// core text symbol: the size within the text, or, past the text's end, outside it (no
/// region of the module holds the address: `%pS` prints the number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InText {
    /// Inside: the size, to the next symbol or the text's end.
    Size(u64),
    /// Past the text's end: the symbol's extent to it.
    Past(u64),
}

/// How `find_kallsyms_symbol()` bounds the symbol it finds for a module address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModuleLookup {
    /// Any of the module's symbols at or below the address; the size runs at most to the
    /// end of the module's core text (its init memory is freed by then), "at worse, next
    /// value is at end of module", so a data symbol's size can wrap.
    ToTextEnd,
    /// The memory region the address lies in first (without CONFIG_KALLSYMS_ALL only the
    /// text regions are looked at): the best symbol is in it and its size ends with it
    /// ("module/kallsyms: fix nextval for data symbol lookup").
    ByRegion {
        /// CONFIG_KALLSYMS_ALL is off: an address in data prints as the number.
        text_only: bool,
    },
}

impl ModuleLookup {
    /// Whether kernel `version` at stable `sublevel` selects the region first. The change,
    /// "module/kallsyms: fix nextval for data symbol lookup" (Stanislaw Gruszka, posted to
    /// linux-modules in April 2026; modules-next 5eef17fedaa5, linux-next 0e9f090a4e9b), came
    /// with mainline 7.3 and was taken into the stable series 7.2.4 (linux-7.2.y,
    /// 2026-09-07), 6.18.50 (linux-6.18.y 04ab51d4e369, pushed 2026-09-07) and 6.12.117
    /// (Debian's changelog of 6.12.117-1 lists it); the lab holds 6.12.95 with the old rule
    /// and 6.12.118 and 7.2.13 with the new. Other series (6.4 to 7.1, 6.6.y, 6.1.y, 5.10.y)
    /// keep the old rule, as far as is known. Unknown sublevel: the series' first release
    /// (its old rule).
    pub(crate) fn by_region(version: (u32, u32), sublevel: Option<u32>) -> bool {
        let s = sublevel.unwrap_or(0);
        match version {
            v if v >= (7, 3) => true,
            (7, 2) => s >= 4,
            (6, 18) => s >= 50,
            (6, 12) => s >= 117,
            _ => false,
        }
    }

    /// Whether the rule of series `version` depends on its stable sublevel (a stable
    /// release took the change).
    pub(crate) fn depends_on_sublevel(version: (u32, u32)) -> bool {
        matches!(version, (7, 2) | (6, 18) | (6, 12))
    }
}

/// A text symbol's type letter (`t`, `T`).
fn is_text(kind: char) -> bool {
    matches!(kind, 't' | 'T')
}

impl ListedModules {
    /// The modules of `table` but those named in `placed` (whose layouts are known), for a
    /// kernel of `series` (`None`: unknown, laid out as today's).
    pub(crate) fn new(
        table: &SymbolTable,
        placed: &[&str],
        series: Option<(u32, u32)>,
        rs: &mut Resched,
    ) -> Result<ListedModules, Cancelled> {
        let split = series.is_none_or(|v| v >= (6, 4));
        let mut syms: HashMap<ObjectId, Vec<(u64, bool)>> = HashMap::new();
        for s in table.iter() {
            rs.tick()?;
            if s.object == ObjectId::VMLINUX {
                continue;
            }
            let info = table.object_info(s.object);
            if info.kind != ObjectKind::Module
                || info.unplaced
                || placed.contains(&info.name.as_str())
            {
                continue;
            }
            // What find_kallsyms_symbol() passes over: a livepatch module's undefined symbols
            // (SHN_UNDEF, listed at their definitions' addresses), empty names, mapping
            // symbols.
            if matches!(s.kind, 'u' | 'U')
                || s.name.is_empty()
                || klpsym_elf::is_mapping_symbol(s.name, series.unwrap_or((99, 0)))
            {
                continue;
            }
            syms.entry(s.object)
                .or_default()
                .push((s.addr, is_text(s.kind)));
        }
        let mut modules = HashMap::with_capacity(syms.len());
        for (oid, mut v) in syms {
            rs.tick()?;
            v.sort_unstable();
            let text_end = text_end(&v, split);
            let text_start = v.iter().find(|&&(_, t)| t).map(|&(a, _)| a);
            modules.insert(
                oid,
                Listed {
                    addrs: v.into_iter().map(|(a, _)| a).collect(),
                    text_end,
                    text_start,
                },
            );
        }
        Ok(ListedModules { modules })
    }

    /// The size the kernel's old rule gives the module symbol of `object` at `value` for an
    /// address `addr` at or above it, when the address is surely the module's: below its
    /// last symbol, in its text, or the symbol itself. `None` otherwise (the module's memory
    /// past its last symbol is not in a kallsyms).
    pub(crate) fn old_rule_size(&self, object: ObjectId, value: u64, addr: u64) -> Option<u64> {
        let m = self.modules.get(&object)?;
        let text_end = m.text_end?;
        let above = m.addrs.partition_point(|&a| a <= addr);
        let next = match m.addrs.get(above) {
            Some(&n) => n,
            None if addr < text_end || addr == value => u64::MAX,
            None => return None,
        };
        Some(next.min(text_end).wrapping_sub(value))
    }
}

impl ListedModules {
    /// The newer rule for the module symbol of `object` at `value`, best for `addr`, when it
    /// is a core text symbol: its size ends with the text (the region; `mem[MOD_TEXT]` since
    /// 6.4), which a kallsyms tells from the page above the text's last symbol. `None` for
    /// another symbol (a data region's end is not in a kallsyms: the next symbol bounds it).
    pub(crate) fn text_rule(&self, object: ObjectId, value: u64, addr: u64) -> Option<InText> {
        let m = self.modules.get(&object)?;
        let (start, end) = (m.text_start?, m.text_end?);
        if value < start || value >= end {
            return None;
        }
        if addr >= end {
            return Some(InText::Past(end - value));
        }
        let above = m.addrs.partition_point(|&a| a <= addr);
        let next = m.addrs.get(above).copied().unwrap_or(u64::MAX);
        Some(InText::Size(next.min(end) - value))
    }
}

/// The end of a module's core text from its symbols `v` (address, is text), sorted; `split`:
/// the text is an allocation of its own (6.4 and later). The core text is the run of text
/// symbols from the lowest one (a livepatch module's kallsyms also lists its init text, an
/// allocation of its own, freed after init).
fn text_end(v: &[(u64, bool)], split: bool) -> Option<u64> {
    let first = v.iter().position(|&(_, t)| t)?;
    let run = v[first..].iter().take_while(|&&(_, t)| t).count();
    let last_text = v[first + run - 1].0;
    let above = last_text.checked_add(1)?.div_ceil(PAGE).checked_mul(PAGE)?;
    if split {
        return Some(above);
    }
    Some(match v.get(first + run) {
        Some(&(a, _)) => (a / PAGE * PAGE).max(above),
        None => above,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_allocation_s_text_ends_below_the_read_only_data() {
        let base = 0xffff_ffff_c0a0_0000u64;
        // crc7 on 6.1: one function, the notes 0x24 into the page after the text.
        let v = [(base, true), (base + 0x1024, false), (base + 0x2000, false)];
        assert_eq!(text_end(&v, false), Some(base + 0x1000));
        // A last function straddling a page: the read-only data tells where the text ends.
        let v = [(base, true), (base + 0xff0, true), (base + 0x2024, false)];
        assert_eq!(text_end(&v, false), Some(base + 0x2000));
        // Since 6.4 the read-only data lies elsewhere: the page above the last function.
        assert_eq!(text_end(&v, true), Some(base + 0x1000));
        // No text listed: no bound.
        assert_eq!(text_end(&[(base, false)], false), None);
        // A livepatch module's init text, listed past its core: not the core's end.
        let v = [(base, true), (base + 0x1024, false), (base + 0x9000, true)];
        assert_eq!(text_end(&v, false), Some(base + 0x1000));
        assert_eq!(text_end(&v, true), Some(base + 0x1000));
    }

    #[test]
    fn the_old_rule_bounds_by_the_text_end_and_wraps_for_data() {
        let base = 0xffff_ffff_c0a0_0000u64;
        let m = ListedModules {
            modules: HashMap::from([(
                ObjectId(1),
                Listed {
                    addrs: vec![base, base + 0x1024, base + 0x10c0],
                    text_end: Some(base + 0x1000),
                    text_start: Some(base),
                },
            )]),
        };
        // The function: to the text's end, not to the next symbol.
        assert_eq!(
            m.old_rule_size(ObjectId(1), base, base + 0x10),
            Some(0x1000)
        );
        // Data: the text's end minus its value, wrapped as the kernel's unsigned long.
        assert_eq!(
            m.old_rule_size(ObjectId(1), base + 0x10c0, base + 0x10c0),
            Some(0xffff_ffff_ffff_ff40)
        );
        assert_eq!(
            m.old_rule_size(ObjectId(1), base + 0x1024, base + 0x1030),
            Some(0u64.wrapping_sub(0x24))
        );
        // Past the last symbol and out of the text: not surely the module's.
        assert_eq!(
            m.old_rule_size(ObjectId(1), base + 0x10c0, base + 0x2000),
            None
        );
        // Another object: nothing known.
        assert_eq!(m.old_rule_size(ObjectId(2), base, base), None);
        // The newer rule: a function's size ends with the text; past it, outside; data is
        // not the text's.
        assert_eq!(
            m.text_rule(ObjectId(1), base, base + 0x10),
            Some(InText::Size(0x1000))
        );
        assert_eq!(
            m.text_rule(ObjectId(1), base, base + 0x1010),
            Some(InText::Past(0x1000))
        );
        assert_eq!(m.text_rule(ObjectId(1), base + 0x10c0, base + 0x10c0), None);
    }

    #[test]
    fn module_lookup_by_region_from_the_series_that_took_it() {
        let by = super::ModuleLookup::by_region;
        assert!(!by((6, 1), Some(192)) && !by((6, 6), Some(120)));
        assert!(!by((6, 12), Some(116)) && by((6, 12), Some(117)) && !by((6, 12), None));
        assert!(!by((6, 18), Some(49)) && by((6, 18), Some(50)));
        assert!(!by((7, 1), Some(30)) && !by((7, 2), Some(3)) && by((7, 2), Some(4)));
        assert!(by((7, 3), None) && by((8, 0), None));
    }
}
