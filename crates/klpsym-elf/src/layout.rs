//! The module loader's core layout (kernel/module/main.c `layout_sections()`,
//! kernels 4.8 to 6.3): one allocation holding text, then read-only data, then
//! ro-after-init data, then writable data, each class page-aligned when
//! CONFIG_STRICT_MODULE_RWX is on. With it a single known base (the address in
//! /proc/modules) gives every core section's address.
//!
//! 6.4 split the allocation per class (`mod_mem`), so there a single base is not
//! enough; use [`crate::place_module`] with the kernel's lines instead.

use std::collections::HashMap;

use crate::module::{is_init_section, ModuleOptions, ModuleSymbols};
use crate::raw::SHF_RO_AFTER_INIT;
use crate::raw::{SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE};

/// Address of every core section (section index -> address) for a module whose
/// core allocation starts at `base`; `page_size` is the alignment between
/// classes (4096 with CONFIG_STRICT_MODULE_RWX, 1 without).
pub fn layout_core_sections(mods: &ModuleSymbols, base: u64, page_size: u64) -> HashMap<u32, u64> {
    let opts = ModuleOptions::default();
    // (required flags, forbidden flags), in the kernel's order; ARCH_SHF_SMALL
    // (ia64 only) is not modelled.
    let masks: [(u64, u64); 4] = [
        (SHF_EXECINSTR | SHF_ALLOC, 0),
        (SHF_ALLOC, SHF_WRITE),
        (SHF_RO_AFTER_INIT | SHF_ALLOC, 0),
        (SHF_WRITE | SHF_ALLOC, 0),
    ];
    let align_up = |v: u64, a: u64| {
        let a = a.max(1);
        v.div_ceil(a).saturating_mul(a)
    };
    let mut placed: HashMap<u32, u64> = HashMap::new();
    let mut size = 0u64;
    for (required, forbidden) in masks {
        for s in &mods.sections {
            if s.index == 0
                || s.flags & required != required
                || s.flags & forbidden != 0
                || placed.contains_key(&s.index)
                || is_init_section(&s.name, opts)
            {
                continue;
            }
            size = align_up(size, s.align);
            placed.insert(s.index, size);
            size = size.saturating_add(s.size);
        }
        size = align_up(size, page_size);
    }
    placed
        .into_iter()
        .map(|(i, off)| (i, base.wrapping_add(off)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::module_kallsyms;
    use klpsym_testkit::elf::{At, Fixture};
    use object::{Architecture, SectionKind};

    #[test]
    fn classes_in_kernel_order_with_page_alignment() {
        let mut f = Fixture::new(Architecture::X86_64);
        let data = f.section(".data", SectionKind::Data, &[]);
        let text = f.section(".text", SectionKind::Text, &[0x90; 0x1234]);
        f.section(".init.text", SectionKind::Text, &[]);
        f.section(".modinfo", SectionKind::ReadOnlyData, b"name=lay\0");
        let ro = f.section(".rodata", SectionKind::ReadOnlyData, &[]);
        let rai = f.section(".data..ro_after_init", SectionKind::Data, &[]);
        f.sym("t", At::Sec(text), 0, 'l', 'f');
        f.sym("d", At::Sec(data), 0, 'l', 'o');
        f.sym("r", At::Sec(ro), 0, 'l', 'o');
        f.sym("a", At::Sec(rai), 0, 'l', 'o');
        let m = module_kallsyms(&f.bytes()).unwrap();
        let by_name = |bases: &HashMap<u32, u64>, n: &str| {
            let s = m.sections.iter().find(|s| s.name == n).unwrap();
            bases.get(&s.index).copied()
        };
        let base = 0xffff_ffff_c000_0000;
        let paged = layout_core_sections(&m, base, 4096);
        assert_eq!(by_name(&paged, ".text"), Some(base));
        assert_eq!(by_name(&paged, ".rodata"), Some(base + 0x2000));
        assert_eq!(by_name(&paged, ".data..ro_after_init"), Some(base + 0x3000));
        assert_eq!(by_name(&paged, ".data"), Some(base + 0x4000));
        assert_eq!(by_name(&paged, ".init.text"), None);
        assert_eq!(by_name(&paged, ".modinfo"), None);
        let packed = layout_core_sections(&m, base, 1);
        assert_eq!(by_name(&packed, ".rodata"), Some(base + 0x1234));
        assert_eq!(by_name(&packed, ".data"), Some(base + 0x3234));
    }
}
