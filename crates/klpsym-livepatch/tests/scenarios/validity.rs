//! `elf_validity_check()` (`elf_validity_cache_copy()` since 6.4, kernel/module/main.c): the
//! ELF header, met after `module_sig_check()`, and `.gnu.linkonce.this_module`'s type and
//! flags (6.4+).

use super::*;

/// `bytes` with `value` written at offset `field` of section `index`'s ELF64 header.
fn with_shdr_field(bytes: &[u8], index: u32, field: usize, value: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let shoff = u64::from_le_bytes(out[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(out[0x3a..0x3c].try_into().unwrap()) as usize;
    let at = shoff + index as usize * shentsize + field;
    out[at..at + value.len()].copy_from_slice(value);
    out
}

fn arm64_module() -> Vec<u8> {
    build_module(&ModSpec {
        arch: Arch::Aarch64,
        text_refs: refs(&[("static_helper", elf::R_AARCH64_CALL26, 0)]).text_refs,
        ..ModSpec::default()
    })
}

fn x86_target<'a>(
    k: &'a klpsym_core::SymbolTable,
    version: (u32, u32),
    facts: LoaderFacts<'a>,
) -> Target<'a> {
    Target::new(
        k,
        KernelRules::for_version(version.0, version.1),
        Arch::X86_64,
    )
    .with_loader(LoaderFacts {
        machine: Some(Fact::new(62, "the image")),
        ..facts
    })
}

/// `load_module()` runs `module_sig_check()` before `elf_validity_check()`, and without
/// CONFIG_MODULES there is no loader at all: a module for another architecture is refused by
/// those first, never by its header.
#[test]
fn the_header_is_not_reached_without_a_loader_or_past_an_enforced_signature() {
    let bytes = arm64_module();
    let m = LivepatchModule::parse(&bytes).unwrap();
    let k = kernel();
    for (facts, kind, errno) in [
        (
            LoaderFacts {
                modules: Some(Fact::new(true, "config")),
                sig_force: Some(Fact::new(true, "config")),
                ..LoaderFacts::default()
            },
            ProblemKind::UnsignedModule,
            129,
        ),
        (
            LoaderFacts {
                modules: Some(Fact::new(false, "config")),
                ..LoaderFacts::default()
            },
            ProblemKind::ModulesUnsupported,
            38,
        ),
    ] {
        let r = check(&m, &x86_target(&k, (6, 1), facts));
        assert_eq!(r.verdict.errno, Some(errno), "{r:#?}");
        assert_eq!(only_problem(&r).kind, kind, "{r:#?}");
        assert!(
            r.problems.iter().all(|p| p.kind != ProblemKind::ElfHeader),
            "{:#?}",
            r.problems
        );
    }
    // Signatures not enforced: the header refuses it, and says why (its machine, not its type).
    let facts = LoaderFacts {
        modules: Some(Fact::new(true, "config")),
        sig_force: Some(Fact::new(false, "config")),
        ..LoaderFacts::default()
    };
    let r = check(&m, &x86_target(&k, (6, 1), facts));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::ElfHeader);
    assert!(
        p.hint
            .contains("built for another architecture (e_machine 183"),
        "{}",
        p.hint
    );
}

/// 6.4+: `.gnu.linkonce.this_module` must have contents (not SHT_NOBITS) and occupy memory
/// (SHF_ALLOC), each refused with the kernel's line and -ENOEXEC, whatever the size of the
/// target's `struct module` (unknown here).
#[test]
fn this_module_must_have_contents_and_occupy_memory() {
    let bytes = build_module(&ModSpec::default());
    let o = ElfObject::parse(&bytes).unwrap();
    let s = o.section_by_name(".gnu.linkonce.this_module").unwrap();
    assert_ne!(s.flags & elf::SHF_ALLOC, 0);
    let (i, flags) = (s.index, s.flags);
    let nobits = with_shdr_field(&bytes, i, 4, &elf::SHT_NOBITS.to_le_bytes());
    let unalloc = with_shdr_field(&bytes, i, 8, &(flags & !elf::SHF_ALLOC).to_le_bytes());
    let k = kernel();
    let facts = || LoaderFacts {
        modules: Some(Fact::new(true, "config")),
        ..LoaderFacts::default()
    };
    for (b, line) in [
        (
            &nobits,
            "module lp: .gnu.linkonce.this_module section must have a size set",
        ),
        (
            &unalloc,
            "module lp: .gnu.linkonce.this_module must occupy memory during process execution",
        ),
    ] {
        let m = LivepatchModule::parse(b).expect("parse");
        for v in [(6, 12), (7, 2)] {
            let r = check(&m, &x86_target(&k, v, facts()));
            assert_eq!(
                (r.verdict.kind, r.verdict.errno),
                (PatchVerdictKind::RefusedAtLoad, Some(8)),
                "{v:?} {line}: {r:#?}"
            );
            let p = only_problem(&r);
            assert_eq!(p.kind, ProblemKind::ThisModule, "{v:?}");
            assert_eq!(p.log, [line], "{v:?}");
        }
    }
    // The unedited module passes (the size is not known, so not checked).
    let m = LivepatchModule::parse(&bytes).unwrap();
    let r = check(&m, &x86_target(&k, (6, 12), facts()));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
}

/// 6.4+: exactly one `.gnu.linkonce.this_module`; two are refused, with the line of each
/// version: "Only one ... must exist." (6.12), "Exactly one ... must exist." (7.2, from
/// `elf_validity_cache_index_mod()`).
#[test]
fn a_second_this_module_section_is_refused() {
    let bytes = build_module(&ModSpec::default());
    let o = ElfObject::parse(&bytes).unwrap();
    let this = o.section_by_name(".gnu.linkonce.this_module").unwrap();
    let (flags, size) = (this.flags, this.size);
    let two = edit(&bytes, |_, ed| {
        ed.add_section(klpsym_livepatch::edit::NewSection {
            name: ".gnu.linkonce.this_module".into(),
            sh_type: 1, // SHT_PROGBITS
            flags,
            link: 0,
            info: 0,
            addralign: 64,
            entsize: 0,
            data: vec![0; size as usize],
        });
    });
    let m = LivepatchModule::parse(&two).expect("parse");
    let k = kernel();
    for (v, line) in [
        (
            (6, 12),
            "module lp: Only one .gnu.linkonce.this_module section must exist.",
        ),
        (
            (7, 2),
            "module lp: Exactly one .gnu.linkonce.this_module section must exist.",
        ),
    ] {
        let facts = LoaderFacts {
            modules: Some(Fact::new(true, "config")),
            ..LoaderFacts::default()
        };
        let r = check(&m, &x86_target(&k, v, facts));
        assert_eq!(r.verdict.errno, Some(8), "{v:?}: {r:#?}");
        let p = only_problem(&r);
        assert_eq!(
            (p.kind, p.log.as_slice()),
            (ProblemKind::ThisModule, &[line.to_string()][..]),
            "{v:?}"
        );
    }
}
