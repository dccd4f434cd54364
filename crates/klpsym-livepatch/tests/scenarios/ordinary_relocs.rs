//! `apply_relocations()` (kernel/module/main.c; kernel/module.c before 5.19) over the
//! module's ordinary relocation sections: each SHT_RELA section whose target is in range and
//! SHF_ALLOC goes to the architecture's `apply_relocate_add()`; others are skipped; an
//! SHT_REL section fails ("module %s: REL relocation unsupported", -ENOEXEC). The loader
//! check counts what it met.

use super::*;

pub(crate) fn ordinary(spec: &ModSpec, text: Option<u64>) -> CheckReport {
    let k = kernel();
    let bytes = build_module(spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let mut t = target(&k).with_exports(&exported);
    if let Some(a) = text {
        let i = m.elf.section_by_name(".text").expect(".text").index;
        t = t.with_section_base(i, a);
    }
    check(&m, &t)
}

fn relocations_check(r: &CheckReport) -> &LoaderCheck {
    r.loader_checks
        .iter()
        .find(|c| c.check == "relocations")
        .expect("a relocations check")
}

#[test]
fn an_ordinary_relocation_that_overflows_refuses_the_load() {
    // A module built without -mcmodel=kernel: an absolute 32-bit reference to printk.
    let r = ordinary(&refs(&[("printk", elf::R_X86_64_32, 0)]), None);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::RelocationOverflow);
    assert_eq!(
        p.log,
        vec![
            "module: overflow in relocation type 10 val ffffffff81700000".to_string(),
            "module: `lp' likely not compiled with -mcmodel=kernel".to_string(),
        ]
    );
    assert_eq!(p.section.as_deref(), Some(".rela.text"));
    assert_eq!(relocations_check(&r).status, CheckStatus::Failed);
    let failed: Vec<_> = r
        .ordinary_relocations
        .iter()
        .filter(|x| x.status == RelocationStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].symbol, "printk");
}

#[test]
fn ordinary_relocations_refuse_unknown_types_and_dirty_places() {
    let r = ordinary(&refs(&[("printk", elf::R_X86_64_GOTPCREL, 0)]), None);
    assert_eq!(
        only_problem(&r).log,
        vec!["module: lp: Unknown rela relocation: 9".to_string()]
    );
    let dirty = ModSpec {
        dirty_slots: true,
        ..refs(&[("printk", elf::R_X86_64_PLT32, -4)])
    };
    let r = ordinary(&dirty, Some(0xffff_ffff_c000_0000));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::RelocationTargetNonzero);
    assert!(
        p.log[0].contains("existing value is nonzero for type 4"),
        "{:?}",
        p.log
    );
}

#[test]
fn placed_ordinary_relocations_have_exact_bytes() {
    let spec = refs(&[
        ("printk", elf::R_X86_64_PLT32, -4),
        ("printk", elf::R_X86_64_32S, 8),
        ("printk", elf::R_X86_64_64, 0),
    ]);
    let unplaced = ordinary(&spec, None);
    assert_eq!(unplaced.verdict.kind, PatchVerdictKind::Accepted);
    let pc = |r: &CheckReport| {
        r.ordinary_relocations
            .iter()
            .find(|x| {
                x.target_section == ".text"
                    && x.r_type == elf::R_X86_64_PLT32
                    && x.symbol == "printk"
            })
            .cloned()
            .expect("the PLT32 to printk")
    };
    let x = pc(&unplaced);
    // x86 never checks a PC32 for overflow: the verdict is known, the bytes are not.
    assert_eq!((x.status, x.bytes), (RelocationStatus::Applied, None));
    // A library message names inputs, never a command's flag (the command adds its own).
    let detail = &relocations_check(&unplaced).detail;
    assert!(
        detail.contains(klpsym_livepatch::PLACEMENT_HINT) && !detail.contains("--"),
        "{detail}"
    );
    let text = 0xffff_ffff_c000_0000u64;
    let placed = ordinary(&spec, Some(text));
    let x = pc(&placed);
    let want = 0xffff_ffff_8170_0000u64
        .wrapping_sub(4)
        .wrapping_sub(text + x.offset) as u32;
    assert_eq!(x.status, RelocationStatus::Applied);
    assert_eq!(x.bytes.as_deref(), Some(&want.to_le_bytes()[..]));
    let abs = placed
        .ordinary_relocations
        .iter()
        .find(|x| x.r_type == elf::R_X86_64_32S && x.symbol == "printk")
        .expect("the 32S");
    assert_eq!(abs.bytes.as_deref(), Some(&[0x08, 0x00, 0x70, 0x81][..]));
    assert_eq!(relocations_check(&placed).status, CheckStatus::Passed);
    // simplify_symbols(): a symbol defined in a placed section is its value plus the
    // section's address (the new function, which the patch tables point at).
    let bytes = build_module(&spec);
    let o = ElfObject::parse(&bytes).unwrap();
    let new_func = o
        .symbols
        .iter()
        .find(|s| s.name == "livepatch_0_0")
        .unwrap();
    let to_new: Vec<_> = placed
        .ordinary_relocations
        .iter()
        .filter(|x| x.symbol == "livepatch_0_0")
        .collect();
    assert!(!to_new.is_empty());
    for x in to_new {
        assert_eq!(x.resolved, Some(text + new_func.value), "{x:?}");
    }
    // The check counts as computed exactly the relocations whose bytes are known.
    for r in [&unplaced, &placed] {
        let exact = r
            .ordinary_relocations
            .iter()
            .filter(|x| x.status == RelocationStatus::Applied && x.bytes.is_some())
            .count();
        let detail = &relocations_check(r).detail;
        assert!(
            detail.contains(&format!(" {exact} computed, 0 refused")),
            "{detail}"
        );
    }
}

#[test]
fn ordinary_relocations_are_not_reached_after_an_unknown_symbol() {
    let r = ordinary(&refs(&[("not_exported_fn", elf::R_X86_64_32, 0)]), None);
    // The unknown symbol stops the load before apply_relocations().
    assert_eq!(only_problem(&r).kind, ProblemKind::UnknownSymbol);
    assert_eq!(relocations_check(&r).status, CheckStatus::NotReached);
}

/// The module built from `refs` with one more relocation section, `name` of `sh_type`
/// targeting section `info`, holding a relocation of type 10 (R_X86_64_32) to printk at
/// offset 0 of it: one that overflows wherever it is applied (printk is at 0xffffffff81700000).
fn with_extra_section(base: &[u8], name: &str, sh_type: u32, info: u32) -> Vec<u8> {
    let o = ElfObject::parse(base).unwrap();
    let printk = o.symbols.iter().find(|s| s.name == "printk").unwrap().index;
    let symtab = o.section_by_name(".symtab").unwrap().index;
    let r_info = (u64::from(printk) << 32) | u64::from(elf::R_X86_64_32);
    let mut data = Vec::new();
    data.extend_from_slice(&0u64.to_le_bytes());
    data.extend_from_slice(&r_info.to_le_bytes());
    let entsize = if sh_type == elf::SHT_RELA {
        data.extend_from_slice(&0i64.to_le_bytes());
        24
    } else {
        16
    };
    edit(base, |_, ed| {
        ed.add_section(klpsym_livepatch::edit::NewSection {
            name: name.into(),
            sh_type,
            flags: elf::SHF_INFO_LINK,
            link: symtab,
            info,
            addralign: 8,
            entsize,
            data,
        });
    })
}

/// "N relocation(s) in S section(s): ..." -> S.
fn sections_counted(r: &CheckReport) -> usize {
    let d = &relocations_check(r).detail;
    let s = d.split(" in ").nth(1).and_then(|x| x.split(' ').next());
    s.and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{d}"))
}

/// A RELA section whose target is not SHF_ALLOC, or out of range, is skipped (not counted,
/// its overflowing relocation never applied); an SHT_REL section is counted and refused.
#[test]
fn apply_relocations_skips_what_it_cannot_place_and_refuses_rel() {
    let base = build_module(&refs(&[("printk", elf::R_X86_64_PLT32, -4)]));
    let o = ElfObject::parse(&base).unwrap();
    // What apply_relocations() meets: the ordinary RELA sections with an allocated target.
    let met = o
        .sections
        .iter()
        .filter(|s| s.sh_type == elf::SHT_RELA && s.flags & SHF_RELA_LIVEPATCH == 0)
        .filter(|s| {
            o.sections
                .get(s.info as usize)
                .is_some_and(|t| t.flags & elf::SHF_ALLOC != 0)
        })
        .count();
    assert!(met >= 2, "{met}");
    let r = check61(&base);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(sections_counted(&r), met);
    let strtab = o.section_by_name(".strtab").unwrap().index;
    let text = o.section_by_name(".text").unwrap().index;
    let nsec = o.sections.len() as u32;
    for (what, info) in [("not SHF_ALLOC", strtab), ("out of range", nsec + 3)] {
        let m = with_extra_section(&base, ".rela.extra", elf::SHT_RELA, info);
        let r = check61(&m);
        assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{what}: {r:#?}");
        assert_eq!(sections_counted(&r), met, "{what}");
    }
    // The same relocation in an allocated target is applied, and overflows.
    let r = check61(&with_extra_section(
        &base,
        ".rela.extra",
        elf::SHT_RELA,
        text,
    ));
    assert_eq!(only_problem(&r).kind, ProblemKind::RelocationOverflow);
    let r = check61(&with_extra_section(&base, ".rel.extra", elf::SHT_REL, text));
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(8)),
        "{r:#?}"
    );
    let p = only_problem(&r);
    assert_eq!(
        (p.kind, p.section.as_deref()),
        (ProblemKind::RelocationType, Some(".rel.extra"))
    );
    assert_eq!(p.log, ["module lp: REL relocation unsupported"]);
    assert_eq!(relocations_check(&r).status, CheckStatus::Failed);
    assert_eq!(sections_counted(&r), met + 1);
    assert!(
        relocations_check(&r).detail.contains(" 1 refused"),
        "{}",
        relocations_check(&r).detail
    );
}

/// `bytes` with symbol `name`'s binding made STB_WEAK (ELF64: `st_info` at 4 of its entry).
fn weakened(bytes: &[u8], name: &str) -> Vec<u8> {
    let o = ElfObject::parse(bytes).unwrap();
    let index = o.symbols.iter().find(|s| s.name == name).unwrap().index as usize;
    let symtab = o.section_by_name(".symtab").unwrap();
    let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
    let shdr = shoff + symtab.index as usize * 64;
    let offset = u64::from_le_bytes(bytes[shdr + 0x18..shdr + 0x20].try_into().unwrap());
    let mut out = bytes.to_vec();
    let at = offset as usize + index * 24 + 4;
    out[at] = (elf::STB_WEAK << 4) | (out[at] & 0xf);
    out
}

/// `simplify_symbols()` lets an unresolved weak symbol through with the value 0, and the
/// relocation writes 0; the same symbol not weak is an unknown symbol, and its relocations
/// are never reached (nor given a value).
#[test]
fn an_unresolved_weak_symbol_is_zero() {
    let k = kernel();
    let strong = build_module(&refs(&[("maybe_there", elf::R_X86_64_64, 0)]));
    let weak = weakened(&strong, "maybe_there");
    let row = |r: &CheckReport| {
        r.ordinary_relocations
            .iter()
            .find(|x| x.symbol == "maybe_there")
            .cloned()
            .expect("the relocation to maybe_there")
    };
    let run = |b: &[u8]| {
        let m = LivepatchModule::parse(b).unwrap();
        check(&m, &target(&k).with_exports(&exported))
    };
    let r = run(&weak);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    let x = row(&r);
    assert_eq!(
        (x.status, x.resolved, x.bytes.as_deref()),
        (RelocationStatus::Applied, Some(0), Some(&[0u8; 8][..]))
    );
    let r = run(&strong);
    assert_eq!(only_problem(&r).kind, ProblemKind::UnknownSymbol);
    let x = row(&r);
    assert_eq!((x.status, x.resolved), (RelocationStatus::NotReached, None));
}

/// A target whose addresses are hidden (kptr_restrict: every address read as 0) knows no
/// export's address: an ordinary relocation's S is unknown, never the 0 it was shown.
#[test]
fn hidden_addresses_give_no_symbol_value() {
    let mut b = klpsym_core::SymbolTableBuilder::new();
    let v = klpsym_core::ObjectId::VMLINUX;
    for n in ["_text", "printk", "klp_enable_patch"] {
        b.push(v, 0, b'T', n).unwrap();
    }
    let k = b.build();
    assert!(k.addresses_hidden());
    let bytes = build_module(&refs(&[("printk", elf::R_X86_64_64, 0)]));
    let m = LivepatchModule::parse(&bytes).unwrap();
    let r = check(&m, &target(&k).with_exports(&exported));
    let x = r
        .ordinary_relocations
        .iter()
        .find(|x| x.symbol == "printk")
        .expect("the relocation to printk");
    assert_eq!((x.resolved, x.bytes.as_deref()), (None, None), "{x:?}");
}

/// An arm64 branch to an export reaches it from some places of the module area only: whether
/// `apply_relocate_add()` accepts it depends on where the loader puts the module, so the check
/// is "not checked" and says how many; an x86 module's PLT32 to an export is decided (x86
/// does not range-check it) and nothing is said to depend on the placement's range.
#[test]
fn a_branch_whose_range_depends_on_the_placement_is_not_checked() {
    let k = kernel();
    let spec = ModSpec {
        arch: Arch::Aarch64,
        ..refs(&[("printk", elf::R_AARCH64_CALL26, 0)])
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).unwrap();
    let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::Aarch64).with_exports(&exported);
    let r = check(&m, &t);
    let c = relocations_check(&r);
    assert_eq!(c.status, CheckStatus::NotChecked, "{c:?}");
    // The branches to exports (printk, and the init's klp_enable_patch): S known, P not.
    let n = r
        .ordinary_relocations
        .iter()
        .filter(|x| x.status == RelocationStatus::NeedsPlacement && x.resolved.is_some())
        .count();
    assert!(n >= 1);
    let says = format!("; {n} may overflow depending on where the loader places the module");
    assert!(c.detail.contains(&says), "{}", c.detail);
    let r = ordinary(&refs(&[("printk", elf::R_X86_64_PLT32, -4)]), None);
    let c = relocations_check(&r);
    assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
    assert!(!c.detail.contains("may overflow"), "{}", c.detail);
}

/// A relocation against a section symbol (no name of its own) is named by its section.
#[test]
fn section_symbols_are_named_by_their_section() {
    let bytes = build_module(&refs(&[("printk", elf::R_X86_64_PLT32, -4)]));
    let o = ElfObject::parse(&bytes).unwrap();
    let r = check61(&bytes);
    let mut named = 0;
    for s in o.sections.iter().filter(|s| s.sh_type == elf::SHT_RELA) {
        for (i, rela) in o.relas[s.index as usize].iter().enumerate() {
            let y = &o.symbols[rela.sym as usize];
            if !(y.name.is_empty() && y.kind() == elf::STT_SECTION) {
                continue;
            }
            let row = r
                .ordinary_relocations
                .iter()
                .find(|x| x.section == s.name && x.index == i)
                .unwrap_or_else(|| panic!("{} #{i}", s.name));
            assert_eq!(row.symbol, o.sections[usize::from(y.shndx)].name);
            named += 1;
        }
    }
    assert!(named >= 1, "no relocation against a section symbol");
}

/// Every allocated section placed: every relocation is exact, and the check says none
/// depends on the placement.
#[test]
fn with_every_section_placed_nothing_depends_on_the_placement() {
    let k = kernel();
    let bytes = build_module(&refs(&[("printk", elf::R_X86_64_PLT32, -4)]));
    let m = LivepatchModule::parse(&bytes).unwrap();
    let mut t = target(&k).with_exports(&exported);
    let mut at = 0xffff_ffff_c000_0000u64;
    for s in m
        .elf
        .sections
        .iter()
        .filter(|s| s.flags & elf::SHF_ALLOC != 0)
    {
        t = t.with_section_base(s.index, at);
        at += 0x1_0000;
    }
    let r = check(&m, &t);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert!(r.ordinary_relocations.len() >= 2);
    for x in &r.ordinary_relocations {
        assert!(x.bytes.is_some(), "{x:?}");
    }
    let c = relocations_check(&r);
    assert_eq!(c.status, CheckStatus::Passed);
    assert!(!c.detail.contains("depend on where"), "{}", c.detail);
}

/// A module's own symbol, not placed: an absolute 32-bit field cannot hold any address of
/// the module area (x86_64 modules live above 0xffffffffa0000000), so the relocation is
/// refused wherever the loader puts the module.
#[test]
fn an_absolute_32_bit_reference_to_the_module_itself_never_fits() {
    let base = build_module(&refs(&[("own_data", elf::R_X86_64_32, 0)]));
    let o = ElfObject::parse(&base).unwrap();
    let own = o
        .symbols
        .iter()
        .find(|s| s.name == "own_data")
        .unwrap()
        .index;
    let data = o.section_by_name(".data").expect(".data").index;
    let defined = edit(&base, |_, ed| {
        ed.set_symbol(own, "own_data", data as u16, 0)
    });
    let r = check61(&defined);
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(8)),
        "{r:#?}"
    );
    assert_eq!(only_problem(&r).kind, ProblemKind::RelocationOverflow);
}

/// A relocation against symbol 0 (STN_UNDEF): `simplify_symbols()` leaves its value 0, so
/// the field gets the addend alone (here in a zeroed data section of its own).
#[test]
fn a_relocation_against_symbol_zero_writes_its_addend() {
    let base = build_module(&refs(&[("printk", elf::R_X86_64_PLT32, -4)]));
    let o = ElfObject::parse(&base).unwrap();
    let symtab = o.section_by_name(".symtab").unwrap().index;
    let zero = o.sections.len() as u32;
    let rela = ElfRela {
        offset: 8,
        sym: 0,
        r_type: elf::R_X86_64_64,
        addend: 0x1234,
    };
    let data =
        klpsym_livepatch::edit::encode_relas(&[rela], &mut klpsym_core::Resched::none()).unwrap();
    let m = edit(&base, |_, ed| {
        let z = ed.add_section(klpsym_livepatch::edit::NewSection {
            name: ".data.zero".into(),
            sh_type: 1,                  // SHT_PROGBITS
            flags: elf::SHF_ALLOC | 0x1, // SHF_WRITE
            link: 0,
            info: 0,
            addralign: 8,
            entsize: 0,
            data: vec![0; 16],
        });
        assert_eq!(z, zero);
        ed.add_section(klpsym_livepatch::edit::NewSection {
            name: ".rela.data.zero".into(),
            sh_type: elf::SHT_RELA,
            flags: elf::SHF_INFO_LINK,
            link: symtab,
            info: zero,
            addralign: 8,
            entsize: 24,
            data,
        });
    });
    let r = check61(&m);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    let x = r
        .ordinary_relocations
        .iter()
        .find(|x| x.section == ".rela.data.zero")
        .expect("the relocation against symbol 0");
    assert_eq!(
        (x.resolved, x.bytes.as_deref()),
        (Some(0), Some(&0x1234u64.to_le_bytes()[..]))
    );
}
