//! `apply_relocations()` (kernel/module/main.c) meeting a klp relocation section while the
//! patch module loads (5.8+): a section whose `sh_info` names no section, or a section without
//! SHF_ALLOC, is skipped before `klp_apply_section_relocs()` is called.

use super::*;

/// `bytes` with section `index`'s `sh_info` (ELF64: the u32 at 0x2c of its header) set to
/// `info`.
fn with_sh_info(bytes: &[u8], index: u32, info: u32) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let shoff = u64::from_le_bytes(out[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(out[0x3a..0x3c].try_into().unwrap()) as usize;
    let at = shoff + index as usize * shentsize + 0x2c;
    out[at..at + 4].copy_from_slice(&info.to_le_bytes());
    out
}

#[test]
fn a_klp_section_for_no_allocated_section_is_skipped_at_load() {
    // A relocation that overflows when applied (see relocation_overflow_and_nonzero_target).
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_32, 0)]), &[]);
    let applied = check61(&out);
    assert_eq!(
        only_problem(&applied).kind,
        ProblemKind::RelocationOverflow,
        "{applied:#?}"
    );
    let o = ElfObject::parse(&out).unwrap();
    let klp = o.section_by_name(".klp.rela.vmlinux..text").unwrap().index;
    let strtab = o.section_by_name(".strtab").unwrap().index;
    let shnum = o.sections.len() as u32;
    for (what, info) in [("not SHF_ALLOC", strtab), ("out of range", shnum + 3)] {
        let bad = with_sh_info(&out, klp, info);
        let m = LivepatchModule::parse(&bad).expect("parse");
        assert_eq!(m.klp_sections[0].target, info, "{what}");
        let k = kernel();
        let off = ext4_unplaced();
        let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64)
            .with_unplaced_module("ext4", &off);
        let r = check(&m, &t);
        assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{what}: {r:#?}");
        assert!(r.problems.is_empty(), "{what}: {:#?}", r.problems);
        assert!(r.relocations.is_empty(), "{what}: {:#?}", r.relocations);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("which is not allocated: the loader skips it")),
            "{what}: {:?}",
            r.warnings
        );
    }
}
