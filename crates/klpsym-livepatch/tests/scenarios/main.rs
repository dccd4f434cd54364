//! End-to-end scenarios: modules written with `object::write`, converted, mutated into every
//! malformed shape the kernel rejects, and checked; one test per kernel verdict.

use klpsym_livepatch::consts as elf;
use klpsym_livepatch::edit::ElfEditor;
use klpsym_livepatch::*;
use klpsym_testkit::module::*;

mod coming;
mod convert;
mod ftrace;
mod klp_relocs;
mod loader;
mod loader_support;
mod ordinary_relocs;
mod validity;

pub(crate) fn target(t: &klpsym_core::SymbolTable) -> Target<'_> {
    Target::new(t, KernelRules::for_version(6, 1), Arch::X86_64)
}

pub(crate) fn refs(r: &[(&'static str, u32, i64)]) -> ModSpec<'static> {
    ModSpec {
        text_refs: r.to_vec(),
        ..ModSpec::default()
    }
}

pub(crate) fn converted(spec: &ModSpec, pins: &[Pin]) -> (Vec<u8>, ConvertReport) {
    let k = kernel();
    let off = ext4_unplaced();
    let t = target(&k).with_unplaced_module("ext4", &off);
    convert(&build_module(spec), &t, pins, &exported).expect("convert")
}

pub(crate) fn check_bytes(bytes: &[u8], rules: KernelRules) -> CheckReport {
    let k = kernel();
    let off = ext4_unplaced();
    let m = LivepatchModule::parse(bytes).expect("parse");
    let t = Target::new(&k, rules, Arch::X86_64).with_unplaced_module("ext4", &off);
    check(&m, &t)
}

pub(crate) fn check61(bytes: &[u8]) -> CheckReport {
    check_bytes(bytes, KernelRules::for_version(6, 1))
}

/// Applies `f` to an editor over `bytes`.
pub(crate) fn edit(
    bytes: &[u8],
    f: impl FnOnce(&ElfObject<'_>, &mut ElfEditor<'_, '_>),
) -> Vec<u8> {
    let obj = ElfObject::parse(bytes).unwrap();
    let mut ed = ElfEditor::new(&obj);
    f(&obj, &mut ed);
    ed.write().unwrap()
}

pub(crate) fn only_problem(r: &CheckReport) -> &Problem {
    let reached: Vec<&Problem> = r.problems.iter().filter(|p| p.reached).collect();
    assert_eq!(reached.len(), 1, "problems: {:#?}", r.problems);
    reached[0]
}

#[test]
fn plain_patch_is_accepted_and_described() {
    let r = check61(&build_module(&ModSpec::default()));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
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
    let btf = klpsym_testkit::btf::build_btf(&[
        (
            "klp_func",
            160,
            &[("old_name", 0), ("new_func", 8), ("old_sympos", 16)],
        ),
        ("klp_object", 168, &[("name", 0), ("funcs", 8)]),
        ("klp_patch", 200, &[("mod", 0), ("objs", 8)]),
    ]);
    let l = btf::layouts_from_btf(&btf).unwrap();
    let m = LivepatchModule::parse_with(&bytes, &l, &mut klpsym_core::Resched::none()).unwrap();
    let p = m.patch.as_ref().unwrap();
    assert_eq!(p.objects[0].funcs.len(), 2);
    assert_eq!(
        p.objects[0].funcs[1].old_name.as_deref(),
        Some("static_helper")
    );
    assert!(p.notes.is_empty());
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
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
    assert!(ext4.unplaced);
    assert_eq!(ext4.resolved, Some(0x2000));
    // without ext4's .ko the object is unchecked: accepted as far as checked, never "accepted"
    let k = kernel();
    let m = LivepatchModule::parse(&out).unwrap();
    let r = check(&m, &target(&k));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Unverified);
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
        PatchVerdictKind::RefusedWhenModuleLoads,
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
    assert!(
        p.hint.starts_with("'dup_fn' is defined 2 times in vmlinux"),
        "{}",
        p.hint
    );
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(22))
    );
    assert_eq!(p.stage, Stage::PatchEnable);
    let r = check61(&build_module(&mk("dup_fn", 3)));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::PositionNotFound);
    assert_eq!(p.hint, "vmlinux has 2 definition(s) of 'dup_fn'");
    assert_eq!(p.candidates.len(), 2);
    assert_eq!(
        p.log,
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
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
    let c = r
        .loader_checks
        .iter()
        .find(|c| c.check == "unresolved_symbols");
    let c = c.expect("unresolved_symbols");
    assert_eq!(
        (c.status, c.detail.as_str()),
        (
            CheckStatus::Failed,
            "1 symbol(s) the target does not export"
        )
    );
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(2))
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
    // 6.19 on: the same refusal names the symbol table's section index and the entry.
    let r = check_bytes(&bad, KernelRules::for_version(7, 2));
    let m = LivepatchModule::parse(&bad).unwrap();
    let symtab = m.elf.symtab_index;
    let rela = m
        .klp_sections
        .iter()
        .find(|s| s.name == ".klp.rela.vmlinux..text")
        .and_then(|s| s.relocs.iter().position(|x| x.sym == si))
        .unwrap();
    assert_eq!(
        only_problem(&r).log,
        vec![format!("livepatch: symbol .klp.sym.vmlinux.static_helper,0 at rela sec {symtab} idx {rela} is not marked as a livepatch symbol")]
    );
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
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
            "module: overflow in relocation type 10 val ffffffff81200000".to_string(),
            "module: `lp' likely not compiled with -mcmodel=kernel".to_string()
        ]
    );
    assert_eq!(
        (p.kind, r.verdict.errno),
        (ProblemKind::RelocationOverflow, Some(8))
    );
    assert_eq!(r.relocations[0].status, RelocationStatus::Failed);
    // 32S of the same address fits
    let (out, _) = converted(&refs(&[("static_helper", elf::R_X86_64_32S, 0)]), &[]);
    let r = check61(&out);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    assert_eq!(
        r.relocations[0].bytes.as_deref(),
        Some(&[0x00, 0x00, 0x20, 0x81][..])
    );
    let dirty = ModSpec {
        dirty_slots: true,
        ..refs(&[("static_helper", elf::R_X86_64_64, 0)])
    };
    let (out, _) = converted(&dirty, &[]);
    let r = check61(&out);
    assert_eq!(
        only_problem(&r).log,
        vec!["module: x86/modules: Skipping invalid relocation target, existing value is nonzero for type 1, loc <hashed %p>, val ffffffff81200000".to_string()]
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
        klpsym_testkit::lab::skip("readelf on a converted module", "readelf is not installed");
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(r.relocations[0].status, RelocationStatus::NeedsPlacement);
    // placed 64 KiB below the target: bl with imm26 = 0x4000
    let text = m.elf.section_by_name(".text").unwrap().index;
    let off = r.relocations[0].offset;
    let t = t.with_section_base(text, 0xffff_ffff_8120_0000 - 0x1_0000 - off);
    let r = check(&m, &t);
    let rel = &r.relocations[0];
    assert_eq!(rel.status, RelocationStatus::Applied);
    // the fixture's slot holds no opcode (zero): only imm26 = 0x10000 >> 2 is filled in
    assert_eq!(rel.bytes.as_deref(), Some(&[0x00, 0x40, 0x00, 0x00][..]));
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

/// `apply_relocate_add()` on x86_64 refuses to write a place whose bytes are not zero: a
/// second relocation of a place another has already written (a second RELA section for the
/// same target) meets the first one's bytes, not the file's zeros.
#[test]
fn a_second_relocation_of_a_place_meets_the_first_one_s_bytes() {
    let bytes = build_module(&refs(&[("printk", elf::R_X86_64_64, 0)]));
    let obj = ElfObject::parse(&bytes).unwrap();
    let rela = obj.section_by_name(".rela.text").unwrap();
    let first = *obj.relas[rela.index as usize]
        .iter()
        .find(|r| obj.symbols[r.sym as usize].name == "printk")
        .expect("the relocation to printk");
    let (link, info) = (rela.link, rela.info);
    let again = edit(&bytes, |_, ed| {
        let data =
            klpsym_livepatch::edit::encode_relas(&[first], &mut klpsym_core::Resched::none())
                .unwrap();
        ed.add_section(klpsym_livepatch::edit::NewSection {
            name: ".rela.text.again".into(),
            sh_type: elf::SHT_RELA,
            flags: elf::SHF_INFO_LINK,
            link,
            info,
            addralign: 8,
            entsize: 24,
            data,
        });
    });
    let once = check61(&bytes);
    assert_eq!(once.verdict.kind, PatchVerdictKind::Accepted, "{once:#?}");
    let r = check61(&again);
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(8)),
        "{r:#?}"
    );
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::RelocationTargetNonzero);
    assert_eq!(p.section.as_deref(), Some(".rela.text.again"));
    assert!(
        p.log[0].contains("existing value is nonzero for type 1"),
        "{:?}",
        p.log
    );
}
