//! Livepatch modules and target tables at real sizes, for tests, benchmarks and latency
//! measurements.
//!
//! [`crate::module::build_module`] writes a relocatable module from a [`ModSpec`] with `object::write`: modinfo,
//! `struct module`, the `klp_patch` → `klp_object[]` → `klp_func[]` tables and their
//! relocations, replacement functions, and references from the code to other symbols.
//! [`large_patch`] and [`large_module`] scale it to real sizes: tens of thousands of
//! relocations, a thousand functions.
//!
//! ```
//! use klpsym_testkit::patches::{large_patch, vmlinux_with};
//! use klpsym_livepatch::{check, Arch, KernelRules, LivepatchModule, Target, PatchVerdictKind};
//!
//! let names = ["vfs_read", "vfs_write", "do_sys_open"];
//! let table = vmlinux_with(&names);
//! let bytes = large_patch(&names, 100, 3);
//! let m = LivepatchModule::parse(&bytes).unwrap();
//! let r = check(&m, &Target::new(&table, KernelRules::for_version(6, 1), Arch::X86_64));
//! assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
//! assert_eq!(r.relocations.len(), 100);
//! ```

use std::collections::HashSet;

use klpsym_core::resched::Resched;
use klpsym_core::{ObjectId, SymbolTable, SymbolTableBuilder};

use klpsym_livepatch::consts as elf;
use klpsym_livepatch::edit::{encode_relas, ElfEditor, NewSection};
use klpsym_livepatch::{
    format_klp_section, format_klp_symbol, ElfObject, ElfRela, SHF_RELA_LIVEPATCH, SHN_LIVEPATCH,
};

use crate::module::{build_module, ModSpec, ObjSpec};

/// The relocation of reference `i` of a generated module: calls (`R_X86_64_PLT32`, addend -4)
/// and absolute pointers (`R_X86_64_64`) in turn.
fn reference(i: usize) -> (u32, i64) {
    if i.is_multiple_of(2) {
        (elf::R_X86_64_PLT32, -4)
    } else {
        (elf::R_X86_64_64, 0)
    }
}

/// The spec of a module named `name` whose code refers `relocs` times to `names` (in turn)
/// and whose vmlinux klp_object replaces `funcs` functions (`names` in turn, position 0).
fn spec<'a>(name: &'a str, names: &[&'a str], relocs: usize, funcs: usize) -> ModSpec<'a> {
    assert!(
        !names.is_empty(),
        "a generated module needs at least one name"
    );
    ModSpec {
        name,
        objects: vec![ObjSpec {
            name: None,
            funcs: (0..funcs).map(|i| (names[i % names.len()], 0)).collect(),
        }],
        text_refs: (0..relocs)
            .map(|i| {
                let (t, a) = reference(i);
                (names[i % names.len()], t, a)
            })
            .collect(),
        ..ModSpec::default()
    }
}

/// An x86_64 livepatch module, already converted: `funcs` klp_funcs in one vmlinux
/// klp_object replacing `names[0]`, `names[1]`, ... (in turn; pass at least `funcs` distinct
/// names, or the kernel refuses the duplicates), and `relocs` klp relocations in
/// `.klp.rela.vmlinux..text` (SHF_RELA_LIVEPATCH) against `.klp.sym.vmlinux.NAME,0` symbols
/// (SHN_LIVEPATCH), referring to `names` in turn (`R_X86_64_PLT32` and `R_X86_64_64`
/// alternately). `init_module` calls `klp_enable_patch`, which stays an ordinary relocation.
///
/// Written independently of `klpsym_livepatch::convert` (same section layout), so it can
/// check it. Panics when `names` is empty.
pub fn large_patch(names: &[&str], relocs: usize, funcs: usize) -> Vec<u8> {
    let plain = build_module(&spec("lp_large", names, relocs, funcs));
    let obj = ElfObject::parse(&plain).expect("the builder writes valid ELF");
    let wanted: HashSet<&str> = names.iter().copied().collect();
    let text = obj
        .section_by_name(".text")
        .expect("the builder writes .text")
        .index;
    let r = &mut Resched::none();
    let mut ed = ElfEditor::new_with(&obj, 0, r).expect("no cancel");
    let mut klp: HashSet<u32> = HashSet::new();
    for s in &obj.symbols {
        if s.index != 0 && s.is_undefined() && wanted.contains(s.name.as_str()) {
            let name = format_klp_symbol("vmlinux", &s.name, 0);
            ed.set_symbol(s.index, &name, SHN_LIVEPATCH, 0);
            klp.insert(s.index);
        }
    }
    let rela_text = obj
        .sections
        .iter()
        .find(|s| s.sh_type == elf::SHT_RELA && s.info == text)
        .expect("the builder writes .rela.text");
    let (moved, keep): (Vec<ElfRela>, Vec<ElfRela>) = obj.relas[rela_text.index as usize]
        .iter()
        .partition(|x| klp.contains(&x.sym));
    ed.set_contents(rela_text.index, encode_relas(&keep, r).expect("no cancel"));
    ed.add_section(NewSection {
        name: format_klp_section("vmlinux", ".text"),
        sh_type: elf::SHT_RELA,
        flags: elf::SHF_ALLOC | elf::SHF_INFO_LINK | SHF_RELA_LIVEPATCH,
        link: obj.symtab_index,
        info: text,
        addralign: 8,
        entsize: 24,
        data: encode_relas(&moved, r).expect("no cancel"),
    });
    ed.write_with(r).expect("a small module is written")
}

/// An ordinary (not yet converted) x86_64 livepatch module whose code has `relocs`
/// relocations against the undefined symbols `names` (in turn): the input of
/// `klpsym_livepatch::convert`. Its one vmlinux klp_func replaces `names[0]`. Panics when
/// `names` is empty.
pub fn large_module(names: &[&str], relocs: usize) -> Vec<u8> {
    build_module(&spec("lp_large", names, relocs, 1))
}

/// A vmlinux table holding each of `names` once (function symbols, 64 bytes apart), plus
/// `_text`, `printk` and `klp_enable_patch`: a target on which [`large_patch`] is accepted.
pub fn vmlinux_with(names: &[&str]) -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    let base = 0xffff_ffff_8100_0000u64;
    b.push(v, base, b'T', "_text").expect("valid symbol");
    let mut seen = HashSet::new();
    for (i, n) in names.iter().enumerate() {
        if seen.insert(*n) {
            b.push(v, base + 0x1000 + 64 * i as u64, b't', n)
                .expect("valid symbol");
        }
    }
    let end = base + 0x1000 + 64 * names.len() as u64;
    b.push(v, end + 0x1000, b'T', "printk")
        .expect("valid symbol");
    b.push(v, end + 0x2000, b'T', "klp_enable_patch")
        .expect("valid symbol");
    b.build()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use klpsym_core::resched::Cancelled;
    use klpsym_livepatch::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("generated_fn_{i}")).collect()
    }

    #[test]
    fn large_patch_is_accepted_with_every_relocation_and_function() {
        let owned = names(300);
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        let table = vmlinux_with(&names);
        let bytes = large_patch(&names, 5_000, 250);
        let m = LivepatchModule::parse(&bytes).unwrap();
        assert_eq!(m.klp_sections.len(), 1);
        assert_eq!(m.klp_sections[0].name, ".klp.rela.vmlinux..text");
        assert_eq!(m.klp_sections[0].relocs.len(), 5_000);
        assert_eq!(m.klp_symbols.len(), 300);
        let t = Target::new(&table, KernelRules::for_version(6, 1), Arch::X86_64);
        let r = check(&m, &t);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::Accepted,
            "{:#?}",
            r.problems
        );
        assert!(r.problems.is_empty());
        assert_eq!(r.relocations.len(), 5_000);
        assert!(r
            .relocations
            .iter()
            .all(|x| x.status == RelocationStatus::Applied));
        assert_eq!(r.relocations[1].symbol, ".klp.sym.vmlinux.generated_fn_1,0");
        assert_eq!(r.objects.len(), 1);
        assert_eq!(r.objects[0].funcs.len(), 250);
        for (i, f) in r.objects[0].funcs.iter().enumerate() {
            assert_eq!(f.old_name.as_deref(), Some(names[i]));
            assert_eq!(f.address, Some(0xffff_ffff_8100_1000 + 64 * i as u64));
        }
        // Before 5.8 the same relocations are applied at enable time: same outcome.
        let t = Target::new(&table, KernelRules::for_version(5, 4), Arch::X86_64);
        let r = check(&m, &t);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::Accepted,
            "{:#?}",
            r.problems
        );
        assert_eq!(r.relocations.len(), 5_000);
    }

    #[test]
    fn converting_large_module_gives_large_patch_sections() {
        let owned = names(200);
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        let table = vmlinux_with(&names);
        let t = Target::new(&table, KernelRules::for_version(6, 1), Arch::X86_64);
        let input = large_module(&names, 4_000);
        let (out, rep) = convert(&input, &t, &[], &|n: &str| n == "klp_enable_patch").unwrap();
        assert_eq!(rep.conversions.len(), 200);
        assert_eq!(
            rep.conversions.iter().map(|c| c.relocations).sum::<usize>(),
            4_000
        );
        assert_eq!(rep.sections_created, vec![".klp.rela.vmlinux..text"]);
        let m = LivepatchModule::parse(&out).unwrap();
        let r = check(&m, &t);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::Accepted,
            "{:#?}",
            r.problems
        );
        assert_eq!(r.relocations.len(), 4_000);
        assert_eq!(r.objects[0].funcs.len(), 1);
        // The converted module and the generated patch agree relocation by relocation.
        let direct = large_patch(&names, 4_000, 1);
        let d = check(&LivepatchModule::parse(&direct).unwrap(), &t);
        assert_eq!(d.verdict.kind, PatchVerdictKind::Accepted);
        let key = |x: &RelocationReport| (x.offset, x.r_type, x.symbol.clone(), x.value);
        assert_eq!(
            r.relocations.iter().map(key).collect::<Vec<_>>(),
            d.relocations.iter().map(key).collect::<Vec<_>>()
        );
        // Converting again changes nothing.
        let (again, second) = convert(&out, &t, &[], &|n: &str| n == "klp_enable_patch").unwrap();
        assert!(second.unchanged);
        assert_eq!(again, out);
    }

    #[test]
    fn check_and_convert_reach_points_and_can_be_cancelled() {
        let owned = names(100);
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        let table = vmlinux_with(&names);
        let t = Target::new(&table, KernelRules::for_version(6, 1), Arch::X86_64);
        let bytes = large_patch(&names, 3_000, 100);
        let exported = |n: &str| n == "klp_enable_patch";

        let mut r = Resched::none().with_interval(Duration::from_micros(1));
        let m =
            LivepatchModule::parse_with(&bytes, &StructLayouts::fallback(6, 1), &mut r).unwrap();
        let parse_points = r.stats().points;
        assert!(parse_points > 0, "{:?}", r.stats());
        let report = check_with(&m, &t, &mut r).unwrap();
        assert_eq!(report.verdict.kind, PatchVerdictKind::Accepted);
        assert!(r.stats().points > parse_points, "{:?}", r.stats());
        // At least a tick per relocation, twice (resolution, then application).
        assert!(r.stats().items >= 6_000, "{:?}", r.stats());
        report.drop_with_points(&mut r).unwrap();
        let input = large_module(&names, 3_000);
        let before = r.stats().points;
        convert_with(&input, &t, &[], &exported, &mut r).unwrap();
        assert!(r.stats().points > before, "{:?}", r.stats());
        m.drop_with_points(&mut r).unwrap();

        let cancelled = || {
            Resched::none()
                .with_interval(Duration::from_micros(1))
                .with_cancel_flag(Arc::new(AtomicBool::new(true)))
        };
        let m = LivepatchModule::parse(&bytes).unwrap();
        assert_eq!(check_with(&m, &t, &mut cancelled()), Err(Cancelled));
        assert_eq!(
            convert_with(&input, &t, &[], &exported, &mut cancelled()).map(|_| ()),
            Err(ConvertError::Cancelled)
        );
        assert!(matches!(
            LivepatchModule::parse_with(&bytes, &StructLayouts::fallback(6, 1), &mut cancelled()),
            Err(ParseError::Cancelled)
        ));
    }
}
