//! End-to-end scenarios: modules written with `object::write`, converted, mutated into every
//! malformed shape the kernel rejects, and checked; one test per kernel verdict.

use crate::consts as elf;
use crate::edit::ElfEditor;
use crate::testutil::*;
use crate::*;

fn target(t: &klpsym_core::SymbolTable) -> Target<'_> {
    Target::new(t, KernelRules::for_version(6, 1), Arch::X86_64)
}

fn refs(r: &[(&'static str, u32, i64)]) -> ModSpec<'static> {
    ModSpec {
        text_refs: r.to_vec(),
        ..ModSpec::default()
    }
}

fn converted(spec: &ModSpec, pins: &[Pin]) -> (Vec<u8>, ConvertReport) {
    let k = kernel();
    let off = ext4_offline();
    let t = target(&k).with_offline_module("ext4", &off);
    convert(&build_module(spec), &t, pins, &exported).expect("convert")
}

fn check_bytes(bytes: &[u8], rules: KernelRules) -> CheckReport {
    let k = kernel();
    let off = ext4_offline();
    let m = LivepatchModule::parse(bytes).expect("parse");
    let t = Target::new(&k, rules, Arch::X86_64).with_offline_module("ext4", &off);
    check(&m, &t)
}

fn check61(bytes: &[u8]) -> CheckReport {
    check_bytes(bytes, KernelRules::for_version(6, 1))
}

/// Applies `f` to an editor over `bytes`.
fn edit(bytes: &[u8], f: impl FnOnce(&ElfObject<'_>, &mut ElfEditor<'_, '_>)) -> Vec<u8> {
    let obj = ElfObject::parse(bytes).unwrap();
    let mut ed = ElfEditor::new(&obj);
    f(&obj, &mut ed);
    ed.write().unwrap()
}

fn only_problem(r: &CheckReport) -> &Problem {
    let reached: Vec<&Problem> = r.problems.iter().filter(|p| p.reached).collect();
    assert_eq!(reached.len(), 1, "problems: {:#?}", r.problems);
    reached[0]
}

#[test]
fn plain_patch_is_accepted_and_described() {
    let r = check61(&build_module(&ModSpec::default()));
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{r:#?}");
    assert!(r.problems.is_empty());
    assert_eq!(r.objects.len(), 1);
    let f = &r.objects[0].funcs[0];
    assert_eq!(f.old_name.as_deref(), Some("cmdline_proc_show"));
    assert_eq!(f.address, Some(0xffff_ffff_8110_0000));
    assert_eq!(f.new_func.as_deref(), Some("livepatch_0_0"));
    let bytes = build_module(&ModSpec::default());
    let m = LivepatchModule::parse(&bytes).unwrap();
    assert_eq!(
        m.patch.as_ref().unwrap().discovery,
        patch::Discovery::InitCall
    );
    assert!(m.patch.as_ref().unwrap().certain);
    assert_eq!(m.name, "lp");
}

#[test]
fn patch_found_by_layout_without_init_call() {
    let spec = ModSpec {
        init_call: false,
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).unwrap();
    let p = m.patch.as_ref().unwrap();
    assert_eq!((p.discovery, p.certain), (patch::Discovery::Layout, true));
    assert_eq!(
        p.objects[0].funcs[0].old_name.as_deref(),
        Some("cmdline_proc_show")
    );
}

#[test]
fn struct_layout_from_btf_and_mismatch_note() {
    let spec = ModSpec {
        func_size: 160,
        objects: vec![ObjSpec {
            name: None,
            funcs: vec![("cmdline_proc_show", 0), ("static_helper", 0)],
        }],
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    // With the fallback (152) the stride is wrong, and the relocation pattern says so.
    let m = LivepatchModule::parse(&bytes).unwrap();
    let p = m.patch.as_ref().unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("layout probably differs")),
        "{p:#?}"
    );
    let btf = btf::build_btf(&[
        (
            "klp_func",
            160,
            &[("old_name", 0), ("new_func", 8), ("old_sympos", 16)],
        ),
        ("klp_object", 168, &[("name", 0), ("funcs", 8)]),
        ("klp_patch", 200, &[("mod", 0), ("objs", 8)]),
    ]);
    let l = btf::layouts_from_btf(&btf).unwrap();
    let m = LivepatchModule::parse_with(&bytes, &l).unwrap();
    let p = m.patch.as_ref().unwrap();
    assert_eq!(p.objects[0].funcs.len(), 2);
    assert_eq!(
        p.objects[0].funcs[1].old_name.as_deref(),
        Some("static_helper")
    );
    assert!(p.notes.is_empty());
}

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
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{r:#?}");
    assert_eq!(r.relocations.len(), 2);
    assert_eq!(r.relocations[0].resolved, Some(0xffff_ffff_8120_0000));
    assert_eq!(r.relocations[0].expression, "S + A - P");
    assert_eq!(r.relocations[0].status, "applied");
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
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
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

#[test]
fn module_objects_and_deferred_modules() {
    let spec = ModSpec {
        objects: vec![
            ObjSpec {
                name: None,
                funcs: vec![("cmdline_proc_show", 0)],
            },
            ObjSpec {
                name: Some("nf_tables"),
                funcs: vec![("nft_dup", 2)],
            },
            ObjSpec {
                name: Some("ext4"),
                funcs: vec![("ext4_fill_super", 0)],
            },
        ],
        ..refs(&[
            ("nft_helper", elf::R_X86_64_PLT32, -4),
            ("ext4_static", elf::R_X86_64_PLT32, -4),
        ])
    };
    let (out, rep) = converted(&spec, &[]);
    assert_eq!(
        rep.sections_created,
        vec![
            ".klp.rela.ext4..text".to_string(),
            ".klp.rela.nf_tables..text".to_string()
        ]
    );
    let r = check61(&out);
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{r:#?}");
    let states: Vec<ObjectState> = r.objects.iter().map(|o| o.state).collect();
    assert_eq!(
        states,
        vec![
            ObjectState::Loaded,
            ObjectState::Loaded,
            ObjectState::DeferredChecked
        ]
    );
    assert_eq!(r.objects[1].funcs[0].address, Some(0xffff_ffff_c010_0200));
    let ext4 = r
        .relocations
        .iter()
        .find(|x| x.section == ".klp.rela.ext4..text")
        .unwrap();
    assert!(ext4.offline);
    assert_eq!(ext4.resolved, Some(0x2000));
    // without ext4's .ko the object is unchecked, still accepted
    let k = kernel();
    let m = LivepatchModule::parse(&out).unwrap();
    let r = check(&m, &target(&k));
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
    assert_eq!(r.verdict.unchecked_modules, vec!["ext4".to_string()]);
}

#[test]
fn deferred_failure_refuses_the_module_later() {
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("ext4"),
            funcs: vec![("ext4_gone", 0)],
        }],
        ..ModSpec::default()
    };
    let r = check61(&build_module(&spec));
    assert_eq!(
        r.verdict.kind,
        VerdictKind::RefusedWhenModuleLoads,
        "{r:#?}"
    );
    assert_eq!(r.verdict.refused_modules, vec!["ext4".to_string()]);
    let p = only_problem(&r);
    assert_eq!(
        p.log,
        vec![
            "livepatch: symbol 'ext4_gone' not found in symbol table".to_string(),
            "livepatch: failed to initialize patch 'lp' for module 'ext4' (-22)".to_string(),
            "livepatch: patch 'lp' failed for module 'ext4', refusing to load module 'ext4'"
                .to_string(),
        ]
    );
    assert_eq!(
        p.stage,
        Stage::ModuleComing {
            module: "ext4".into()
        }
    );
}

#[test]
fn function_lookup_verdicts() {
    let mk = |name: &'static str, pos: u64| ModSpec {
        objects: vec![ObjSpec {
            name: None,
            funcs: vec![(name, pos)],
        }],
        ..ModSpec::default()
    };
    let r = check61(&build_module(&mk("dup_fn", 0)));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::Ambiguous);
    assert_eq!(
        p.log,
        vec![
            "livepatch: unresolvable ambiguity for symbol 'dup_fn' in object '(null)'".to_string()
        ]
    );
    assert_eq!(
        p.candidates.iter().map(|c| c.position).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (VerdictKind::RefusedAtLoad, Some(22))
    );
    assert_eq!(p.stage, Stage::PatchEnable);
    let r = check61(&build_module(&mk("dup_fn", 3)));
    assert_eq!(
        only_problem(&r).log,
        vec![
            "livepatch: symbol position 3 for symbol 'dup_fn' in object 'vmlinux' not found"
                .to_string()
        ]
    );
    let r = check61(&build_module(&mk("dup_fn", 2)));
    assert_eq!(r.objects[0].funcs[0].address, Some(0xffff_ffff_8140_0000));
    let r = check61(&build_module(&mk("cpumask_weight", 0)));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::SymbolNotFound);
    assert!(p.hint.contains("cpumask_weight.constprop.0"), "{}", p.hint);
    let r = check61(&build_module(&mk("cpumask_weight.constprop.0", 0)));
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
}

#[test]
fn duplicate_functions_fail_in_sysfs() {
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: None,
            funcs: vec![("dup_fn", 1), ("dup_fn", 1)],
        }],
        ..ModSpec::default()
    };
    let r = check61(&build_module(&spec));
    let p = r
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::DuplicateSysfsName)
        .unwrap();
    assert!(p.reached && p.errno == 17);
    assert_eq!(
        p.log[0],
        "sysfs: cannot create duplicate filename '/kernel/livepatch/lp/vmlinux/dup_fn,1'"
    );
}

#[test]
fn missing_livepatch_tag() {
    let r = check61(&build_module(&ModSpec {
        livepatch: false,
        ..ModSpec::default()
    }));
    let p = only_problem(&r);
    assert_eq!(
        p.log,
        vec!["livepatch: module lp is not marked as a livepatch module".to_string()]
    );
    assert_eq!(
        (p.kind, &p.stage),
        (ProblemKind::NotLivepatchModule, &Stage::PatchEnable)
    );
}

#[test]
fn unknown_symbols_fail_the_load() {
    let bytes = build_module(&refs(&[
        ("static_helper", elf::R_X86_64_PLT32, -4),
        ("printk", elf::R_X86_64_PLT32, -4),
    ]));
    let k = kernel();
    let m = LivepatchModule::parse(&bytes).unwrap();
    let t = target(&k).with_exports(&exported);
    let r = check(&m, &t);
    let p = only_problem(&r);
    assert_eq!(
        p.log,
        vec!["lp: Unknown symbol static_helper (err -2)".to_string()]
    );
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (VerdictKind::RefusedAtLoad, Some(2))
    );
}

fn klp_sym_index(m: &[u8], name: &str) -> u32 {
    let o = ElfObject::parse(m).unwrap();
    o.symbols.iter().find(|s| s.name == name).unwrap().index
}

fn klp_sec_index(m: &[u8], name: &str) -> u32 {
    ElfObject::parse(m)
        .unwrap()
        .section_by_name(name)
        .unwrap()
        .index
}

#[test]
fn malformed_symbol_and_section_names() {
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]), &[]);
    let si = klp_sym_index(&out, ".klp.sym.vmlinux.static_helper,0");
    let bad = edit(&out, |_, ed| {
        ed.set_symbol(si, ".klp.sym.vmlinux.static_helper", SHN_LIVEPATCH, 0)
    });
    let r = check61(&bad);
    let p = only_problem(&r);
    assert_eq!(
        p.log,
        vec![
            "livepatch: symbol .klp.sym.vmlinux.static_helper has an incorrectly formatted name"
                .to_string()
        ]
    );
    assert_eq!((&p.stage, r.verdict.errno), (&Stage::ModuleLoad, Some(22)));
    // not SHN_LIVEPATCH (defined in .text)
    let bad = edit(&out, |_, ed| {
        ed.set_symbol(si, ".klp.sym.vmlinux.static_helper,0", 1, 0)
    });
    let r = check61(&bad);
    assert_eq!(only_problem(&r).log, vec!["livepatch: symbol .klp.sym.vmlinux.static_helper,0 is not marked as a livepatch symbol".to_string()]);
    // a malformed section name
    let ki = klp_sec_index(&out, ".klp.rela.vmlinux..text");
    let bad = edit(&out, |_, ed| ed.rename_section(ki, ".klp.rela..text"));
    let r = check61(&bad);
    assert_eq!(
        only_problem(&r).log,
        vec!["livepatch: section .klp.rela..text has an incorrectly formatted name".to_string()]
    );
}

#[test]
fn undefined_klp_symbol_is_unknown_at_load() {
    // a klp symbol left SHN_UNDEF never reaches livepatch: simplify_symbols() rejects it
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]), &[]);
    let si = klp_sym_index(&out, ".klp.sym.vmlinux.static_helper,0");
    let bad = edit(&out, |_, ed| {
        ed.set_symbol(si, ".klp.sym.vmlinux.static_helper,0", 0, 0)
    });
    let r = check61(&bad);
    let p = &r.problems[0];
    assert!(p.reached);
    assert_eq!(
        p.log,
        vec!["lp: Unknown symbol .klp.sym.vmlinux.static_helper,0 (err -2)".to_string()]
    );
    assert_eq!(r.verdict.errno, Some(2));
    // the resolution error that would follow is listed, not reached
    assert!(r.problems[1..].iter().all(|p| !p.reached));
}

#[test]
fn vmlinux_symbol_in_module_section() {
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("nf_tables"),
            funcs: vec![("nft_helper", 0)],
        }],
        ..refs(&[("static_helper", elf::R_X86_64_PLT32, -4)])
    };
    let (out, _) = converted(&spec, &[]);
    // without an nf_tables object the section is never applied: a warning, no error
    let orphan = edit(
        &converted(&refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]), &[]).0,
        |o, ed| {
            ed.rename_section(
                o.section_by_name(".klp.rela.vmlinux..text").unwrap().index,
                ".klp.rela.nf_tables..text",
            )
        },
    );
    let r = check61(&orphan);
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
    assert!(
        r.warnings.iter().any(|w| w.contains("never applies")),
        "{:?}",
        r.warnings
    );
    let ki = klp_sec_index(&out, ".klp.rela.vmlinux..text");
    let bad = edit(&out, |_, ed| {
        ed.rename_section(ki, ".klp.rela.nf_tables..text")
    });
    let r = check61(&bad);
    let p = only_problem(&r);
    assert_eq!(p.log, vec!["livepatch: invalid access to vmlinux symbol 'static_helper' from module-specific livepatch relocation section".to_string()]);
    assert_eq!(p.stage, Stage::PatchEnable);
    // before 5.8 there was no such check: the symbol resolves
    let r = check_bytes(&bad, KernelRules::for_version(5, 4));
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{r:#?}");
}

#[test]
fn ksym_name_len_depends_on_the_version() {
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]), &[]);
    let si = klp_sym_index(&out, ".klp.sym.vmlinux.static_helper,0");
    let long = format!(".klp.sym.vmlinux.{},0", "n".repeat(200));
    let bad = edit(&out, |_, ed| ed.set_symbol(si, &long, SHN_LIVEPATCH, 0));
    assert_eq!(
        only_problem(&check_bytes(&bad, KernelRules::for_version(6, 0))).kind,
        ProblemKind::BadSymbolName
    );
    assert_eq!(
        only_problem(&check61(&bad)).kind,
        ProblemKind::SymbolNotFound
    );
}

#[test]
fn relocation_overflow_and_nonzero_target() {
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_32, 0)]), &[]);
    let r = check61(&out);
    let p = only_problem(&r);
    assert_eq!(
        p.log,
        vec![
            "overflow in relocation type 10 val ffffffff81200000".to_string(),
            "`lp' likely not compiled with -mcmodel=kernel".to_string()
        ]
    );
    assert_eq!(
        (p.kind, r.verdict.errno),
        (ProblemKind::RelocationOverflow, Some(8))
    );
    assert_eq!(r.relocations[0].status, "failed");
    // 32S of the same address fits
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_32S, 0)]), &[]);
    let r = check61(&out);
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
    assert_eq!(r.relocations[0].bytes.as_deref(), Some("00002081"));
    let dirty = ModSpec {
        dirty_slots: true,
        ..refs(&[("static_helper", elf::R_X86_64_64, 0)])
    };
    let (out, _) = converted(&dirty, &[]);
    let r = check61(&out);
    assert_eq!(
        only_problem(&r).log,
        vec!["x86/modules: Invalid relocation target, existing value is nonzero for type 1, loc <hashed %p>, val ffffffff81200000".to_string()]
    );
}

#[test]
fn vmlinux_relocations_move_to_enable_before_5_8() {
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_32, 0)]), &[]);
    let r = check_bytes(&out, KernelRules::for_version(5, 4));
    assert_eq!(only_problem(&r).stage, Stage::PatchEnable);
    assert_eq!(check61(&out).problems[0].stage, Stage::ModuleLoad);
}

#[test]
fn later_problems_are_listed_but_not_reached() {
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: None,
            funcs: vec![("dup_fn", 0), ("missing_fn", 0)],
        }],
        ..ModSpec::default()
    };
    let r = check61(&build_module(&spec));
    assert_eq!(r.problems.len(), 2);
    assert!(r.problems[0].reached && !r.problems[1].reached);
}

#[test]
fn report_serializes_with_stable_fields() {
    let r = check61(&build_module(&ModSpec {
        livepatch: false,
        ..ModSpec::default()
    }));
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"]["kind"], "refused_at_load");
    assert_eq!(v["problems"][0]["kind"], "not_livepatch_module");
    assert_eq!(v["problems"][0]["stage"], "patch_enable");
    assert_eq!(v["problems"][0]["errno_name"], "EINVAL");
    assert_eq!(v["ksym_name_len"], 512);
    let ok = check61(&build_module(&ModSpec::default()));
    let v: serde_json::Value = serde_json::to_value(&ok).unwrap();
    assert_eq!(v["objects"][0]["funcs"][0]["address"], "0xffffffff81100000");
}

#[test]
fn readelf_accepts_the_converted_module() {
    let spec = refs(&[
        ("static_helper", elf::R_X86_64_PLT32, -4),
        ("nft_helper", elf::R_X86_64_PC32, -4),
    ]);
    let (out, _) = converted(&spec, &[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lp.ko");
    std::fs::write(&path, &out).unwrap();
    let res = std::process::Command::new("readelf")
        .args(["-a", "-W"])
        .arg(&path)
        .output();
    let Ok(o) = res else {
        eprintln!("readelf not found: skipped");
        return;
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(!text.to_lowercase().contains("warning"), "{text}");
    assert!(text.contains(".klp.rela.vmlinux..text"));
    assert!(text.contains(".klp.sym.nf_tables.nft_helper,0"));
}

#[test]
fn arm64_module_round_trip() {
    let spec = ModSpec {
        arch: Arch::Aarch64,
        ..refs(&[("static_helper", elf::R_AARCH64_CALL26, 0)])
    };
    let k = kernel();
    let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::Aarch64);
    let (out, rep) = convert(&build_module(&spec), &t, &[], &exported).unwrap();
    assert_eq!(
        rep.conversions[0].klp_name,
        ".klp.sym.vmlinux.static_helper,0"
    );
    let m = LivepatchModule::parse(&out).unwrap();
    assert_eq!(m.arch, Arch::Aarch64);
    let p = m.patch.as_ref().unwrap();
    assert_eq!((p.discovery, p.certain), (patch::Discovery::InitCall, true));
    // without a placement, the branch range check depends on P
    let r = check(&m, &t);
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{r:#?}");
    assert_eq!(r.relocations[0].status, "needs_placement");
    // placed 64 KiB below the target: bl with imm26 = 0x4000
    let text = m.elf.section_by_name(".text").unwrap().index;
    let off = r.relocations[0].offset;
    let t = t.with_section_base(text, 0xffff_ffff_8120_0000 - 0x1_0000 - off);
    let r = check(&m, &t);
    let rel = &r.relocations[0];
    assert_eq!(rel.status, "applied");
    // the fixture's slot holds no opcode (zero): only imm26 = 0x10000 >> 2 is filled in
    assert_eq!(rel.bytes.as_deref(), Some("00400000"));
    assert_eq!(rel.value, Some(0x1_0000));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Corrupted modules are errors or reports, never panics.
    #[test]
    fn corrupted_modules_never_panic(
        flips in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 1..8),
        cut in proptest::option::of(64usize..4096),
    ) {
        let spec = ModSpec {
            objects: vec![ObjSpec { name: None, funcs: vec![("dup_fn", 2)] }, ObjSpec { name: Some("ext4"), funcs: vec![("ext4_static", 0)] }],
            ..refs(&[("static_helper", elf::R_X86_64_PLT32, -4), ("nft_helper", elf::R_X86_64_64, 0)])
        };
        let (mut bytes, _) = converted(&spec, &[]);
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        if let Some(c) = cut {
            bytes.truncate(c.min(bytes.len()));
        }
        if let Ok(m) = LivepatchModule::parse(&bytes) {
            let _ = check61(&bytes);
            let _ = m.patch.is_ok();
        }
        let k = kernel();
        let _ = convert(&bytes, &target(&k), &[], &exported);
    }
}

#[test]
fn pseudo_objects_are_not_candidates() {
    let mut b = klpsym_core::SymbolTableBuilder::new();
    b.push(
        klpsym_core::ObjectId::VMLINUX,
        0xffff_ffff_8100_0000,
        b't',
        "tramp",
    )
    .unwrap();
    let f = b.object("__builtin__ftrace", klpsym_core::ObjectKind::Pseudo);
    b.push(f, 0xffff_ffff_a000_0000, b't', "tramp").unwrap();
    let k = b.build();
    let (_, rep) = convert(
        &build_module(&refs(&[("tramp", elf::R_X86_64_PLT32, -4)])),
        &target(&k),
        &[],
        &exported,
    )
    .unwrap();
    assert_eq!(
        (
            rep.conversions[0].object.as_str(),
            rep.conversions[0].position
        ),
        ("vmlinux", 0)
    );
}

/// A target whose module loader knows everything: vermagic, CONFIG_LIVEPATCH, CRCs.
fn loader_check(
    spec: &ModSpec,
    livepatch: bool,
    crcs: &[(&str, u32, Option<&str>)],
) -> CheckReport {
    loader_check_with(spec, livepatch, false, crcs)
}

fn loader_check_with(
    spec: &ModSpec,
    livepatch: bool,
    force_load: bool,
    crcs: &[(&str, u32, Option<&str>)],
) -> CheckReport {
    let k = kernel();
    let bytes = build_module(spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let table: Vec<(String, ExportInfo)> = crcs
        .iter()
        .map(|(n, c, ns)| {
            (
                n.to_string(),
                ExportInfo {
                    crc: Some(*c),
                    namespace: ns.map(str::to_string),
                },
            )
        })
        .collect();
    let lookup = |n: &str| table.iter().find(|(x, _)| x == n).map(|(_, e)| e.clone());
    let facts = LoaderFacts {
        modules: Some(Fact::new(true, "test")),
        vermagic: Some(Fact::new(
            "6.1.0-57-amd64 SMP preempt mod_unload modversions ".to_string(),
            "test",
        )),
        livepatch: Some(Fact::new(livepatch, "test")),
        modversions: Some(Fact::new(true, "test")),
        exports: Some(Fact::new(&lookup as ExportLookup<'_>, "test")),
        force_load: Some(Fact::new(force_load, "test")),
        sig_force: Some(Fact::new(false, "test")),
    };
    let t = target(&k).with_exports(&exported).with_loader(facts);
    check(&m, &t)
}

fn status(r: &CheckReport, check: &str) -> CheckStatus {
    r.loader_checks
        .iter()
        .find(|c| c.check == check)
        .unwrap_or_else(|| panic!("no {check} in {:#?}", r.loader_checks))
        .status
}

fn versioned() -> ModSpec<'static> {
    ModSpec {
        versions: vec![("module_layout", 0x1111), ("klp_enable_patch", 0x2222)],
        ..ModSpec::default()
    }
}

/// Regression: ACCEPTED for a module built for another kernel configuration.
#[test]
fn vermagic_mismatch_fails_the_load() {
    let spec = ModSpec {
        vermagic: "6.1.0-57-amd64 SMP mod_unload modversions ",
        ..versioned()
    };
    let r = loader_check(
        &spec,
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    assert_eq!(r.verdict.kind, VerdictKind::RefusedAtLoad);
    assert_eq!(r.verdict.errno, Some(8));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::VermagicMismatch);
    assert_eq!(
        p.log,
        ["lp: version magic '6.1.0-57-amd64 SMP mod_unload modversions ' should be '6.1.0-57-amd64 SMP preempt mod_unload modversions '"]
    );
    assert_eq!(status(&r, "vermagic"), CheckStatus::Failed);
    // The kernel stops there: what follows is listed but not reached.
    assert_eq!(status(&r, "unresolved_symbols"), CheckStatus::NotReached);
}

#[test]
fn another_release_passes_vermagic_when_the_module_has_symbol_versions() {
    let spec = ModSpec {
        vermagic: "6.1.0-58-amd64 SMP preempt mod_unload modversions ",
        ..versioned()
    };
    let r = loader_check(
        &spec,
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    assert_eq!(r.verdict.kind, VerdictKind::Accepted, "{:#?}", r.problems);
    // Without __versions the whole string is compared (after module_layout, which a
    // CONFIG_MODVERSIONS kernel force-loads only with CONFIG_MODULE_FORCE_LOAD).
    let spec = ModSpec {
        vermagic: "6.1.0-58-amd64 SMP preempt mod_unload modversions ",
        ..ModSpec::default()
    };
    let r = loader_check_with(&spec, true, true, &[("module_layout", 0x1111, None)]);
    assert_eq!(only_problem(&r).kind, ProblemKind::VermagicMismatch);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("module_layout: kernel tainted")),
        "{:?}",
        r.warnings
    );
    let r = loader_check_with(&spec, true, false, &[("module_layout", 0x1111, None)]);
    assert_eq!(only_problem(&r).kind, ProblemKind::ForceLoadRequired);
    assert_eq!(r.verdict.errno, Some(8));
}

/// Regression: ACCEPTED on a kernel built without CONFIG_LIVEPATCH.
#[test]
fn a_kernel_without_livepatch_refuses_a_livepatch() {
    let r = loader_check(
        &versioned(),
        false,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::LivepatchDisabled);
    assert_eq!(
        p.log,
        ["lp: module is marked as livepatch module, but livepatch support is disabled"]
    );
    assert_eq!(r.verdict.errno, Some(8));
}

#[test]
fn symbol_versions_and_namespaces_as_resolve_symbol_checks_them() {
    // A CRC that disagrees: two lines, -EINVAL.
    let r = loader_check(
        &versioned(),
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x9999, None),
        ],
    );
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::SymbolVersionMismatch);
    assert_eq!(
        p.log,
        [
            "lp: disagrees about version of symbol klp_enable_patch",
            "lp: Unknown symbol klp_enable_patch (err -22)"
        ]
    );
    assert_eq!(r.verdict.errno, Some(22));
    assert_eq!(status(&r, "symbol_versions"), CheckStatus::Failed);
    // module_layout: -ENOEXEC, one line, and the load stops before vermagic.
    let r = loader_check(
        &versioned(),
        true,
        &[
            ("module_layout", 0x7777, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    assert_eq!(
        only_problem(&r).log,
        ["lp: disagrees about version of symbol module_layout"]
    );
    assert_eq!(r.verdict.errno, Some(8));
    assert_eq!(status(&r, "vermagic"), CheckStatus::NotReached);
    // A namespaced export the module does not import.
    let r = loader_check(
        &versioned(),
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, Some("KLP")),
        ],
    );
    assert_eq!(
        only_problem(&r).log,
        [
            "lp: module uses symbol (klp_enable_patch) from namespace KLP, but does not import it.",
            "lp: Unknown symbol klp_enable_patch (err -22)"
        ]
    );
    // All matching: every check passed.
    let r = loader_check(
        &versioned(),
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
    for c in &r.loader_checks {
        assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
    }
}

/// Unknown facts are "not checked", never "passed".
#[test]
fn unknown_target_facts_are_not_checked() {
    let r = check61(&build_module(&versioned()));
    assert_eq!(r.verdict.kind, VerdictKind::Accepted);
    for name in [
        "signature",
        "vermagic",
        "livepatch_support",
        "symbol_versions",
        "unresolved_symbols",
    ] {
        assert_eq!(status(&r, name), CheckStatus::NotChecked, "{name}");
    }
}

/// A plain module: modinfo, `struct module`, an init calling `printk`; nothing of livepatch.
fn ordinary_module(livepatch_call: bool) -> Vec<u8> {
    use object::write::{Object, Relocation, StandardSection, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind};
    use object::{SymbolFlags, SymbolKind, SymbolScope};
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let modinfo = obj.add_section(vec![], b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    obj.append_section_data(
        modinfo,
        b"name=dummy\0vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \0",
        1,
    );
    let this = obj.add_section(
        vec![],
        b".gnu.linkonce.this_module".to_vec(),
        SectionKind::Data,
    );
    let mut tm = vec![0u8; 0x380];
    tm[24..29].copy_from_slice(b"dummy");
    obj.append_section_data(this, &tm, 64);
    let text = obj.section_id(StandardSection::Text);
    let at = obj.append_section_data(text, &[0xe8, 0, 0, 0, 0, 0xc3], 16);
    obj.add_symbol(Symbol {
        name: b"init_module".to_vec(),
        value: at,
        size: 6,
        kind: SymbolKind::Text,
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Section(text),
        flags: SymbolFlags::None,
    });
    let callee = obj.add_symbol(Symbol {
        name: if livepatch_call {
            b"klp_enable_patch".to_vec()
        } else {
            b"printk".to_vec()
        },
        value: 0,
        size: 0,
        kind: SymbolKind::Text,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Undefined,
        flags: SymbolFlags::None,
    });
    obj.add_relocation(
        text,
        Relocation {
            offset: at + 1,
            symbol: callee,
            addend: -4,
            flags: RelocationFlags::Elf {
                r_type: object::elf::RelocationType(elf::R_X86_64_PLT32),
            },
        },
    )
    .unwrap();
    obj.write().unwrap()
}

/// Regression: an ordinary module was reported as a refused livepatch.
#[test]
fn an_ordinary_module_is_said_to_be_one() {
    let r = check61(&ordinary_module(false));
    assert_eq!(
        r.verdict.kind,
        VerdictKind::OrdinaryModule,
        "{:#?}",
        r.problems
    );
    assert!(r.problems.is_empty());
    assert!(r.kernel_log.is_empty());
    // With a klp_enable_patch() call it is a livepatch missing its tag.
    let r = check61(&ordinary_module(true));
    assert_eq!(only_problem(&r).kind, ProblemKind::NotLivepatchModule);
}

#[test]
fn an_accepted_patch_logs_what_the_kernel_logs() {
    let r = check61(&build_module(&ModSpec::default()));
    let lines: Vec<&str> = r.kernel_log.iter().map(|l| l.line.as_str()).collect();
    assert_eq!(
        lines,
        [
            "livepatch: enabling patch 'lp'",
            "livepatch: 'lp': starting patching transition",
            "livepatch: 'lp': patching complete"
        ]
    );
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
