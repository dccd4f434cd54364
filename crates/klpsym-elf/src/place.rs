//! Giving a module's section-relative entries their run-time addresses.
//!
//! A .ko has no load address; the loader places each section. Two ways in:
//! the section bases are known ([`place_at_bases`]), or the running kernel's
//! /proc/kallsyms lines for the module are at hand ([`place_module`]): then every
//! section's base is derived from its first symbol and every other symbol must
//! agree, which also proves that our entries are the kernel's.

use std::collections::HashMap;

use crate::error::ElfError;
use crate::module::ModuleSymbols;

/// Absolute addresses for `mods.entries` (same order), matched one to one
/// against the kernel's lines for this module, `(address, type letter, name)` in
/// /proc/kallsyms order. Names and letters must be equal, and all symbols of a
/// section must share one base (`address - offset`); absolute symbols must show
/// their own value.
pub fn place_module(
    mods: &ModuleSymbols,
    kernel_lines: &[(u64, u8, &str)],
) -> Result<Vec<u64>, ElfError> {
    // The kernel can list more than the .ko's core symbols: seen on 6.1, a module patched by a
    // livepatch as it loads keeps its init function in /proc/kallsyms afterwards. Then the
    // .ko's entries must appear, in order, within the kernel's lines.
    let subsequence: Vec<(u64, u8, &str)>;
    let kernel_lines = if kernel_lines.len() > mods.entries.len() {
        let mut it = kernel_lines.iter();
        subsequence = mods
            .entries
            .iter()
            .filter_map(|e| it.find(|l| l.2 == e.name && l.1 == e.kind).copied())
            .collect();
        if subsequence.len() == mods.entries.len() {
            &subsequence[..]
        } else {
            kernel_lines
        }
    } else {
        kernel_lines
    };
    if kernel_lines.len() != mods.entries.len() {
        return Err(ElfError::Placement(format!(
            "module {}: the kernel lists {} symbols, the .ko gives {}{}",
            mods.name,
            kernel_lines.len(),
            mods.entries.len(),
            first_difference(mods, kernel_lines)
                .map(|d| format!("; first difference: {d}"))
                .unwrap_or_default()
        )));
    }
    if !kernel_lines.is_empty() && kernel_lines.iter().all(|l| l.0 == 0) {
        return Err(ElfError::Placement(format!(
            "module {}: every kernel address is 0 (hidden by kptr_restrict?); cannot place",
            mods.name
        )));
    }
    let mut bases: HashMap<u32, (u64, usize)> = HashMap::new();
    let mut out = Vec::with_capacity(mods.entries.len());
    for (i, (e, &(addr, kind, name))) in mods.entries.iter().zip(kernel_lines).enumerate() {
        if e.name != name || e.kind != kind {
            return Err(ElfError::Placement(format!(
                "module {}: entry {i}: kernel has {:?} {:?}, .ko gives {:?} {:?}",
                mods.name, kind as char, name, e.kind as char, e.name
            )));
        }
        match e.section_index {
            None => {
                if e.kind.eq_ignore_ascii_case(&b'a') && addr != e.addr {
                    return Err(ElfError::Placement(format!(
                        "module {}: entry {i} ({name}): absolute value {:#x} but kernel shows {addr:#x}",
                        mods.name, e.addr
                    )));
                }
                out.push(addr);
            }
            Some(sec) => {
                let base = addr.wrapping_sub(e.addr);
                match bases.get(&sec) {
                    None => {
                        bases.insert(sec, (base, i));
                    }
                    Some(&(b, first)) if b != base => {
                        return Err(ElfError::Placement(format!(
                            "module {}: entry {i} ({name}) in section {} puts the section at {base:#x}, \
                             entry {first} ({}) put it at {b:#x}",
                            mods.name,
                            e.section.unwrap_or("?"),
                            mods.entries.get(first).map_or("?", |e| e.name)
                        )));
                    }
                    Some(_) => {}
                }
                out.push(addr);
            }
        }
    }
    Ok(out)
}

/// Section bases implied by a successful [`place_module`]: section index ->
/// address of the section's start.
pub fn section_bases(mods: &ModuleSymbols, addrs: &[u64]) -> HashMap<u32, u64> {
    mods.entries
        .iter()
        .zip(addrs)
        .filter_map(|(e, &a)| Some((e.section_index?, a.wrapping_sub(e.addr))))
        .collect()
}

/// Absolute addresses from known section bases (section index -> address).
/// Absolute symbols keep their value; a symbol whose section has no base is an
/// error naming it.
pub fn place_at_bases(
    mods: &ModuleSymbols,
    bases: &HashMap<u32, u64>,
) -> Result<Vec<u64>, ElfError> {
    mods.entries
        .iter()
        .map(|e| match e.section_index {
            None => Ok(e.addr),
            Some(s) => bases
                .get(&s)
                .map(|b| b.wrapping_add(e.addr))
                .ok_or_else(|| {
                    ElfError::Placement(format!(
                        "module {}: no base given for section {s} ({}) of symbol {}",
                        mods.name,
                        e.section.unwrap_or("?"),
                        e.name
                    ))
                }),
        })
        .collect()
}

fn first_difference(mods: &ModuleSymbols, lines: &[(u64, u8, &str)]) -> Option<String> {
    let n = mods.entries.len().max(lines.len());
    (0..n).find_map(|i| {
        let ours = mods.entries.get(i).map(|e| (e.kind, e.name));
        let theirs = lines.get(i).map(|l| (l.1, l.2));
        (ours != theirs).then(|| {
            format!(
                "at {i}: kernel {:?}, .ko {:?}",
                theirs.map(|(k, n)| format!("{} {n}", k as char)),
                ours.map(|(k, n)| format!("{} {n}", k as char))
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::module_kallsyms;
    use klpsym_testkit::elf::{At, Fixture};
    use object::{Architecture, SectionKind};

    fn sample() -> ModuleSymbols {
        let mut f = Fixture::new(Architecture::X86_64);
        let text = f.section(".text", SectionKind::Text, &[]);
        let data = f.section(".data", SectionKind::Data, &[]);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=placed\0");
        f.sym("a_fn", At::Sec(text), 0x10, 'l', 'f');
        f.sym("a_var", At::Sec(data), 0x8, 'l', 'o');
        f.sym("b_fn", At::Sec(text), 0x40, 'g', 'f');
        // Absolute symbols are never core symbols (st_shndx >= e_shnum).
        f.sym("an_abs", At::Abs, 0x1234, 'g', 'n');
        module_kallsyms(&f.bytes()).unwrap()
    }

    fn kernel_lines(m: &ModuleSymbols, addrs: &[u64]) -> Vec<(u64, u8, String)> {
        m.entries
            .iter()
            .zip(addrs)
            .map(|(e, &a)| (a, e.kind, e.name.to_owned()))
            .collect()
    }

    fn borrow(lines: &[(u64, u8, String)]) -> Vec<(u64, u8, &str)> {
        lines.iter().map(|(a, k, n)| (*a, *k, n.as_str())).collect()
    }

    fn bases(m: &ModuleSymbols) -> HashMap<u32, u64> {
        let idx = |n: &str| m.sections.iter().find(|s| s.name == n).unwrap().index;
        HashMap::from([
            (idx(".text"), 0xffff_ffff_c000_1000),
            (idx(".data"), 0xffff_ffff_c000_3000),
        ])
    }

    #[test]
    fn placement_round_trips_through_kernel_lines() {
        let m = sample();
        assert_eq!(m.entries.len(), 3, "{:?}", m.entries);
        let addrs = place_at_bases(&m, &bases(&m)).unwrap();
        assert_eq!(
            addrs,
            [
                0xffff_ffff_c000_1010,
                0xffff_ffff_c000_3008,
                0xffff_ffff_c000_1040
            ]
        );
        let lines = kernel_lines(&m, &addrs);
        assert_eq!(place_module(&m, &borrow(&lines)).unwrap(), addrs);
        assert_eq!(section_bases(&m, &addrs), bases(&m));
    }

    #[test]
    fn disagreeing_section_base_is_reported() {
        let m = sample();
        let mut addrs = place_at_bases(&m, &bases(&m)).unwrap();
        addrs[2] += 8; // b_fn no longer agrees with a_fn about .text
        let lines = kernel_lines(&m, &addrs);
        let err = place_module(&m, &borrow(&lines)).unwrap_err().to_string();
        assert!(err.contains("entry 2 (b_fn) in section .text"), "{err}");
    }

    #[test]
    fn name_letter_and_count_mismatches_are_reported() {
        let m = sample();
        let addrs = place_at_bases(&m, &bases(&m)).unwrap();
        let mut lines = kernel_lines(&m, &addrs);
        lines[1].1 = b'D';
        let err = place_module(&m, &borrow(&lines)).unwrap_err().to_string();
        assert!(err.contains("entry 1"), "{err}");
        lines.pop();
        let err = place_module(&m, &borrow(&lines)).unwrap_err().to_string();
        assert!(err.contains("lists 2 symbols, the .ko gives 3"), "{err}");
        let hidden: Vec<_> = kernel_lines(&m, &[0; 3]);
        let err = place_module(&m, &borrow(&hidden)).unwrap_err().to_string();
        assert!(err.contains("kptr_restrict"), "{err}");
    }

    #[test]
    fn missing_base_is_an_error() {
        let m = sample();
        let err = place_at_bases(&m, &HashMap::new()).unwrap_err().to_string();
        assert!(err.contains("no base given for section"), "{err}");
    }
}
