//! End-to-end scenarios of `convert`: round trips the kernel accepts, idempotence, pins (by
//! position and by source file) and refusals.

use crate::{check61, converted, refs, target};
use klpsym_livepatch::consts as elf;
use klpsym_livepatch::*;
use klpsym_testkit::module::*;

#[test]
fn convert_round_trip_is_accepted() {
    let spec = refs(&[
        ("static_helper", elf::R_X86_64_PLT32, -4),
        ("secret_var", elf::R_X86_64_PC32, -4),
        ("printk", elf::R_X86_64_PLT32, -4),
    ]);
    let (out, rep) = converted(&spec, &[]);
    assert_eq!(rep.conversions.len(), 2);
    assert_eq!(
        rep.sections_created,
        vec![".klp.rela.vmlinux..text".to_string()]
    );
    let m = LivepatchModule::parse(&out).unwrap();
    let names: Vec<&str> = m
        .klp_symbols
        .iter()
        .map(|&i| m.elf.symbols[i as usize].name.as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            ".klp.sym.vmlinux.static_helper,0",
            ".klp.sym.vmlinux.secret_var,0"
        ]
    );
    let s = &m.klp_sections[0];
    assert_eq!(s.relocs.len(), 2);
    let sec = &m.elf.sections[s.index as usize];
    assert_eq!(
        sec.flags,
        elf::SHF_ALLOC | elf::SHF_INFO_LINK | SHF_RELA_LIVEPATCH
    );
    assert_eq!(
        (sec.link, sec.entsize, sec.addralign),
        (m.elf.symtab_index, 24, 8)
    );
    assert_eq!(m.elf.sections[sec.info as usize].name, ".text");
    // printk (exported) stays an ordinary relocation; the moved ones are gone from .rela.text
    let rela_text = m.elf.section_by_name(".rela.text").unwrap();
    let left: Vec<&str> = m.elf.relas[rela_text.index as usize]
        .iter()
        .map(|r| m.elf.symbols[r.sym as usize].name.as_str())
        .collect();
    assert!(
        left.contains(&"printk") && !left.iter().any(|n| n.starts_with(".klp")),
        "{left:?}"
    );
    // symbol indices unchanged
    let orig_bytes = build_module(&spec);
    let orig = ElfObject::parse(&orig_bytes).unwrap();
    assert_eq!(orig.symbols.len(), m.elf.symbols.len());
    let r = check61(&out);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(r.relocations.len(), 2);
    assert_eq!(r.relocations[0].resolved, Some(0xffff_ffff_8120_0000));
    assert_eq!(r.relocations[0].expression, "S + A - P");
    assert_eq!(r.relocations[0].status, RelocationStatus::Applied);
    // with a placement, the value is exact
    let k = kernel();
    let t = target(&k).with_section_base(sec.info, 0xffff_ffff_c000_0000);
    let r = check(&m, &t);
    let rel = &r.relocations[0];
    let p = 0xffff_ffff_c000_0000u64 + rel.offset;
    assert_eq!(
        rel.value,
        Some(
            0xffff_ffff_8120_0000u64
                .wrapping_add((-4i64) as u64)
                .wrapping_sub(p)
        )
    );
}

#[test]
fn convert_twice_changes_nothing() {
    let spec = refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]);
    let (once, _) = converted(&spec, &[]);
    let k = kernel();
    let (twice, rep) = convert(&once, &target(&k), &[], &exported).unwrap();
    assert!(rep.unchanged);
    assert_eq!(once, twice);
}

/// A pin must match: a typo is refused, but the pin of a name already converted is not (found
/// by the convert fuzz target: converting twice with the same pins must change nothing).
#[test]
fn a_pin_that_matches_nothing_is_refused_unless_already_converted() {
    let spec = refs(&[("dup_fn", elf::R_X86_64_PLT32, -4)]);
    let pin = Pin::parse("dup_fn=2").unwrap();
    let (once, _) = converted(&spec, std::slice::from_ref(&pin));
    let k = kernel();
    let (twice, rep) = convert(&once, &target(&k), &[pin], &exported).unwrap();
    assert!(rep.unchanged);
    assert_eq!(once, twice);
    let typo = Pin::parse("dup_fm=2").unwrap();
    match convert(&build_module(&spec), &target(&k), &[typo], &exported) {
        Err(ConvertError::Refused(p)) => {
            assert!(
                p.iter()
                    .any(|l| l.contains("pin 'dup_fm=2' matches no symbol")),
                "{p:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn convert_ambiguity_needs_a_pin() {
    let spec = refs(&[("dup_fn", elf::R_X86_64_PLT32, -4)]);
    let k = kernel();
    let e = convert(&build_module(&spec), &target(&k), &[], &exported).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("'dup_fn' is defined 2 times"), "{msg}");
    // The library names the pin to give, not the command's flag (`klpsym convert` adds it).
    assert!(
        msg.contains("[OBJ:]dup_fn=POS") && !msg.contains("--"),
        "{msg}"
    );
    assert!(
        msg.contains("position 1  vmlinux  0xffffffff81300000"),
        "{msg}"
    );
    assert!(
        msg.contains("position 2  vmlinux  0xffffffff81400000"),
        "{msg}"
    );
    let (out, rep) = converted(&spec, &[Pin::parse("dup_fn=2").unwrap()]);
    assert!(rep.conversions[0].pinned);
    let r = check61(&out);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    assert_eq!(r.relocations[0].resolved, Some(0xffff_ffff_8140_0000));
    // a pin outside the range is refused
    let e = convert(
        &build_module(&spec),
        &target(&k),
        &[Pin::parse("vmlinux:dup_fn=3").unwrap()],
        &exported,
    )
    .unwrap_err();
    assert!(e.to_string().contains("matches no definition"));
}

#[test]
fn convert_refuses_bad_input() {
    let k = kernel();
    let t = target(&k);
    let e = convert(
        &build_module(&refs(&[("no_such_fn", elf::R_X86_64_PLT32, -4)])),
        &t,
        &[],
        &exported,
    )
    .unwrap_err();
    assert!(e.to_string().contains("'no_such_fn' is not defined"));
    let e = convert(
        &build_module(&refs(&[("static_helper", elf::R_X86_64_PC64 + 1, 0)])),
        &t,
        &[],
        &exported,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("cannot apply in a klp section"),
        "{e}"
    );
    let mut exec = build_module(&ModSpec::default());
    exec[16] = 2; // ET_EXEC
    assert!(matches!(
        convert(&exec, &t, &[], &exported),
        Err(ConvertError::Parse(ParseError::Unsupported(_)))
    ));
    let mut arm = build_module(&ModSpec::default());
    arm[18..20].copy_from_slice(&elf::EM_AARCH64.to_le_bytes());
    assert!(convert(&arm, &t, &[], &exported)
        .unwrap_err()
        .to_string()
        .contains("e_machine 183"));
    let nolp = ModSpec {
        livepatch: false,
        ..refs(&[("static_helper", elf::R_X86_64_PLT32, -4)])
    };
    assert!(convert(&build_module(&nolp), &t, &[], &exported)
        .unwrap_err()
        .to_string()
        .contains("livepatch=Y"));
    assert!(matches!(
        convert(b"garbage", &t, &[], &exported),
        Err(ConvertError::Parse(ParseError::NotElf))
    ));
}

#[test]
fn convert_drops_a_signature() {
    let spec = refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]);
    let mut signed = build_module(&spec);
    signed.extend_from_slice(&[0xAB; 4]);
    signed.extend_from_slice(&[0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 4]);
    signed.extend_from_slice(b"~Module signature appended~\n");
    let k = kernel();
    let (out, rep) = convert(&signed, &target(&k), &[], &exported).unwrap();
    assert!(rep.signature_dropped && rep.warnings[0].contains("signature"));
    assert_eq!(out, converted(&spec, &[]).0);
}

/// `--pin NAME@PATH`: the definition in that source file, matched on a path suffix.
#[test]
fn a_pin_by_source_file_chooses_the_position() {
    use klpsym_core::{ObjectId, SymbolTableBuilder};
    let mut b = SymbolTableBuilder::new();
    b.push(ObjectId::VMLINUX, 0xffff_ffff_8100_0000, b'T', "_text")
        .unwrap();
    b.push(ObjectId::VMLINUX, 0xffff_ffff_8130_0000, b't', "dup_fn")
        .unwrap();
    b.set_last_file("fs/inode.c");
    b.push(ObjectId::VMLINUX, 0xffff_ffff_8140_0000, b't', "dup_fn")
        .unwrap();
    b.set_last_file("fs/proc/inode.c");
    b.push(
        ObjectId::VMLINUX,
        0xffff_ffff_8180_0000,
        b'T',
        "klp_enable_patch",
    )
    .unwrap();
    let k = b.build();
    let spec = refs(&[("dup_fn", elf::R_X86_64_PLT32, -4)]);
    let m = build_module(&spec);
    let pin = Pin::parse("dup_fn@proc/inode.c").unwrap();
    assert_eq!(pin.file.as_deref(), Some("proc/inode.c"));
    let (_, rep) = convert(&m, &target(&k), &[pin], &exported).unwrap();
    assert_eq!(rep.conversions[0].position, 2);
    assert_eq!(rep.conversions[0].klp_name, ".klp.sym.vmlinux.dup_fn,2");
    // "inode.c" names both files: refused, the candidates listed with their files.
    let pin = Pin::parse("dup_fn@inode.c").unwrap();
    match convert(&m, &target(&k), &[pin], &exported) {
        Err(ConvertError::Refused(p)) => {
            assert!(
                p[0].contains("matches 2 definitions") && p[0].contains("fs/proc/inode.c"),
                "{p:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(Pin::parse("dup_fn@").is_err());
}
