//! What the kernel will do with a livepatch module, on every kernel it may meet: the module
//! loader's checks, every lookup and relocation, the verdict and the kernel's own lines.

use std::collections::HashMap;
use std::path::PathBuf;

mod answer;
mod built_for;
mod coverage;
mod patch;

pub use answer::{CheckRun, KernelCheck, OpenRow, Unchecked};
pub(crate) use built_for::{open_built_for, pick_release, BuiltFor};
pub use coverage::{CopyAsBuilt, CopyStatus, CoveredCopy, FunctionCoverage};
pub(crate) use patch::read_module;
pub use patch::Patch;

use klpsym_core::{bulk, Resched};
use klpsym_livepatch::{
    resolution_cost_with, CheckReport, CheckStatus, CostModel, Fact, LivepatchModule,
    PatchVerdictKind, Preemption, StructLayouts,
};

use crate::binding::{AsBuilt, Binding, BuiltForWay};
use crate::error::{Error, ErrorKind, Result};
use crate::kernel::Kernel;
use crate::run::{settle, KernelFailure, Kernels};
use crate::target::{Layouts, TargetFacts, TargetOptions};
use patch::{objects_of, parse};

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// What is known of the targets beyond their symbols.
    pub target: TargetOptions,
    /// Sections of the patch placed at load addresses, each `(section name, address)`:
    /// `(".text".into(), 0xffff_ffff_c0a0_0000)`, so that PC-relative values are exact. A
    /// name the patch has no section of is a usage error ([`crate::Input::SectionBase`]).
    pub section_bases: Vec<(String, u64)>,
    /// A `/sys/module/<name>/sections` folder (or a copy) placing every section as the kernel
    /// did.
    pub sections_from: Option<PathBuf>,
    /// Keep every ordinary relocation in the report (a patch has thousands).
    pub explain: bool,
    /// Warn when the kernel would hold a CPU longer than this many milliseconds.
    pub hold_warn_ms: f64,
    /// Nanoseconds the target spends per kallsyms entry its lookups visit.
    pub visit_ns: Option<f64>,
    /// The kernel the patch was built for (any source klpsym reads; the packages of one
    /// release in a folder): each binding is compared with the definition it binds there.
    /// `None`: the kernel among those checked whose release the patch's vermagic names, if
    /// any.
    pub built_for: Option<PathBuf>,
    /// Predict a forced load (`modprobe --force`, `finit_module(2)` with
    /// MODULE_INIT_IGNORE_MODVERSIONS | MODULE_INIT_IGNORE_VERMAGIC): the module's symbol
    /// versions and vermagic are ignored, and a target with CONFIG_MODULE_FORCE_LOAD loads
    /// it tainted where it would refuse a module built for another build.
    pub force: bool,
    /// Look for every copy of each replaced function in the kernel's DWARF (inlined into
    /// other functions, cloned) and whether the patch replaces it ([`KernelCheck::coverage`]).
    /// On by default; off, nothing is said of copies either way.
    pub coverage: bool,
    /// A check that leaves something open (what decides the load, a replaced function's
    /// copies) says no ([`KernelCheck::outcome`]): off, only a refusal, another binding or a
    /// copy not replaced does.
    pub strict: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            target: TargetOptions::default(),
            section_bases: Vec::new(),
            sections_from: None,
            explain: false,
            hold_warn_ms: crate::options::defaults::HOLD_WARN_MS,
            visit_ns: None,
            built_for: None,
            force: false,
            coverage: true,
            strict: false,
        }
    }
}

/// Checks `patch` against each of `kernels`: what the kernel will do when it is loaded there.
///
/// The check reads what it needs itself: a patch's module objects from the module tree or
/// the packages a kernel was opened from, the kernel the patch was built for (named in
/// [`CheckOptions::built_for`], or among `kernels` by the patch's vermagic). What it could not
/// consult is listed in [`KernelCheck::unchecked`], and a kernel that would accept the patch
/// is then [`PatchVerdictKind::Unverified`], never [`PatchVerdictKind::Accepted`].
///
/// ```no_run
/// use klpsym::{check, CheckOptions, Options, Patch, PatchVerdictKind};
/// let opts = Options::new();
/// let patch = Patch::read("livepatch-fix.ko", &opts)?;
/// let kernel = klpsym::open("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb", &opts)?;
/// let run = check(&patch, &[&kernel], &CheckOptions::default())?;
/// for r in &run.results {
///     println!("{}: {:?}", r.kernel, r.verdict());
/// }
/// for f in &run.failed {
///     println!("{}: not checked: {}", f.kernel, f.error);
/// }
/// # Ok::<(), klpsym::Error>(())
/// ```
pub fn check(patch: &Patch, kernels: &[&Kernel], copts: &CheckOptions) -> Result<CheckRun> {
    let Some(first) = kernels.first() else {
        return Err(Error::usage("check needs at least one kernel"));
    };
    let built = BuiltFor::among(patch, kernels, copts, first.options())?;
    check_with(patch, kernels, copts, &built)
}

/// [`check`] with the kernel the patch was built for found already (a fleet finds it once,
/// among all its kernels, before checking them one at a time).
pub(crate) fn check_with(
    patch: &Patch,
    kernels: &[&Kernel],
    copts: &CheckOptions,
    built: &BuiltFor,
) -> Result<CheckRun> {
    let Some(first) = kernels.first() else {
        return Err(Error::usage("check needs at least one kernel"));
    };
    let mut rs = first.opts.resched();
    let rs = &mut rs;
    // A BTF named for every kernel: read once.
    let named = match &copts.target.btf {
        Some(p) => Some(Layouts::from_btf_file(p, true, first.options())?),
        None => None,
    };
    // The module as the last kernel's layouts read it (kernels of one series share them).
    let mut parsed: Option<(StructLayouts, LivepatchModule<'_>)> = None;
    let mut bases: Vec<(u32, u64)> = Vec::new();
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for &k in kernels {
        let layouts = match &named {
            Some(l) => l.clone(),
            None => match Layouts::for_kernel(&copts.target, k) {
                Ok(l) => l,
                Err(e) if one_kernels(&e) => {
                    failed.push(KernelFailure::new(k.path().display().to_string(), &e));
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        if parsed.as_ref().is_none_or(|(l, _)| *l != layouts.layouts) {
            if let Some((_, m)) = parsed.take() {
                m.drop_with_points(rs)?;
            }
            let mut m = parse(&patch.path, &patch.bytes, &layouts.layouts, rs)?;
            if copts.force {
                m.force_loaded();
            }
            bases = section_bases(&m, patch, copts, rs)?;
            parsed = Some((layouts.layouts, m));
        }
        let module = &parsed.as_ref().expect("parsed just above").1;
        let b = BuiltForKernel {
            kernel: built.kernel(kernels),
            release: built.release.as_deref(),
            mismatch: built.mismatch.as_deref(),
            way: built.way,
        };
        match check_one(k, module, &layouts, &bases, b, copts, rs) {
            Ok(r) => results.push(r),
            Err(e) if one_kernels(&e) => {
                failed.push(KernelFailure::new(k.path().display().to_string(), &e))
            }
            Err(e) => return Err(e),
        }
    }
    if let Some((_, m)) = parsed {
        m.drop_with_points(rs)?;
    }
    Ok(CheckRun::new(
        patch,
        results,
        failed,
        !bases.is_empty(),
        copts.strict,
    ))
}

/// [`check`] over the kernels of a set: the sources that did not open are failure rows
/// beside the others' answers, what was said while opening is in [`CheckRun::notes`], and
/// [`CheckRun::outcome`] says how the run ends (a run without an answer follows the one rule
/// of every run: a single kernel's error is the run's).
pub fn check_kernels(patch: &Patch, kernels: Kernels, copts: &CheckOptions) -> Result<CheckRun> {
    let (kernels, mut unopened, notes) = kernels.into_parts();
    let mut run = if kernels.is_empty() {
        CheckRun::new(patch, Vec::new(), Vec::new(), false, copts.strict)
    } else {
        let refs: Vec<&Kernel> = kernels.iter().collect();
        check(patch, &refs, copts)?
    };
    unopened.append(&mut run.failed);
    settle(run.results.len(), &mut unopened)?;
    run.failed = unopened;
    run.notes = notes;
    run.outcome = CheckRun::judge(&run.results, &run.failed, copts.strict);
    Ok(run)
}

/// True for an error that concerns one kernel only (not a cancellation, not a usage mistake
/// that concerns them all).
fn one_kernels(e: &Error) -> bool {
    !matches!(e.kind(), ErrorKind::Cancelled | ErrorKind::Usage)
}

/// What one kernel's check knows of the built-for kernel.
#[derive(Clone, Copy)]
struct BuiltForKernel<'a> {
    kernel: Option<&'a Kernel>,
    release: Option<&'a str>,
    mismatch: Option<&'a str>,
    way: BuiltForWay,
}

/// One kernel's check: the kernel's path with its facts, the bindings, the verdict with what
/// was not checked.
fn check_one(
    k: &Kernel,
    module: &LivepatchModule<'_>,
    layouts: &Layouts,
    bases: &[(u32, u64)],
    built: BuiltForKernel<'_>,
    copts: &CheckOptions,
    rs: &mut Resched,
) -> Result<KernelCheck> {
    let objects = objects_of(module);
    let facts = TargetFacts::gather(k, &copts.target, layouts, &objects, rs)?;
    let mut report = facts.with_target(module.arch, bases, |t| {
        klpsym_livepatch::check_with(module, t, rs)
    })?;
    if !copts.explain {
        // Every ordinary relocation is listed on request only: a patch has thousands.
        let all = std::mem::take(&mut report.ordinary_relocations);
        bulk::free_with_points(all, rs)?;
    }
    add_candidate_lines(k, &mut report)?;
    let model = cost_model(copts, &facts.rules, facts.config());
    let mut resolution_cost = facts.with_target(module.arch, bases, |t| {
        resolution_cost_with(module, t, &model, rs)
    })?;
    // Refused by the module loader before apply_relocations(): the kernel makes no lookup,
    // so the patch costs it nothing.
    if report
        .problems
        .iter()
        .any(|p| p.reached && p.kind.refuses_before_lookups())
    {
        resolution_cost = resolution_cost.not_reached();
    }
    let wanted = crate::binding::wanted(module, report.ksym_name_len);
    let built_for = built.kernel;
    let here = crate::binding::Sources::new(k);
    let there = built_for.map(crate::binding::Sources::new);
    let unloaded = &report.verdict.unchecked_modules;
    let bindings = crate::binding::bindings(
        &here,
        &wanted,
        there.as_ref().map(|t| (t, built.way)),
        unloaded,
    )?;
    let modules = match (&there, built_for) {
        (Some(t), Some(b)) if !crate::binding::same_build(k, b) => {
            crate::binding::compare_modules(&here, t, &objects, unloaded)?
        }
        _ => Vec::new(),
    };
    // Every copy of each replaced function, where the kernel takes the patch.
    let coverage = if !copts.coverage
        || report.verdict.kind == PatchVerdictKind::RefusedAtLoad
        || report.verdict.kind == PatchVerdictKind::OrdinaryModule
    {
        Vec::new()
    } else {
        coverage::coverage(k, &bindings, built_for, unloaded)?
    };
    let mut notes = layouts.notes.clone();
    notes.extend(facts.notes);
    let mut unchecked = unchecked(&report, &bindings, &built);
    for m in &modules {
        if let crate::binding::ModuleAsBuilt::Unproven { why } = &m.as_built {
            unchecked.push(Unchecked::new(
                OpenRow::ModuleBuild {
                    module: m.object.clone(),
                },
                format!("module {}", m.object),
                format!("not proven the build the patch was made for: {why}"),
            ));
        }
    }
    settle_verdict(&mut report, &bindings, &modules, &unchecked);
    if matches!(
        report.verdict.kind,
        PatchVerdictKind::Accepted | PatchVerdictKind::Unverified
    ) && coverage.iter().any(|f| f.not_replaced().next().is_some())
    {
        report.verdict.kind = PatchVerdictKind::PartialCoverage;
    }
    Ok(KernelCheck {
        kernel: k.path().display().to_string(),
        unchecked,
        bindings,
        modules,
        coverage,
        report,
        resolution_cost,
        notes,
    })
}
/// The section placements asked for: `--sections-from` then `--section-base`.
fn section_bases(
    module: &LivepatchModule<'_>,
    patch: &Patch,
    copts: &CheckOptions,
    rs: &mut Resched,
) -> Result<Vec<(u32, u64)>> {
    // Section indexes by name, once (a module has dozens to thousands of sections).
    let mut by_name: HashMap<&str, u32> = HashMap::with_capacity(module.elf.sections.len());
    for sec in &module.elf.sections {
        rs.tick()?;
        by_name.entry(sec.name.as_str()).or_insert(sec.index);
    }
    let mut bases: Vec<(u32, u64)> = Vec::new();
    if let Some(dir) = &copts.sections_from {
        for (name, addr) in klpsym_io::read_section_addresses(dir, rs)? {
            let Some(&index) = by_name.get(name.as_str()) else {
                return Err(Error::bad_input(format!(
                    "sections folder {}: the kernel placed a section '{name}' that {} does not have: is this the module that was loaded?",
                    dir.display(),
                    patch.path.display()
                )).about(crate::error::Input::SectionsFolder));
            };
            bases.push((index, addr));
        }
    }
    for (name, addr) in &copts.section_bases {
        let index = by_name.get(name.as_str()).copied().ok_or_else(|| {
            Error::usage(format!(
                "section base '{name}={addr:#x}': {} has no section '{name}'",
                patch.path.display()
            ))
            .about(crate::error::Input::SectionBase)
        })?;
        bases.push((index, *addr));
    }
    Ok(bases)
}

/// Nanoseconds per kallsyms entry: expanding one compressed name and one strcmp().
const DEFAULT_VISIT_NS: f64 = 50.0;

/// The kernel's resolution cost model: its preemption and HZ from its config (else what
/// distributions build for its version), the per-entry cost.
fn cost_model(
    copts: &CheckOptions,
    rules: &klpsym_livepatch::KernelRules,
    config: Option<&klpsym_io::KernelConfig>,
) -> CostModel {
    let preemption = config
        .and_then(|c| {
            Preemption::from_config(|o| c.enabled(o))
                .map(|p| Fact::new(p, format!("{}", c.path.display())))
        })
        .unwrap_or_else(|| {
            Fact::new(
                Preemption::assumed(rules.version),
                format!(
                    "assumed for {}.{} (no kernel config found)",
                    rules.version.0, rules.version.1
                ),
            )
        });
    let hz = config
        .and_then(|c| c.value("CONFIG_HZ"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(250);
    let visit_ns = match copts.visit_ns {
        Some(ns) => Fact::new(ns, "given (visit_ns)"),
        None => Fact::new(
            DEFAULT_VISIT_NS,
            "default: an x86_64 estimate, not yet calibrated on real hardware (a measured figure can be given)",
        ),
    };
    CostModel {
        preemption,
        hz,
        visit_ns,
        hold_warn_ms: copts.hold_warn_ms,
    }
}

/// What a check leaves unchecked: a module that is not a livepatch, deferred objects without
/// their module, module loader checks without the target's fact, and the bindings nothing
/// proves (no built-for kernel, another release, no source file on a side).
fn unchecked(r: &CheckReport, bindings: &[Binding], built: &BuiltForKernel<'_>) -> Vec<Unchecked> {
    let mut out = Vec::new();
    if r.verdict.kind == PatchVerdictKind::OrdinaryModule {
        out.push(Unchecked::new(
            OpenRow::NotALivepatch,
            "not a livepatch module",
            "nothing of livepatch was checked",
        ));
    }
    for m in &r.verdict.unchecked_modules {
        out.push(Unchecked::new(
            OpenRow::DeferredObject { module: m.clone() },
            format!("object {m}, for when {m} loads"),
            format!("its module is not loaded and no {m}.ko was found (in the module tree or the kernel's packages): what the kernel does when {m} loads is not checked"),
        ));
    }
    // Every loader row decides the load, the signature's too: a signed module's signature is
    // verified against a keyring no file shows, and an unsigned one's fate hangs on the
    // target's CONFIG_MODULE_SIG_FORCE.
    for c in &r.loader_checks {
        if c.status == CheckStatus::NotChecked {
            out.push(Unchecked::new(
                OpenRow::LoaderCheck { check: c.check },
                format!("module loader, {}", c.check),
                format!("not checked: {}", c.detail),
            ));
        }
    }
    let bound = bindings.iter().any(|b| b.bound.is_some());
    match (built.kernel, built.mismatch) {
        (None, _) if bound => out.push(Unchecked::new(
            OpenRow::BuiltFor,
            "bindings",
            match built.release {
                Some(r) => format!("no built-for kernel: the patch's vermagic names {r}, none of the kernels checked; give the kernel it was built for to prove each symbol binds the definition it was built for"),
                None => "no built-for kernel: the patch has no vermagic to find it by; give the kernel it was built for to prove each symbol binds the definition it was built for".to_string(),
            },
        )),
        (Some(_), Some(why)) if bound => {
            out.push(Unchecked::new(OpenRow::BuiltFor, "bindings", why))
        }
        _ => {}
    }
    for b in bindings {
        if let Some(AsBuilt::Unproven { why }) = &b.as_built {
            out.push(Unchecked::new(
                OpenRow::Binding {
                    object: b.object.clone(),
                    name: b.name.clone(),
                    sympos: b.sympos,
                },
                format!("binding of {}:{},{}", b.object, b.name, b.sympos),
                format!("not proven against the built-for kernel: {why}"),
            ));
        }
    }
    out
}

/// The headline verdict: a patch the kernel accepts is `binds_another_definition` when a
/// symbol binds another definition than on the built-for kernel, else `unverified` when
/// something that decides the load was not checked. Refusals stand as the kernel gives them.
fn settle_verdict(
    r: &mut CheckReport,
    bindings: &[Binding],
    modules: &[crate::binding::ModuleComparison],
    unchecked: &[Unchecked],
) {
    if !matches!(
        r.verdict.kind,
        PatchVerdictKind::Accepted | PatchVerdictKind::Unverified
    ) {
        return;
    }
    if bindings
        .iter()
        .any(|b| b.as_built.as_ref().is_some_and(AsBuilt::binds_another))
        || modules
            .iter()
            .any(crate::binding::ModuleComparison::differs)
    {
        r.verdict.kind = PatchVerdictKind::BindsAnotherDefinition;
    } else if !unchecked.is_empty() {
        r.verdict.kind = PatchVerdictKind::Unverified;
    }
}

/// DWARF declaration lines for the vmlinux candidates of ambiguity reports, when the kernel is
/// (or has) a vmlinux with debug info: the n-th candidate is the n-th definition of the name.
fn add_candidate_lines(k: &Kernel, report: &mut CheckReport) -> Result<()> {
    use klpsym_core::ObjectId;
    let mut at: Vec<(usize, usize)> = Vec::new();
    let mut ids = Vec::new();
    for (pi, p) in report.problems.iter().enumerate() {
        let Some(name) = &p.symbol else { continue };
        // A klp relocation's symbol is `.klp.sym.OBJ.NAME,POS`: the definitions are NAME's.
        let name = match name.strip_prefix(".klp.sym.") {
            Some(rest) => rest
                .split_once('.')
                .map_or(rest, |(_, n)| n)
                .rsplit_once(',')
                .map_or(rest, |(n, _)| n),
            None => name.as_str(),
        };
        let defs: Vec<klpsym_core::SymbolId> = k
            .table()
            .by_name_in(name, ObjectId::VMLINUX)
            .map(|s| s.id)
            .collect();
        for (ci, c) in p.candidates.iter().enumerate() {
            if c.object == "vmlinux" && c.file.is_some() {
                if let Some(&id) = defs.get(c.position as usize - 1) {
                    at.push((pi, ci));
                    ids.push(id);
                }
            }
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    let lines = k.decl_lines(&ids)?;
    for ((pi, ci), l) in at.into_iter().zip(lines) {
        if let Some(l) = l {
            let c = &mut report.problems[pi].candidates[ci];
            c.line = Some(l.line);
            c.decl_file = Some(l.file);
        }
    }
    Ok(())
}
