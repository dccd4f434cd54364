//! `klp_patch_func()`: a replaced vmlinux function needs an ftrace call site, found as each
//! kernel version's `ftrace_location()` finds it.

use super::*;
use klpsym_core::{ObjectId, SymbolTableBuilder};

/// cmdline_proc_show's address in [`kernel`].
const CMDLINE: u64 = 0xffff_ffff_8110_0000;
/// static_helper's, the next symbol.
const NEXT: u64 = 0xffff_ffff_8120_0000;

fn check_with_sites(
    table: &klpsym_core::SymbolTable,
    version: (u32, u32),
    sites: &[u64],
) -> CheckReport {
    check_with_rules(table, KernelRules::for_version(version.0, version.1), sites)
}

fn check_with_rules(
    table: &klpsym_core::SymbolTable,
    rules: KernelRules,
    sites: &[u64],
) -> CheckReport {
    let bytes = build_module(&ModSpec::default());
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let t = Target::new(table, rules, Arch::X86_64).with_ftrace_sites(sites, "test sites");
    check(&m, &t)
}

fn lines(r: &CheckReport) -> Vec<&str> {
    r.kernel_log.iter().map(|l| l.line.as_str()).collect()
}

#[test]
fn a_function_with_its_call_site_is_patched() {
    let k = kernel();
    // At the symbol's start (no IBT) on every version; 4 bytes in (after endbr64) from 5.18.
    for (v, site) in [((5, 10), CMDLINE), ((6, 1), CMDLINE), ((6, 1), CMDLINE + 4)] {
        let r = check_with_sites(&k, v, &[0xffff_ffff_8100_0010, site, NEXT]);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::Accepted,
            "{v:?} {site:#x}: {r:#?}"
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }
}

#[test]
fn a_function_without_a_call_site_fails_the_enable_with_the_kernel_s_lines() {
    let k = kernel();
    // No site from cmdline_proc_show up to the next symbol (static_helper has its own).
    let r = check_with_sites(&k, (6, 1), &[CMDLINE - 0x10, NEXT]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
    assert_eq!(r.verdict.errno, Some(22));
    let p = only_problem(&r);
    assert_eq!(p.kind, ProblemKind::NoFtraceLocation);
    assert_eq!(p.symbol.as_deref(), Some("cmdline_proc_show"));
    assert_eq!(
        lines(&r),
        [
            "livepatch: enabling patch 'lp'",
            "livepatch: failed to find location for function 'cmdline_proc_show'",
            "livepatch: failed to patch object 'vmlinux'",
            "livepatch: failed to enable patch 'lp'",
            "livepatch: 'lp': unpatching complete",
        ]
    );
    // Before 5.18 the failure is ftrace_set_filter_ip()'s, and only an exact site counts:
    // one 4 bytes in (where IBT puts it) is not the function's address.
    for sites in [&[CMDLINE - 0x10, NEXT][..], &[CMDLINE + 4]] {
        let r = check_with_sites(&k, (5, 10), sites);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{sites:x?}"
        );
        assert_eq!(
            lines(&r)[1],
            "livepatch: failed to set ftrace filter for function 'cmdline_proc_show' (-22)"
        );
    }
}

#[test]
fn a_site_covering_the_address_counts_one_past_the_next_symbol_does_not() {
    let k = kernel();
    // The 5-byte call starting 4 bytes before covers the address (ftrace_cmp_recs()).
    let r = check_with_sites(&k, (5, 10), &[CMDLINE - 4]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    let r = check_with_sites(&k, (5, 10), &[CMDLINE - 5]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad);
    // 5.18+: the window ends before the next symbol.
    let r = check_with_sites(&k, (6, 1), &[NEXT - 1]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    let r = check_with_sites(&k, (6, 1), &[NEXT]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad);
}

#[test]
fn init_text_sites_are_gone_after_boot() {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
    b.push(v, CMDLINE, b't', "cmdline_proc_show").unwrap();
    b.push(v, CMDLINE + 0x100, b'T', "_sinittext").unwrap();
    b.push(v, NEXT, b'T', "_einittext").unwrap();
    b.push(v, 0xffff_ffff_8180_0000, b'T', "klp_enable_patch")
        .unwrap();
    let k = b.build();
    let r = check_with_sites(&k, (6, 1), &[CMDLINE]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    // The same function as if it were __init: its record was freed with the init text.
    let mut b = SymbolTableBuilder::new();
    b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
    b.push(v, CMDLINE - 0x100, b'T', "_sinittext").unwrap();
    b.push(v, CMDLINE, b't', "cmdline_proc_show").unwrap();
    b.push(v, NEXT, b'T', "_einittext").unwrap();
    b.push(v, 0xffff_ffff_8180_0000, b'T', "klp_enable_patch")
        .unwrap();
    let k = b.build();
    let r = check_with_sites(&k, (6, 1), &[CMDLINE]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
}

#[test]
fn unknown_sites_are_said_to_be_unchecked() {
    let r = check61(&build_module(&ModSpec::default()));
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("ftrace call site is not checked")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn an_unknown_extent_is_said_to_be_unchecked_not_refused() {
    // The last symbol: nothing after it bounds the window (the kernel uses _etext or _end).
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
    b.push(v, 0xffff_ffff_8080_0000, b'T', "klp_enable_patch")
        .unwrap();
    b.push(v, CMDLINE, b't', "cmdline_proc_show").unwrap();
    let k = b.build();
    let r = check_with_sites(&k, (6, 1), &[CMDLINE + 4]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    // No site even where IBT would put it, and no extent: unknown, with a warning.
    let r = check_with_sites(&k, (6, 1), &[CMDLINE - 0x100]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("extent up to the next symbol is unknown")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn exit_text_sites_are_freed_with_the_init_memory() {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
    b.push(v, CMDLINE - 0x200, b'D', "__init_begin").unwrap();
    b.push(v, CMDLINE - 0x100, b'T', "_sinittext").unwrap();
    b.push(v, CMDLINE - 0x80, b'T', "_einittext").unwrap();
    // An __exit function: past the init text, inside the init memory.
    b.push(v, CMDLINE, b't', "cmdline_proc_show").unwrap();
    b.push(v, NEXT, b'D', "__init_end").unwrap();
    b.push(v, 0xffff_ffff_8180_0000, b'T', "klp_enable_patch")
        .unwrap();
    let k = b.build();
    let r = check_with_sites(&k, (6, 1), &[CMDLINE]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
}

/// A module object's functions are not judged (their call sites are the module's own): a
/// warning says so for each such object, and for none when the patch replaces only vmlinux
/// functions or the load already fails.
#[test]
fn a_module_objects_functions_are_said_not_checked() {
    let k = kernel();
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
        ],
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64)
        .with_ftrace_sites(&[CMDLINE, NEXT], "test sites");
    let r = check(&m, &t);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    let said: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("ftrace call site is not checked"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", r.warnings);
    assert!(said[0].starts_with("object nf_tables: "), "{}", said[0]);
    // Only vmlinux functions, with their sites: nothing to say.
    let r = check_with_sites(&k, (6, 1), &[CMDLINE, NEXT]);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// 5.18 is the first version whose `ftrace_location()` searches from a symbol's start to the
/// next symbol (aebfd12521d9, merged for 5.18-rc1): a site 4 bytes in (after `endbr64`)
/// counts from 5.18 on, never before, and the failure's line changes with it.
#[test]
fn the_fentry_search_and_its_line_begin_with_5_18() {
    let k = kernel();
    let r = check_with_sites(&k, (5, 18), &[CMDLINE + 4]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    let r = check_with_sites(&k, (5, 17), &[CMDLINE + 4]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
    assert_eq!(
        lines(&r)[1],
        "livepatch: failed to set ftrace filter for function 'cmdline_proc_show' (-22)"
    );
    let r = check_with_sites(&k, (5, 18), &[CMDLINE - 0x10, NEXT]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::RefusedAtLoad, "{r:#?}");
    assert_eq!(
        lines(&r)[1],
        "livepatch: failed to find location for function 'cmdline_proc_show'"
    );
}

/// The stable trees took the 5.18 search in `ftrace_location()` (5.10.227, 5.15.162) but not
/// livepatch's new line: a call after the function's start is found there, and a function
/// without one still fails with the filter line (Debian's 5.10.262 prints it, lab case
/// notrace).
#[test]
fn the_stable_trees_search_from_5_10_227_and_5_15_162_with_the_old_line() {
    let k = kernel();
    let at = |v: (u32, u32), sub: u32, sites: &[u64]| {
        let rules = KernelRules {
            sublevel: Some(sub),
            ..KernelRules::for_version(v.0, v.1)
        };
        check_with_rules(&k, rules, sites)
    };
    for (v, old, new) in [((5, 10), 226, 227), ((5, 15), 161, 162)] {
        let r = at(v, new, &[CMDLINE + 4]);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::Accepted,
            "{v:?}.{new}: {r:#?}"
        );
        let r = at(v, old, &[CMDLINE + 4]);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{v:?}.{old}: {r:#?}"
        );
        let r = at(v, new, &[CMDLINE - 0x10, NEXT]);
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{v:?}.{new}: {r:#?}"
        );
        assert_eq!(
            lines(&r)[1],
            "livepatch: failed to set ftrace filter for function 'cmdline_proc_show' (-22)"
        );
    }
}

/// The warning for unknown vmlinux sites says why they are unknown: an x86_64 target that
/// gives no `__mcount_loc` table, or an architecture whose sites are not modelled.
#[test]
fn the_unchecked_sites_warning_says_why() {
    let k = kernel();
    let says = |r: &CheckReport, why: &str| {
        r.warnings
            .iter()
            .any(|w| w.contains("ftrace call site is not checked") && w.contains(why))
    };
    let m_x86 = build_module(&ModSpec::default());
    let m = LivepatchModule::parse(&m_x86).expect("parse");
    let r = check(
        &m,
        &Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64),
    );
    assert!(says(&r, "no __mcount_loc table"), "{:?}", r.warnings);
    assert!(!says(&r, "not modelled"), "{:?}", r.warnings);
    let m_arm = build_module(&ModSpec {
        arch: Arch::Aarch64,
        ..ModSpec::default()
    });
    let m = LivepatchModule::parse(&m_arm).expect("parse");
    let r = check(
        &m,
        &Target::new(&k, KernelRules::for_version(6, 1), Arch::Aarch64),
    );
    assert!(says(&r, "not modelled"), "{:?}", r.warnings);
    assert!(!says(&r, "no __mcount_loc table"), "{:?}", r.warnings);
}

/// The last symbol's extent is unknown wherever it sits: no wrapping arithmetic turns an
/// unknown size into a window reaching the top of the address space (a function at address
/// 1, the last of its table, with a site far above it).
#[test]
fn an_unknown_extent_stays_unknown_at_the_bottom_of_the_address_space() {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0, b'T', "_text").unwrap();
    b.push(v, 0, b'T', "klp_enable_patch").unwrap();
    b.push(v, 1, b't', "cmdline_proc_show").unwrap();
    let k = b.build();
    let r = check_with_sites(&k, (6, 1), &[0x100]);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
    assert_eq!(r.objects[0].funcs[0].address, Some(1), "{r:#?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("extent up to the next symbol is unknown")),
        "{:?}",
        r.warnings
    );
}

/// A module's functions are judged by the call sites of its own `.ko` (`__mcount_loc`,
/// relocated when it loads): the kallsyms names of nf_tables in [`kernel`], each with its facts.
const NFT_NAMES: [&str; 3] = ["nft_helper", "nft_dup", "nft_dup"];

fn check_module_sites(
    version: (u32, u32),
    funcs: Vec<(&'static str, u64)>,
    sites: &[klpsym_elf::SiteFacts],
) -> CheckReport {
    let k = kernel();
    let spec = ModSpec {
        objects: vec![ObjSpec {
            name: Some("nf_tables"),
            funcs,
        }],
        ..ModSpec::default()
    };
    let bytes = build_module(&spec);
    let m = LivepatchModule::parse(&bytes).expect("parse");
    let names: Vec<String> = NFT_NAMES.iter().map(|s| s.to_string()).collect();
    let t = Target::new(
        &k,
        KernelRules::for_version(version.0, version.1),
        Arch::X86_64,
    )
    .with_module_ftrace(
        "nf_tables",
        ModuleFtrace {
            names: &names,
            sites,
            source: "nf_tables.ko",
        },
    );
    check(&m, &t)
}

fn facts(at_start: bool, within: bool) -> klpsym_elf::SiteFacts {
    klpsym_elf::SiteFacts { at_start, within }
}

/// `klp_patch_func()` of a loaded module's function: a site covering its first byte counts on
/// every version; one further in (after `endbr64`) only from 5.18; none fails the enable with
/// the object's lines.
#[test]
fn a_loaded_module_function_needs_its_own_call_site() {
    for (f, v, accepted) in [
        (facts(true, false), (5, 10), true),
        (facts(true, false), (6, 1), true),
        (facts(true, true), (5, 10), true),
        (facts(false, true), (6, 1), true),
        (facts(false, true), (5, 18), true),
        (facts(false, true), (5, 17), false),
        (facts(false, true), (5, 10), false),
        (facts(false, false), (5, 10), false),
        (facts(false, false), (6, 1), false),
    ] {
        let sites = [facts(true, true), facts(true, true), f];
        let r = check_module_sites(v, vec![("nft_dup", 2)], &sites);
        if accepted {
            assert_eq!(
                r.verdict.kind,
                PatchVerdictKind::Accepted,
                "{f:?} {v:?}: {r:#?}"
            );
            assert!(r.problems.is_empty(), "{f:?} {v:?}: {r:#?}");
            continue;
        }
        assert_eq!(
            r.verdict.kind,
            PatchVerdictKind::RefusedAtLoad,
            "{f:?} {v:?}: {r:#?}"
        );
        let p = only_problem(&r);
        assert_eq!(
            (p.kind, &p.stage, p.symbol.as_deref(), p.object.as_deref()),
            (
                ProblemKind::NoFtraceLocation,
                &Stage::PatchEnable,
                Some("nft_dup"),
                Some("nf_tables")
            )
        );
        let first = if v < (5, 18) {
            "livepatch: failed to set ftrace filter for function 'nft_dup' (-22)"
        } else {
            "livepatch: failed to find location for function 'nft_dup'"
        };
        assert_eq!(
            lines(&r),
            [
                "livepatch: enabling patch 'lp'",
                first,
                "livepatch: failed to patch object 'nf_tables'",
                "livepatch: failed to enable patch 'lp'",
                "livepatch: 'lp': unpatching complete",
            ],
            "{f:?} {v:?}"
        );
    }
}

/// The facts judged are those of the definition the lookup found: the old_sympos-th of the
/// name in the module's kallsyms order, never another name's.
#[test]
fn a_module_function_is_judged_by_the_definition_at_its_position() {
    let sites = [facts(false, false), facts(true, false), facts(false, false)];
    for (pos, accepted) in [(0, None), (1, Some(true)), (2, Some(false))] {
        let r = check_module_sites((6, 1), vec![("nft_dup", pos)], &sites);
        match accepted {
            // Two definitions: the lookup itself fails, before any call site is looked at.
            None => assert_eq!(only_problem(&r).kind, ProblemKind::Ambiguous, "{r:#?}"),
            Some(true) => {
                assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{pos}: {r:#?}")
            }
            Some(false) => assert_eq!(
                only_problem(&r).kind,
                ProblemKind::NoFtraceLocation,
                "{pos}: {r:#?}"
            ),
        }
    }
    // The name's only definition, judged by its own facts.
    let sites = [facts(false, false), facts(true, false), facts(true, false)];
    let r = check_module_sites((6, 1), vec![("nft_helper", 0)], &sites);
    assert_eq!(only_problem(&r).symbol.as_deref(), Some("nft_helper"));
    let sites = [facts(true, false), facts(false, false), facts(false, false)];
    let r = check_module_sites((6, 1), vec![("nft_helper", 0)], &sites);
    assert_eq!(r.verdict.kind, PatchVerdictKind::Accepted, "{r:#?}");
}

/// `ftrace_free_init_mem()` frees the records `ftrace_cmp_recs()` matches with the key
/// `[__init_begin, __init_end]`, both ends included: a call beginning at `__init_end`, or
/// overlapping `__init_begin`, is freed; one past either is not.
#[test]
fn the_init_memory_bounds_are_the_kernel_s() {
    const BEGIN: u64 = 0xffff_ffff_8200_0000;
    const END: u64 = 0xffff_ffff_8300_0000;
    // cmdline_proc_show at `at` (its site at its start), between the init memory's bounds.
    let with_function_at = |at: u64| {
        let mut b = SymbolTableBuilder::new();
        let v = ObjectId::VMLINUX;
        b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
        b.push(v, 0xffff_ffff_8180_0000, b'T', "klp_enable_patch")
            .unwrap();
        for (a, t, n) in [
            (at, b't', "cmdline_proc_show"),
            (BEGIN, b'D', "__init_begin"),
            (END, b'D', "__init_end"),
            (0xffff_ffff_8400_0000, b'T', "_etext_like"),
        ] {
            b.push(v, a, t, n).unwrap();
        }
        let k = b.build();
        let sites = [at];
        let mut out = Vec::new();
        for v in [(5, 10), (6, 1)] {
            out.push(check_with_sites(&k, v, &sites).verdict.kind);
        }
        out
    };
    let refused = vec![PatchVerdictKind::RefusedAtLoad; 2];
    let accepted = vec![PatchVerdictKind::Accepted; 2];
    assert_eq!(with_function_at(END), refused, "a call at __init_end");
    assert_eq!(with_function_at(END + 1), accepted, "one past __init_end");
    assert_eq!(
        with_function_at(BEGIN - 4),
        refused,
        "a call into __init_begin"
    );
    assert_eq!(
        with_function_at(BEGIN - 5),
        accepted,
        "a call ending at __init_begin"
    );
}

/// A target that hides its addresses (every address read as 0: kptr_restrict) finds the
/// replaced function by name but cannot hold it against any call site: the check says it is
/// not checked, where it once said nothing.
#[test]
fn hidden_addresses_leave_the_call_sites_unchecked_and_say_so() {
    let mut b = SymbolTableBuilder::new();
    for n in [
        "_text",
        "cmdline_proc_show",
        "static_helper",
        "klp_enable_patch",
    ] {
        b.push(ObjectId::VMLINUX, 0, b't', n).unwrap();
    }
    let k = b.build();
    assert!(k.addresses_hidden());
    let r = check_with_sites(&k, (6, 1), &[CMDLINE]);
    let said: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("hides its addresses"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", r.warnings);
    assert!(
        said[0].starts_with("object vmlinux: whether 1 replaced function(s)"),
        "{}",
        said[0]
    );
    // With the addresses shown, nothing of the kind is said.
    let r = check_with_sites(&kernel(), (6, 1), &[CMDLINE]);
    assert!(
        r.warnings
            .iter()
            .all(|w| !w.contains("hides its addresses")),
        "{:?}",
        r.warnings
    );
}
