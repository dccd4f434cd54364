//! Symbol CRCs (CONFIG_MODVERSIONS) from a kernel image, without a symbol table.
//!
//! The module loader's `check_version()` compares a module's `__versions` with the CRC the
//! kernel keeps beside each export: `__kcrctab` (and `__kcrctab_gpl`) hold one `u32` per entry
//! of `__ksymtab` (`__ksymtab_gpl`), in the same order (both arrays are emitted per symbol and
//! sorted by name by the linker script). With CONFIG_KALLSYMS_ALL, kallsyms names the tables'
//! bounds (`__start___ksymtab`, `__stop___ksymtab`, `__start___kcrctab`, ...) and every entry
//! (`__ksymtab_<name>`), so the CRC of `<name>` is the `u32` at
//! `__start___kcrctab + 4 * (addr(__ksymtab_<name>) - __start___ksymtab) / sizeof(struct
//! kernel_symbol)`. The entry size is 12 where exports are place-relative
//! (CONFIG_HAVE_ARCH_PREL32_RELOCATIONS: x86_64, arm64) and 24 otherwise; it is taken from the
//! table sizes, which must agree.

use std::collections::HashMap;

use klpsym_resched::resched::{Cancelled, Resched};

use crate::KallsymsEntry;

/// Where virtual addresses of the decompressed kernel are in its bytes.
pub(crate) enum AddressMap<'a> {
    /// An ELF vmlinux: its loaded segments as (file offset, size, address).
    Segments(&'a [(u64, u64, u64)]),
    /// A raw image that starts at `_text` (arm64 Image, raw vmlinux).
    Linear { base: u64 },
}

impl AddressMap<'_> {
    fn offset(&self, va: u64) -> Option<usize> {
        match self {
            AddressMap::Segments(segs) => segs
                .iter()
                .find(|&&(_, s, v)| va >= v && va < v + s)
                .and_then(|&(o, _, v)| usize::try_from(o + (va - v)).ok()),
            AddressMap::Linear { base } => {
                va.checked_sub(*base).and_then(|o| usize::try_from(o).ok())
            }
        }
    }
}

/// The CRC of every exported symbol, by name; `None` when the image's kallsyms do not name the
/// tables (no CONFIG_KALLSYMS_ALL, no CONFIG_MODVERSIONS) or they do not add up.
pub(crate) fn image_crcs(
    data: &[u8],
    map: &AddressMap<'_>,
    entries: &[KallsymsEntry],
    resched: &mut Resched,
) -> Result<Option<HashMap<String, u32>>, Cancelled> {
    let mut bounds: HashMap<&str, u64> = HashMap::new();
    let mut ksymtab = 0usize;
    for e in entries {
        resched.tick()?;
        if e.name.starts_with("__start___k") || e.name.starts_with("__stop___k") {
            bounds.insert(e.name.as_str(), e.addr);
        }
        ksymtab += usize::from(e.name.starts_with("__ksymtab_"));
    }
    // Room for every export at once: growing the map rehashes all it holds in one stretch
    // (tens of thousands of entries: hundreds of microseconds).
    let mut out = HashMap::with_capacity(ksymtab);
    // 7.1 keeps one __ksymtab (GPL-only is a flag in __kflagstab): the _gpl pair is optional.
    for (sym, crc) in [("ksymtab", "kcrctab"), ("ksymtab_gpl", "kcrctab_gpl")] {
        let get = |n: String| bounds.get(n.as_str()).copied();
        let (Some(s0), Some(s1), Some(c0), Some(c1)) = (
            get(format!("__start___{sym}")),
            get(format!("__stop___{sym}")),
            get(format!("__start___{crc}")),
            get(format!("__stop___{crc}")),
        ) else {
            if sym == "ksymtab" {
                return Ok(None);
            }
            continue;
        };
        let (Some(syms), Some(crcs)) = (s1.checked_sub(s0), c1.checked_sub(c0)) else {
            return Ok(None);
        };
        if crcs % 4 != 0 || crcs == 0 {
            return Ok(None);
        }
        let n = crcs / 4;
        if syms % n != 0 || !matches!(syms / n, 12 | 24) {
            return Ok(None);
        }
        let entry = syms / n;
        let Some(start) = map.offset(c0) else {
            return Ok(None);
        };
        let Some(table) = usize::try_from(crcs)
            .ok()
            .and_then(|len| data.get(start..start.checked_add(len)?))
        else {
            return Ok(None);
        };
        let prefix = "__ksymtab_";
        for e in entries {
            resched.tick()?;
            let Some(name) = e.name.strip_prefix(prefix) else {
                continue;
            };
            if e.addr < s0 || e.addr >= s1 {
                continue;
            }
            let off = e.addr - s0;
            if off % entry != 0 {
                return Ok(None);
            }
            let i = usize::try_from(off / entry * 4).unwrap_or(usize::MAX);
            let Some(b) = table.get(i..i + 4) else {
                return Ok(None);
            };
            out.insert(
                name.to_string(),
                u32::from_le_bytes(b.try_into().expect("4 bytes")),
            );
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(addr: u64, name: &str) -> KallsymsEntry {
        KallsymsEntry {
            addr,
            kind: b'r',
            name: name.into(),
        }
    }

    #[test]
    fn crcs_follow_the_ksymtab_index() {
        // Two plain exports, one GPL; tables at 0x1000.. in a linear image based at 0x1000.
        let base = 0x1000;
        let mut data = vec![0u8; 0x100];
        for (i, c) in [0x11111111u32, 0x22222222, 0x33333333].iter().enumerate() {
            data[0x80 + 4 * i..0x84 + 4 * i].copy_from_slice(&c.to_le_bytes());
        }
        let entries = vec![
            e(base, "__start___ksymtab"),
            e(base, "__ksymtab_a"),
            e(base + 12, "__ksymtab_b"),
            e(base + 24, "__stop___ksymtab"),
            e(base + 24, "__start___ksymtab_gpl"),
            e(base + 24, "__ksymtab_g"),
            e(base + 36, "__stop___ksymtab_gpl"),
            e(base + 0x80, "__start___kcrctab"),
            e(base + 0x88, "__stop___kcrctab"),
            e(base + 0x88, "__start___kcrctab_gpl"),
            e(base + 0x8c, "__stop___kcrctab_gpl"),
        ];
        let got = image_crcs(
            &data,
            &AddressMap::Linear { base },
            &entries,
            &mut Resched::none(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(got["a"], 0x11111111);
        assert_eq!(got["b"], 0x22222222);
        assert_eq!(got["g"], 0x33333333);
        // No kcrctab bounds (no CONFIG_MODVERSIONS): nothing.
        assert!(image_crcs(
            &data,
            &AddressMap::Linear { base },
            &entries[..7],
            &mut Resched::none()
        )
        .unwrap()
        .is_none());
    }
}
