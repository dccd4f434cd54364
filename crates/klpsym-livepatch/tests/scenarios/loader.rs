//! End-to-end scenarios of what the module loader decides before livepatch sees a module
//! (vermagic, CONFIG_LIVEPATCH, symbol versions, namespaces, force-loading), of modules that
//! are not livepatches, and of the log the kernel prints on success.

use crate::ordinary_relocs::ordinary;
use crate::{check61, edit, only_problem, refs, target};
use klpsym_livepatch::consts as elf;
use klpsym_livepatch::*;
use klpsym_testkit::module::*;

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
    let bytes = build_module(spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    check_against(
        &m,
        "6.1.0-57-amd64 SMP preempt mod_unload modversions ",
        livepatch,
        force_load,
        crcs,
    )
}

/// `m` against a target with vermagic `vermagic`, CONFIG_MODVERSIONS and the CRCs `crcs`.
fn check_against(
    m: &LivepatchModule<'_>,
    vermagic: &str,
    livepatch: bool,
    force_load: bool,
    crcs: &[(&str, u32, Option<&str>)],
) -> CheckReport {
    let k = kernel();
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
        vermagic: Some(Fact::new(vermagic.to_string(), "test")),
        livepatch: Some(Fact::new(livepatch, "test")),
        modversions: Some(Fact::new(true, "test")),
        exports: Some(Fact::new(&lookup as ExportLookup<'_>, "test")),
        force_load: Some(Fact::new(force_load, "test")),
        sig_force: Some(Fact::new(false, "test")),
        machine: Some(Fact::new(62, "test")),
        struct_module_size: None,
    };
    let t = target(&k).with_exports(&exported).with_loader(facts);
    check(m, &t)
}

/// A module for another architecture is refused by its ELF header, before anything of it is
/// read: -ENOEXEC with the line each version prints, no symbol, CRC or vermagic problem, no
/// lookup. (Before the header check, an x86-64 module on an arm64 kernel was reported as a
/// module_layout CRC mismatch with advice to convert __fentry__.)
#[test]
fn a_module_for_another_architecture_is_refused_by_its_header() {
    let spec = ModSpec {
        arch: Arch::Aarch64,
        text_refs: refs(&[("static_helper", elf::R_AARCH64_CALL26, 0)]).text_refs,
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).unwrap();
    let k = kernel();
    let facts = || LoaderFacts {
        modules: Some(Fact::new(true, "test")),
        machine: Some(Fact::new(62, "the image")),
        ..LoaderFacts::default()
    };
    for (version, line) in [
        ((6, 1), "Invalid architecture in ELF header: 183"),
        ((7, 2), "Invalid architecture in ELF header: 183"),
        ((5, 10), "Module has invalid ELF structures"),
    ] {
        let t = Target::new(
            &k,
            KernelRules::for_version(version.0, version.1),
            Arch::X86_64,
        )
        .with_loader(facts());
        let r = check(&m, &t);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{version:?}"
        );
        assert_eq!(r.verdict.errno, Some(8), "ENOEXEC");
        let p = only_problem(&r);
        assert_eq!(p.kind, ProblemKind::ElfHeader);
        assert_eq!(p.log, [line.to_string()], "{version:?}");
        assert!(
            r.problems.iter().all(|p| p.kind == ProblemKind::ElfHeader),
            "{:#?}",
            r.problems
        );
        assert!(r.objects.is_empty() && r.relocations.is_empty());
        assert_eq!(status(&r, "elf_header"), CheckStatus::Failed);
        assert!(
            r.loader_checks.iter().all(|c| c.check != "vermagic"),
            "{:#?}",
            r.loader_checks
        );
    }
    // The right machine: the header check passes and is listed.
    let t =
        Target::new(&k, KernelRules::for_version(6, 1), Arch::Aarch64).with_loader(LoaderFacts {
            machine: Some(Fact::new(183, "the image")),
            ..LoaderFacts::default()
        });
    let r = check(&m, &t);
    assert_eq!(status(&r, "elf_header"), CheckStatus::Passed);
    // An unknown machine: no header line at all (never "ok" without the fact).
    let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::Aarch64);
    let r = check(&m, &t);
    assert!(r.loader_checks.iter().all(|c| c.check != "elf_header"));
}

/// Since 6.4 the loader holds `.gnu.linkonce.this_module` to the size of the kernel's own
/// `struct module` (a module built against another configuration's headers): a mismatch is
/// refused with the kernel's line, -ENOEXEC, before symbol versions and vermagic; the same
/// size passes; an unknown size is "not checked"; 5.10 and 6.1 have no such check.
#[test]
fn this_module_must_be_the_size_of_the_targets_struct_module() {
    let bytes = build_module(&ModSpec::default());
    let m = LivepatchModule::parse(&bytes).unwrap();
    let size = m
        .elf
        .sections
        .iter()
        .find(|s| s.name == ".gnu.linkonce.this_module")
        .unwrap()
        .size;
    let k = kernel();
    let run = |version: (u32, u32), known: Option<u64>| {
        let t = Target::new(
            &k,
            KernelRules::for_version(version.0, version.1),
            Arch::X86_64,
        )
        .with_loader(LoaderFacts {
            modules: Some(Fact::new(true, "test")),
            machine: Some(Fact::new(62, "test")),
            vermagic: Some(Fact::new(
                "7.2.13+deb14-amd64 SMP preempt mod_unload modversions ".to_string(),
                "test",
            )),
            struct_module_size: known.map(|n| Fact::new(n, "the target's BTF")),
            ..LoaderFacts::default()
        });
        check(&m, &t)
    };
    for version in [(6, 12), (7, 2)] {
        let r = run(version, Some(size + 64));
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{version:?}"
        );
        assert_eq!(r.verdict.errno, Some(8), "ENOEXEC");
        let p = r
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::ThisModule)
            .expect("a this_module problem");
        assert_eq!(
            p.log,
            [format!(
                "module {}: .gnu.linkonce.this_module section size must match the kernel's built struct module size at run time",
                m.name
            )]
        );
        assert_eq!(status(&r, "this_module"), CheckStatus::Failed);
        // The kernel stops there: the vermagic (which differs) is not reached.
        assert_eq!(
            status(&r, "vermagic"),
            CheckStatus::NotReached,
            "{version:?}"
        );
        assert!(
            r.problems
                .iter()
                .all(|p| p.kind == ProblemKind::ThisModule || !p.reached),
            "{:#?}",
            r.problems
        );
        assert_eq!(
            status(&run(version, Some(size)), "this_module"),
            CheckStatus::Passed
        );
        assert_eq!(
            status(&run(version, None), "this_module"),
            CheckStatus::NotChecked
        );
    }
    for version in [(5, 10), (6, 1)] {
        let r = run(version, Some(size + 64));
        assert!(
            r.loader_checks.iter().all(|c| c.check != "this_module"),
            "{version:?}: {:#?}",
            r.loader_checks
        );
        assert!(r.problems.iter().all(|p| p.kind != ProblemKind::ThisModule));
    }
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
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad);
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
    assert_eq!(
        r.verdict.kind,
        PatchVerdictKind::Accepted,
        "{:#?}",
        r.problems
    );
    let vermagic = |r: &CheckReport| {
        let c = r.loader_checks.iter().find(|c| c.check == "vermagic");
        c.expect("vermagic").detail.clone()
    };
    assert!(
        vermagic(&r).contains("the release differs"),
        "{}",
        vermagic(&r)
    );
    let crcs = [
        ("module_layout", 0x1111, None),
        ("klp_enable_patch", 0x2222, None),
    ];
    let same = loader_check(&versioned(), true, &crcs);
    assert_eq!(status(&same, "vermagic"), CheckStatus::Passed);
    assert!(
        !vermagic(&same).contains("the release differs"),
        "{}",
        vermagic(&same)
    );
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

/// A forced load (`modprobe --force`: MODULE_INIT_IGNORE_MODVERSIONS|IGNORE_VERMAGIC) of a
/// module built for another build: its module_layout CRC and vermagic no longer refuse it
/// where CONFIG_MODULE_FORCE_LOAD is set, and still refuse it (silently, ENOEXEC) where not.
#[test]
fn a_forced_load_ignores_symbol_versions_and_vermagic() {
    let spec = ModSpec {
        vermagic: "6.12.95+deb12-amd64 SMP preempt mod_unload modversions ",
        versions: vec![("module_layout", 0x5002fa32), ("klp_enable_patch", 0x2222)],
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let crcs = [
        ("module_layout", 0x2f9b2b9a, None),
        ("klp_enable_patch", 0x3333, None),
    ];
    // As built: refused by module_layout's CRC.
    let r = loader_check_with(&spec, true, true, &crcs);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad);
    assert_eq!(
        only_problem(&r).log,
        ["lp: disagrees about version of symbol module_layout"]
    );
    // Forced, on a kernel with CONFIG_MODULE_FORCE_LOAD: loaded, tainted.
    let mut m = LivepatchModule::parse(&bytes).expect("parse");
    m.force_loaded();
    assert!(m.versions.is_none() && m.modinfo("vermagic").is_none());
    let forced = |force_load: bool| {
        check_against(
            &m,
            "6.12.118+deb13-amd64 SMP preempt mod_unload modversions ",
            true,
            force_load,
            &crcs,
        )
    };
    let r = forced(true);
    assert_eq!(
        r.verdict.kind,
        PatchVerdictKind::Accepted,
        "{:#?}",
        r.problems
    );
    for c in ["module_layout", "vermagic", "symbol_versions"] {
        assert_eq!(
            status(&r, c),
            CheckStatus::Passed,
            "{c}: {:#?}",
            r.loader_checks
        );
    }
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("lp: module_layout: kernel tainted.")),
        "{:?}",
        r.warnings
    );
    // Without CONFIG_MODULE_FORCE_LOAD, try_to_force_load() refuses: -ENOEXEC, no line.
    let r = forced(false);
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
    let detail = |r: &CheckReport| {
        let c = r
            .loader_checks
            .iter()
            .find(|c| c.check == "symbol_versions");
        c.expect("symbol_versions").detail.clone()
    };
    assert!(detail(&r).starts_with("1 CRC(s) compared, 1 disagree, 0 not listed"));
    // An export the module's __versions does not list: check_version() warns once, loads.
    let spec = ModSpec {
        versions: vec![("module_layout", 0x1111)],
        ..ModSpec::default()
    };
    let crcs = [
        ("module_layout", 0x1111, None),
        ("klp_enable_patch", 0x2222, None),
    ];
    let r = loader_check(&spec, true, &crcs);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert!(detail(&r).starts_with("0 CRC(s) compared, 0 disagree, 1 not listed"));
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
    // The namespace imported (modinfo import_ns=KLP): resolved.
    let bytes = build_module(&versioned());
    let with_import = edit(&bytes, |o, ed| {
        let s = o.section_by_name(".modinfo").expect(".modinfo");
        let mut data = o.section_data(s.index).to_vec();
        data.extend_from_slice(b"import_ns=KLP\0");
        ed.set_contents(s.index, data);
    });
    let m = LivepatchModule::parse(&with_import).unwrap();
    let r = check_against(
        &m,
        "6.1.0-57-amd64 SMP preempt mod_unload modversions ",
        true,
        false,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, Some("KLP")),
        ],
    );
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    // All matching: every check passed.
    let r = loader_check(
        &versioned(),
        true,
        &[
            ("module_layout", 0x1111, None),
            ("klp_enable_patch", 0x2222, None),
        ],
    );
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    for c in &r.loader_checks {
        assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
    }
}

/// Unknown facts are "not checked", never "passed".
#[test]
fn unknown_target_facts_are_not_checked() {
    let r = check61(&build_module(&versioned()));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
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
        PatchVerdictKind::OrdinaryModule,
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

/// The ordinary relocations of `spec`'s code, checked on 6.1 with `.text` placed at `text`.
/// An object as read back: its name and its functions (old_name, old_sympos).
type ExtObjectRead<'a> = (&'a str, Vec<(Option<&'a str>, u64)>);

#[test]
fn klp_build_layout_is_read_and_checked() {
    let bytes = build_klp_build_module(&[
        (None, vec![("cmdline_proc_show", 0), ("dup_fn", 2)]),
        (Some("nf_tables"), vec![("nft_helper", 0)]),
    ]);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let p = m.patch.as_ref().expect("the klp-build tables");
    assert_eq!(p.discovery, klpsym_livepatch::patch::Discovery::KlpBuild);
    let names: Vec<ExtObjectRead> = p
        .objects
        .iter()
        .map(|o| {
            (
                o.object_name(),
                o.funcs
                    .iter()
                    .map(|f| (f.old_name.as_deref(), f.old_sympos))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (
                "vmlinux",
                vec![(Some("cmdline_proc_show"), 0), (Some("dup_fn"), 2)]
            ),
            ("nf_tables", vec![(Some("nft_helper"), 0)]),
        ]
    );
    assert_eq!(
        p.objects[0].funcs[0].new_func_symbol.as_deref(),
        Some("cmdline_proc_show")
    );
    let r = check61(&bytes);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    let addrs: Vec<Option<u64>> = r.objects[0].funcs.iter().map(|f| f.address).collect();
    assert_eq!(
        addrs,
        vec![Some(0xffff_ffff_8110_0000), Some(0xffff_ffff_8140_0000)]
    );
    // An empty .init.klp_objects: init.c's own refusal, before klp_enable_patch().
    let empty = LivepatchModule::parse(&build_klp_build_module(&[])).map(|m| check61(m.elf.data));
    let r = empty.expect("parse");
    let p = only_problem(&r);
    assert_eq!(p.log, vec!["livepatch_fix: nothing to patch!".to_string()]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad);
}

/// The hint for an unknown symbol follows from its cause: a symbol the target defines but does
/// not export can be reached by a klp relocation (convert); a symbol the target has nowhere
/// (`_printk` on 5.10, which calls it `printk`) means the module was compiled for another
/// kernel, and converting it would only move the failure.
#[test]
fn an_unknown_symbol_hint_follows_from_its_cause() {
    let unexported = ordinary(&refs(&[("static_helper", elf::R_X86_64_PLT32, -4)]), None);
    let p = only_problem(&unexported);
    assert_eq!(p.kind, ProblemKind::UnknownSymbol);
    assert!(p.hint.contains("klpsym convert"), "{}", p.hint);

    let absent = ordinary(&refs(&[("_printk", elf::R_X86_64_PLT32, -4)]), None);
    let p = only_problem(&absent);
    assert_eq!(p.kind, ProblemKind::UnknownSymbol);
    assert!(
        p.hint.contains("rebuild it against the target's headers") && !p.hint.contains("convert"),
        "{}",
        p.hint
    );
}
