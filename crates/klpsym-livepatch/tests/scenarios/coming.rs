//! `klp_module_coming()` (kernel/livepatch/core.c): an object whose module loads after the
//! patch is initialized then (`klp_init_object_loaded()`: its klp sections, then its
//! functions' lookups), and patched (`klp_patch_object()`); the first failure refuses that
//! module, with the kernel's two lines after it. Also `klp_init_func()`'s silent table checks
//! and the orphan klp sections no object ever applies.

use super::*;
use klpsym_core::{ObjectKind, SymbolTable, SymbolTableBuilder};

/// An offline `xfs` (not loaded), beside [`ext4_unplaced`].
fn xfs_unplaced() -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    let m = b.object("xfs", ObjectKind::Module);
    b.push(m, 0x1000, b't', "xfs_fs_fill_super").unwrap();
    b.build()
}

/// Checks `spec` on 6.1 with ext4 and xfs offline.
fn check_deferred(spec: &ModSpec) -> CheckReport {
    let k = kernel();
    let ext4 = ext4_unplaced();
    let xfs = xfs_unplaced();
    let bytes = build_module(spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let t = target(&k)
        .with_unplaced_module("ext4", &ext4)
        .with_unplaced_module("xfs", &xfs);
    check(&m, &t)
}

fn lines(r: &CheckReport) -> Vec<&str> {
    r.kernel_log.iter().map(|l| l.line.as_str()).collect()
}

fn coming(module: &str) -> Stage {
    Stage::ModuleComing {
        module: module.into(),
    }
}

/// The patch's own lines when it is enabled (`__klp_enable_patch()` and the transition).
const ENABLED: [&str; 3] = [
    "livepatch: enabling patch 'lp'",
    "livepatch: 'lp': starting patching transition",
    "livepatch: 'lp': patching complete",
];

/// `klp_init_object_loaded()` returns at the first failed lookup: only the first problem of
/// the loading module is reached, and the kernel's log holds its lines only, after the
/// patch's own lines (the module loads later).
#[test]
fn a_loading_module_stops_at_its_first_failure() {
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("ext4"),
            funcs: vec![("ext4_gone", 0), ("ext4_gone_too", 0)],
        }],
        ..ModSpec::default()
    };
    let r = check_deferred(&spec);
    assert_eq!(
        r.verdict.kind,
        PatchVerdictKind::RefusedWhenModuleLoads,
        "{r:#?}"
    );
    assert_eq!(r.verdict.refused_modules, vec!["ext4".to_string()]);
    let seen: Vec<(Option<&str>, &Stage, bool)> = r
        .problems
        .iter()
        .map(|p| (p.symbol.as_deref(), &p.stage, p.reached))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("ext4_gone"), &coming("ext4"), true),
            (Some("ext4_gone_too"), &coming("ext4"), false),
        ]
    );
    let mut want = ENABLED.to_vec();
    want.extend([
        "livepatch: symbol 'ext4_gone' not found in symbol table",
        "livepatch: failed to initialize patch 'lp' for module 'ext4' (-22)",
        "livepatch: patch 'lp' failed for module 'ext4', refusing to load module 'ext4'",
    ]);
    assert_eq!(lines(&r), want);
    // Only the reached problem carries the kernel's two lines.
    assert_eq!(r.problems[1].log.len(), 1, "{:#?}", r.problems[1]);
}

/// Each loading module is refused on its own, with its own lines; one that initializes
/// cleanly is patched (`applying patch '%s' to loading module '%s'`).
#[test]
fn each_loading_module_gets_its_own_lines() {
    let spec = ModSpec {
        objects: vec![
            ObjSpec {
                name: Some("ext4"),
                funcs: vec![("ext4_gone", 0)],
            },
            ObjSpec {
                name: Some("xfs"),
                funcs: vec![("xfs_gone", 0)],
            },
        ],
        ..ModSpec::default()
    };
    let r = check_deferred(&spec);
    assert_eq!(
        r.verdict.refused_modules,
        vec!["ext4".to_string(), "xfs".to_string()],
        "{r:#?}"
    );
    assert_eq!(r.problems.len(), 2, "{r:#?}");
    for (p, m, f) in [
        (&r.problems[0], "ext4", "ext4_gone"),
        (&r.problems[1], "xfs", "xfs_gone"),
    ] {
        assert!(p.reached);
        assert_eq!(p.stage, coming(m));
        assert_eq!(
            p.log,
            vec![
                format!("livepatch: symbol '{f}' not found in symbol table"),
                format!("livepatch: failed to initialize patch 'lp' for module '{m}' (-22)"),
                format!(
                    "livepatch: patch 'lp' failed for module '{m}', refusing to load module '{m}'"
                ),
            ]
        );
    }
    // ext4 refused, xfs patched when it loads.
    let spec = ModSpec {
        objects: vec![
            ObjSpec {
                name: Some("ext4"),
                funcs: vec![("ext4_gone", 0)],
            },
            ObjSpec {
                name: Some("xfs"),
                funcs: vec![("xfs_fs_fill_super", 0)],
            },
        ],
        ..ModSpec::default()
    };
    let r = check_deferred(&spec);
    assert_eq!(r.verdict.refused_modules, vec!["ext4".to_string()]);
    let mut want = ENABLED.to_vec();
    want.extend([
        "livepatch: symbol 'ext4_gone' not found in symbol table",
        "livepatch: failed to initialize patch 'lp' for module 'ext4' (-22)",
        "livepatch: patch 'lp' failed for module 'ext4', refusing to load module 'ext4'",
        "livepatch: applying patch 'lp' to loading module 'xfs'",
    ]);
    assert_eq!(lines(&r), want);
}

/// A loading module's function without an ftrace call site (its `.ko`'s `__mcount_loc`):
/// `klp_module_coming()` prints its notice, then `klp_patch_object()` fails, and the module
/// is refused ("failed to apply patch", not "failed to initialize patch").
#[test]
fn a_loading_module_function_without_a_call_site_refuses_the_module() {
    let k = kernel();
    let ext4 = ext4_unplaced();
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("ext4"),
            funcs: vec![("ext4_fill_super", 0)],
        }],
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let names = ["ext4_fill_super".to_string(), "ext4_static".to_string()];
    let with = |sites: &[klpsym_elf::SiteFacts]| {
        let t = target(&k)
            .with_unplaced_module("ext4", &ext4)
            .with_module_ftrace(
                "ext4",
                ModuleFtrace {
                    names: &names,
                    sites,
                    source: "ext4.ko",
                },
            );
        check(&m, &t)
    };
    let site = |at_start| klpsym_elf::SiteFacts {
        at_start,
        within: false,
    };
    let r = with(&[site(true), site(false)]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert!(
        lines(&r).contains(&"livepatch: applying patch 'lp' to loading module 'ext4'"),
        "{:?}",
        lines(&r)
    );
    let r = with(&[site(false), site(true)]);
    assert_eq!(
        r.verdict.kind,
        PatchVerdictKind::RefusedWhenModuleLoads,
        "{r:#?}"
    );
    assert_eq!(r.verdict.refused_modules, vec!["ext4".to_string()]);
    let p = only_problem(&r);
    assert_eq!(
        (p.kind, &p.stage, p.symbol.as_deref()),
        (
            ProblemKind::NoFtraceLocation,
            &coming("ext4"),
            Some("ext4_fill_super")
        )
    );
    let mut want = ENABLED.to_vec();
    want.extend([
        "livepatch: applying patch 'lp' to loading module 'ext4'",
        "livepatch: failed to find location for function 'ext4_fill_super'",
        "livepatch: failed to apply patch 'lp' to module 'ext4' (-22)",
        "livepatch: patch 'lp' failed for module 'ext4', refusing to load module 'ext4'",
    ]);
    assert_eq!(lines(&r), want);
}

/// A patch the kernel refuses before `__klp_enable_patch()` (not marked as a livepatch
/// module) never reaches `klp_patch_func()`: no call site is looked up, so none is reported,
/// not even as not reached.
#[test]
fn no_call_site_is_judged_when_the_enable_fails_earlier() {
    let k = kernel();
    let bytes = build_module(&ModSpec {
        livepatch: false,
        ..ModSpec::default()
    });
    let m = LivepatchModule::parse(&bytes).expect("parse");
    // cmdline_proc_show has no site: judged, it would fail.
    let sites = [0xffff_ffff_8100_0010];
    let t = target(&k).with_ftrace_sites(&sites, "test sites");
    let r = check(&m, &t);
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    assert_eq!(r.problems[0].kind, ProblemKind::NotLivepatchModule);
    assert_eq!(
        lines(&r),
        ["livepatch: module lp is not marked as a livepatch module"]
    );
}

/// `klp_init_func()`: a NULL `old_name`, a NULL `new_func` or an `old_name` of
/// KSYM_NAME_LEN bytes or more fails `klp_enable_patch()` with -EINVAL and no line.
#[test]
fn klp_init_func_refuses_bad_entries_silently() {
    let k = kernel();
    let bytes = build_module(&ModSpec::default());
    let rules = KernelRules::for_version(6, 1);
    let long = "n".repeat(rules.ksym_name_len);
    let shorter = "n".repeat(rules.ksym_name_len - 1);
    type Edit = Box<dyn Fn(&mut patch::KlpFuncDesc)>;
    let cases: Vec<(&str, Edit, Option<&str>)> = vec![
        (
            "old_name NULL",
            Box::new(|f: &mut patch::KlpFuncDesc| f.old_name = None),
            Some("old_name is NULL"),
        ),
        (
            "new_func NULL",
            Box::new(|f: &mut patch::KlpFuncDesc| f.new_func = patch::Pointer::Null),
            Some("new_func is NULL"),
        ),
        (
            "old_name of KSYM_NAME_LEN bytes",
            {
                let long = long.clone();
                Box::new(move |f: &mut patch::KlpFuncDesc| f.old_name = Some(long.clone()))
            },
            Some("KSYM_NAME_LEN is 512"),
        ),
        // One byte shorter passes klp_init_func(); the lookup then fails, with its line.
        (
            "old_name of KSYM_NAME_LEN - 1 bytes",
            {
                let shorter = shorter.clone();
                Box::new(move |f: &mut patch::KlpFuncDesc| f.old_name = Some(shorter.clone()))
            },
            None,
        ),
    ];
    for (what, change, hint) in cases {
        let mut m = LivepatchModule::parse(&bytes).expect("parse");
        change(&mut m.patch.as_mut().expect("patch").objects[0].funcs[0]);
        let r = check(&m, &target(&k));
        assert_eq!(
            (r.verdict.kind, r.verdict.errno),
            (PatchVerdictKind::RefusedAtLoad, Some(22)),
            "{what}: {r:#?}"
        );
        let p = only_problem(&r);
        assert_eq!(p.stage, Stage::PatchEnable, "{what}");
        match hint {
            Some(h) => {
                assert_eq!(p.kind, ProblemKind::InvalidPatchTable, "{what}: {p:#?}");
                assert!(p.hint.contains(h), "{what}: {}", p.hint);
                assert!(p.log.is_empty(), "{what}: {:?}", p.log);
                assert!(r.kernel_log.is_empty(), "{what}: {:?}", r.kernel_log);
            }
            None => assert_eq!(p.kind, ProblemKind::SymbolNotFound, "{what}: {p:#?}"),
        }
    }
}

/// A klp section for an object the patch does not list is never applied (modules' sections
/// are applied by their object's `klp_init_object_loaded()`); vmlinux's are applied when the
/// patch module loads (5.8+: `klp_apply_section_relocs()` from `apply_relocations()`), listed
/// or not. Only the first is said.
#[test]
fn only_klp_sections_of_unlisted_modules_are_said_never_applied() {
    let never = |r: &CheckReport| -> Vec<String> {
        r.warnings
            .iter()
            .filter(|w| w.contains("so the kernel never applies it"))
            .cloned()
            .collect()
    };
    // nf_tables listed, with its section: applied.
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("nf_tables"),
            funcs: vec![("nft_dup", 2)],
        }],
        ..refs(&[
            ("nft_helper", elf::R_X86_64_PLT32, -4),
            ("static_helper", elf::R_X86_64_PLT32, -4),
        ])
    };
    let (out, rep) = converted(&spec, &[]);
    assert_eq!(
        rep.sections_created,
        vec![
            ".klp.rela.nf_tables..text".to_string(),
            ".klp.rela.vmlinux..text".to_string()
        ]
    );
    let r = check61(&out);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    // vmlinux is not listed, but its section is applied at load.
    assert!(never(&r).is_empty(), "{:?}", r.warnings);
    // The module section renamed to an object the patch does not list.
    let ki = klp_sec_index(&out, ".klp.rela.nf_tables..text");
    let orphan = edit(&out, |_, ed| ed.rename_section(ki, ".klp.rela.xfs..text"));
    let r = check61(&orphan);
    assert_eq!(
        never(&r),
        ["section .klp.rela.xfs..text: the patch has no klp_object 'xfs', so the kernel never applies it"],
        "{:?}",
        r.warnings
    );
}
