//! The module loader's first two steps (kernel/module/main.c; kernel/module.c before 5.19):
//! whether the target has a module loader at all, and `module_sig_check()` of an unsigned
//! module.

use super::*;

fn check_with_loader(version: (u32, u32), facts: LoaderFacts<'_>) -> CheckReport {
    let k = kernel();
    let bytes = build_module(&ModSpec::default());
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let t = Target::new(
        &k,
        KernelRules::for_version(version.0, version.1),
        Arch::X86_64,
    )
    .with_loader(facts);
    check(&m, &t)
}

fn status(r: &CheckReport, kind: LoaderCheckKind) -> CheckStatus {
    r.loader_checks
        .iter()
        .find(|c| c.check == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {:#?}", r.loader_checks))
        .status
}

/// Without CONFIG_MODULES `finit_module(2)` is `sys_ni_syscall`: -ENOSYS, no line, and no
/// later step is reached.
#[test]
fn a_kernel_without_modules_refuses_every_module() {
    let r = check_with_loader(
        (6, 1),
        LoaderFacts {
            modules: Some(Fact::new(false, "config")),
            ..LoaderFacts::default()
        },
    );
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(38)),
        "{r:#?}"
    );
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::ModulesUnsupported);
    assert!(p.log.is_empty(), "{:?}", p.log);
    assert_eq!(
        status(&r, LoaderCheckKind::ModuleSupport),
        CheckStatus::Failed
    );
    let r = check_with_loader(
        (6, 1),
        LoaderFacts {
            modules: Some(Fact::new(true, "config")),
            ..LoaderFacts::default()
        },
    );
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(
        status(&r, LoaderCheckKind::ModuleSupport),
        CheckStatus::Passed
    );
}

/// `module_sig_check()` with signatures enforced refuses an unsigned module with
/// -EKEYREJECTED. 5.10.0's kernel/module.c prints `"%s: %s is rejected"` with the module's
/// name and "Loading of unsigned module" (5.10.26 on, as 5.12: no name); 6.1's
/// kernel/module/signing.c prints `"Loading of %s is rejected"` with "unsigned module". Not
/// enforced, it loads. (The stable sublevels: `KernelRules::unsigned_module_line`'s test.)
#[test]
fn enforced_signatures_refuse_an_unsigned_module() {
    let enforced = |on: bool| LoaderFacts {
        modules: Some(Fact::new(true, "config")),
        sig_force: Some(Fact::new(on, "config")),
        ..LoaderFacts::default()
    };
    for (v, line) in [
        ((5, 10), "lp: Loading of unsigned module is rejected"),
        ((6, 1), "Loading of unsigned module is rejected"),
    ] {
        let r = check_with_loader(v, enforced(true));
        assert_eq!(
            (r.verdict.kind, r.verdict.errno),
            (PatchVerdictKind::RefusedAtLoad, Some(129)),
            "{v:?}: {r:#?}"
        );
        let p = only_problem(&r);
        assert_eq!(p.kind, ProblemKind::UnsignedModule, "{v:?}");
        assert_eq!(p.log, vec![line.to_string()], "{v:?}");
        assert_eq!(status(&r, LoaderCheckKind::Signature), CheckStatus::Failed);
        let r = check_with_loader(v, enforced(false));
        assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{v:?}: {r:#?}");
        assert_eq!(status(&r, LoaderCheckKind::Signature), CheckStatus::Passed);
    }
}

/// Without CONFIG_MODVERSIONS, `check_modstruct_version()` and `check_version()` are stubs
/// that accept: a module without `__versions` loads where CONFIG_MODULE_FORCE_LOAD is off.
/// With CONFIG_MODVERSIONS it is refused there, and where the force-load setting is unknown
/// whether it loads is "not checked", never "passed".
#[test]
fn a_module_without_symbol_versions_by_the_target_s_modversions() {
    let facts = |modversions: bool, force_load: Option<bool>| LoaderFacts {
        modules: Some(Fact::new(true, "config")),
        modversions: Some(Fact::new(modversions, "config")),
        force_load: force_load.map(|f| Fact::new(f, "config")),
        ..LoaderFacts::default()
    };
    let r = check_with_loader((6, 1), facts(false, Some(false)));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(
        status(&r, LoaderCheckKind::ModuleLayout),
        CheckStatus::NotApplicable
    );
    assert_eq!(
        status(&r, LoaderCheckKind::SymbolVersions),
        CheckStatus::NotApplicable
    );
    let r = check_with_loader((6, 1), facts(true, Some(false)));
    assert_eq!(
        (r.verdict.kind, r.verdict.errno),
        (PatchVerdictKind::RefusedAtLoad, Some(8)),
        "{r:#?}"
    );
    assert_eq!(only_problem(&r).kind, ProblemKind::ForceLoadRequired);
    let r = check_with_loader((6, 1), facts(true, None));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    for kind in [
        LoaderCheckKind::ModuleLayout,
        LoaderCheckKind::SymbolVersions,
    ] {
        assert_eq!(status(&r, kind), CheckStatus::NotChecked, "{kind:?}");
    }
}
