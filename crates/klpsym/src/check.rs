//! What the kernel will do with a livepatch module, on every kernel it may meet: the module
//! loader's checks, every lookup and relocation, the verdict and the kernel's own lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use klpsym_core::{bulk, Cancelled, Resched};
use klpsym_livepatch::{
    resolution_cost_with, CheckReport, CheckStatus, CostModel, Fact, LivepatchModule, Preemption,
    ResolutionCost, StructLayouts, VerdictKind,
};

use crate::binding::{AsBuilt, Binding};
use crate::error::{Error, ErrorKind, Result};
use crate::kernel::{Kernel, Note};
use crate::target::{Layouts, TargetFacts, TargetOptions};

/// A livepatch module read from a file (or bytes), with what a caller needs before opening
/// the kernels it will be checked against.
#[derive(Debug)]
pub struct Patch {
    path: PathBuf,
    bytes: Vec<u8>,
    objects: Vec<String>,
}

impl Patch {
    /// Reads and parses the module at `path`. An unreadable or malformed file is an error
    /// naming it. (It is parsed again against each kernel, with that kernel's struct layouts.)
    pub fn read(path: impl AsRef<Path>, opts: &crate::Options) -> Result<Patch> {
        let path = path.as_ref();
        // A folder is not a patch (the message for a kernel source's folder would point at
        // --modules).
        if path.is_dir() {
            return Err(Error::usage(format!(
                "PATCH: {}: is a directory; the patch is one module file (.ko, .ko.xz, .ko.zst or .ko.gz)",
                path.display()
            )));
        }
        let mut rs = opts.resched();
        let bytes = read_module(path, opts.max_input_size, &mut rs)
            .map_err(|e| Error::from(e).context("PATCH"))?;
        Patch::from_bytes(path, bytes, &mut rs)
    }

    /// A patch from bytes already read; `path` names it in messages.
    pub fn from_bytes(path: impl AsRef<Path>, bytes: Vec<u8>, rs: &mut Resched) -> Result<Patch> {
        let path = path.as_ref();
        let m = parse(path, &bytes, &StructLayouts::fallback(6, 1), rs)?;
        let objects = objects_of(&m);
        m.drop_with_points(rs)?;
        Ok(Patch {
            path: path.to_path_buf(),
            bytes,
            objects,
        })
    }

    /// The release its vermagic names (`6.1.0-57-amd64`): the kernel it was built for.
    pub fn built_for_release(&self) -> Option<String> {
        let mut rs = Resched::none();
        let m = parse(
            &self.path,
            &self.bytes,
            &StructLayouts::fallback(6, 1),
            &mut rs,
        )
        .ok()?;
        m.modinfo("vermagic")
            .and_then(|v| v.split_whitespace().next())
            .map(str::to_string)
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The objects it patches (`vmlinux`, module names), in its `klp_object` order, as the
    /// common struct layouts read them.
    pub fn objects(&self) -> &[String] {
        &self.objects
    }

    /// True when checking it needs the target's modules (a package's modules are then read):
    /// it patches a module, or its objects could not be read.
    pub fn needs_modules(&self) -> bool {
        self.objects.is_empty() || self.objects.iter().any(|o| o != "vmlinux")
    }

    /// The modules a check of this patch reads from a package
    /// ([`crate::Options::package_module_names`]):
    /// its objects but vmlinux; `None` (every module) for a module that is not a livepatch,
    /// whose references any module may export.
    pub fn module_objects(&self) -> Option<Vec<String>> {
        (!self.objects.is_empty()).then(|| {
            self.objects
                .iter()
                .filter(|o| *o != "vmlinux")
                .cloned()
                .collect()
        })
    }
}

/// The module at `path` parsed with `layouts`, or the error naming it.
fn parse<'d>(
    path: &Path,
    bytes: &'d [u8],
    layouts: &StructLayouts,
    rs: &mut Resched,
) -> Result<LivepatchModule<'d>> {
    LivepatchModule::parse_with(bytes, layouts, rs).map_err(|e| {
        if let klpsym_livepatch::ParseError::Cancelled = e {
            return Error::cancelled();
        }
        let hint = if path.is_dir() {
            " (PATCH is the module file; a module tree goes to --modules)"
        } else {
            ""
        };
        Error::bad_input(format!("PATCH {}: {e}{hint}", path.display()))
    })
}

/// The objects of a parsed patch, by name.
fn objects_of(m: &LivepatchModule<'_>) -> Vec<String> {
    match &m.patch {
        Ok(p) => p
            .objects
            .iter()
            .map(|o| o.object_name().to_string())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// What is known of the targets beyond their symbols.
    pub target: TargetOptions,
    /// Sections of the patch placed at addresses (`.text=0xffffffffc0a00000`), so
    /// PC-relative values are exact.
    pub section_bases: Vec<String>,
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
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            target: TargetOptions::default(),
            section_bases: Vec::new(),
            sections_from: None,
            explain: false,
            hold_warn_ms: 100.0,
            visit_ns: None,
            built_for: None,
            force: false,
        }
    }
}

/// One kernel's answer for a patch.
#[derive(Debug, Serialize)]
pub struct KernelCheck {
    /// The kernel's source.
    pub kernel: String,
    /// What was not checked (`--strict` fails on these), in words.
    pub unchecked: Vec<String>,
    /// What the kernel does with the patch.
    pub report: CheckReport,
    /// What resolving the patch's symbols costs this kernel (lookups, entries visited, the
    /// longest hold without a reschedule point).
    pub resolution_cost: ResolutionCost,
    /// The definition each symbol of the patch binds here (its replaced functions, then its
    /// klp relocation symbols), with its identity and, when the built-for kernel is known,
    /// whether it is the definition the patch was built for.
    pub bindings: Vec<Binding>,
    /// What was said while gathering this kernel's facts.
    #[serde(skip)]
    pub notes: Vec<Note>,
}

impl KernelCheck {
    /// True when the kernel refuses the patch (now or when a module loads).
    pub fn refused(&self) -> bool {
        matches!(
            self.report.verdict.kind,
            VerdictKind::RefusedAtLoad | VerdictKind::RefusedWhenModuleLoads
        )
    }

    /// True when the patch loads here but some symbol binds another definition than on the
    /// kernel it was built for: the silent failure.
    pub fn binds_another(&self) -> bool {
        !self.refused()
            && self
                .bindings
                .iter()
                .any(|b| b.as_built.as_ref().is_some_and(AsBuilt::binds_another))
    }
}

/// A kernel that could not be checked (its facts could not be read: a broken BTF,
/// configuration or Module.symvers), or opened: the others still are.
#[derive(Debug, Clone, Serialize)]
pub struct KernelFailure {
    /// The kernel's source.
    pub kernel: String,
    /// Why, as the error says it.
    pub error: String,
}

impl KernelFailure {
    /// `kernel` could not be opened or checked because of `error`.
    pub fn new(kernel: impl Into<String>, error: &Error) -> KernelFailure {
        KernelFailure {
            kernel: kernel.into(),
            error: error.to_string(),
        }
    }
}

/// True for an error that concerns one kernel only (not a cancellation, not a usage mistake
/// that concerns them all).
fn one_kernels(e: &Error) -> bool {
    !matches!(e.kind(), ErrorKind::Cancelled | ErrorKind::Usage)
}

/// A patch checked against every kernel given.
#[derive(Debug, Serialize)]
pub struct CheckRun {
    /// The patch's path.
    pub patch: String,
    /// One answer per kernel that could be checked, in the order given.
    pub results: Vec<KernelCheck>,
    /// The kernels that could not be checked, each with why (a caller adds those it could
    /// not open, [`crate::Opened`]).
    pub failed: Vec<KernelFailure>,
    /// True when sections were placed (ordinary relocations are then exact).
    #[serde(skip)]
    pub placed: bool,
}

impl CheckRun {
    /// True when some kernel refuses the patch.
    pub fn refused(&self) -> bool {
        self.results.iter().any(KernelCheck::refused)
    }

    /// True when on some kernel the patch loads and binds another definition than on the
    /// kernel it was built for.
    pub fn binds_another(&self) -> bool {
        self.results.iter().any(KernelCheck::binds_another)
    }

    /// True when something that decides a load was not checked on some kernel.
    pub fn incomplete(&self) -> bool {
        self.results.iter().any(|r| !r.unchecked.is_empty())
    }

    /// Frees the reports with reschedule points (a big patch's report is tens of thousands
    /// of strings per kernel).
    pub fn free(self, rs: &mut Resched) -> Result<(), Cancelled> {
        for r in self.results {
            r.report.drop_with_points(rs)?;
        }
        Ok(())
    }
}

/// Checks `patch` against each of `kernels`: what the kernel will do when it is loaded there.
///
/// ```no_run
/// use klpsym::{check, CheckOptions, Options, Patch};
/// let opts = Options::new();
/// let copts = CheckOptions::default();
/// let patch = Patch::read("livepatch-fix.ko", &opts)?;
/// let kernel = klpsym::open("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb", &opts)?;
/// let run = check(&patch, &[&kernel], &copts)?;
/// println!("{:?}", run.results[0].report.verdict.kind);
/// # Ok::<(), klpsym::Error>(())
/// ```
pub fn check(patch: &Patch, kernels: &[&Kernel], copts: &CheckOptions) -> Result<CheckRun> {
    let Some(first) = kernels.first() else {
        return Err(Error::usage("check needs at least one kernel"));
    };
    let mut rs = first.opts.resched();
    let rs = &mut rs;
    // `--btf` names one BTF for every kernel: read once.
    let named = match &copts.target.btf {
        Some(p) => Some(Layouts::from_btf_file(p, true, first.options())?),
        None => None,
    };
    // The kernel the patch was built for: named, or the one checked whose release the
    // patch's vermagic names.
    let built_opened = match &copts.built_for {
        Some(p) => Some(open_built_for(p, first.options())?),
        None => None,
    };
    let built_for: Option<&Kernel> = match &built_opened {
        Some(k) => Some(k),
        None => patch.built_for_release().and_then(|r| {
            kernels
                .iter()
                .copied()
                .find(|k| k.release().as_deref() == Some(&r))
        }),
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
        let objects = objects_of(module);
        let facts = match TargetFacts::gather(k, &copts.target, &layouts, &objects, rs) {
            Ok(f) => f,
            Err(e) if one_kernels(&e) => {
                failed.push(KernelFailure::new(k.path().display().to_string(), &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut report = facts.with_target(module.arch, &bases, |t| {
            klpsym_livepatch::check_with(module, t, rs)
        })?;
        if !copts.explain {
            // Every ordinary relocation is listed on request only: a patch has thousands.
            let all = std::mem::take(&mut report.ordinary_relocations);
            bulk::free_with_points(all, rs)?;
        }
        add_candidate_lines(k, &mut report)?;
        let model = cost_model(copts, &facts.rules, facts.config());
        let mut resolution_cost = facts.with_target(module.arch, &bases, |t| {
            resolution_cost_with(module, t, &model, rs)
        })?;
        // Refused by the module loader before apply_relocations(): the kernel makes no
        // lookup, so the patch costs it nothing.
        if report
            .problems
            .iter()
            .any(|p| p.reached && p.kind.refuses_before_lookups())
        {
            resolution_cost = resolution_cost.not_reached();
        }
        let wanted = crate::binding::wanted(module, report.ksym_name_len);
        let bindings =
            crate::binding::bindings(k, &wanted, built_for, &report.verdict.unchecked_modules)?;
        let mut notes = layouts.notes;
        notes.extend(facts.notes);
        let mut unchecked = unchecked(&report);
        for b in &bindings {
            if let Some(AsBuilt::Unproven { why }) = &b.as_built {
                unchecked.push(format!(
                    "binding of {}:{},{}: not proven against the built-for kernel: {why}",
                    b.object, b.name, b.sympos
                ));
            }
        }
        results.push(KernelCheck {
            kernel: k.path().display().to_string(),
            unchecked,
            bindings,
            report,
            resolution_cost,
            notes,
        });
    }
    if let Some((_, m)) = parsed {
        m.drop_with_points(rs)?;
    }
    Ok(CheckRun {
        patch: patch.path.display().to_string(),
        results,
        failed,
        placed: !bases.is_empty(),
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
                    "--sections-from {}: the kernel placed a section '{name}' that {} does not have: is this the module that was loaded?",
                    dir.display(),
                    patch.path.display()
                )));
            };
            bases.push((index, addr));
        }
    }
    for s in &copts.section_bases {
        let (name, addr) = s
            .rsplit_once('=')
            .ok_or_else(|| Error::usage(format!("--section-base '{s}': expected NAME=ADDR")))?;
        let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
            .map_err(|_| Error::usage(format!("--section-base '{s}': '{addr}' is not hex")))?;
        let index = by_name.get(name).copied().ok_or_else(|| {
            Error::usage(format!(
                "--section-base '{s}': the module has no section '{name}'"
            ))
        })?;
        bases.push((index, a));
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
                    "assumed for {}.{} (no kernel config found; --kernel-config)",
                    rules.version.0, rules.version.1
                ),
            )
        });
    let hz = config
        .and_then(|c| c.value("CONFIG_HZ"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(250);
    let visit_ns = match copts.visit_ns {
        Some(ns) => Fact::new(ns, "--visit-ns"),
        None => Fact::new(
            DEFAULT_VISIT_NS,
            "default: an x86_64 estimate, not yet calibrated on real hardware (--visit-ns)",
        ),
    };
    CostModel {
        preemption,
        hz,
        visit_ns,
        hold_warn_ms: copts.hold_warn_ms,
    }
}

/// What a report leaves unchecked, for `--strict` and the warning lines.
fn unchecked(r: &CheckReport) -> Vec<String> {
    let mut out = Vec::new();
    if r.verdict.kind == VerdictKind::OrdinaryModule {
        out.push("not a livepatch module: nothing of livepatch was checked".to_string());
    }
    for m in &r.verdict.unchecked_modules {
        out.push(format!(
            "object {m}: its module is not loaded and no {m}.ko was given (--modules): what the kernel does when {m} loads is not checked"
        ));
    }
    for c in &r.loader_checks {
        if c.status == CheckStatus::NotChecked && c.check != "signature" {
            out.push(format!(
                "module loader, {}: not checked: {}",
                c.check, c.detail
            ));
        }
    }
    out
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

/// A module file's ELF bytes: a `.ko`, or a `.ko.xz`/`.ko.zst`/`.ko.gz` decompressed (known by
/// its magic, not its name) as modprobe or the kernel (CONFIG_MODULE_DECOMPRESS) does before
/// the module loader reads it. At most `limit` bytes either way.
pub(crate) fn read_module(
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> std::result::Result<Vec<u8>, klpsym_io::LoadError> {
    let raw = klpsym_io::read_bounded(path, limit, rs)?;
    let plain = match klpsym_io::decompressed(&raw, path, limit, rs)? {
        std::borrow::Cow::Owned(v) => Some(v),
        std::borrow::Cow::Borrowed(_) => None,
    };
    match plain {
        Some(v) => {
            bulk::free_with_points(raw, rs)?;
            Ok(v)
        }
        None => Ok(raw),
    }
}

/// Opens `--built-for`: one kernel (a folder or several packages must form exactly one),
/// with its debug package read (source files give definitions their identity).
fn open_built_for(path: &Path, opts: &crate::Options) -> Result<Kernel> {
    let opts = crate::Options {
        debug_packages: true,
        progress: None,
        ..opts.clone()
    };
    let mut opened =
        crate::open_all(&[path.to_path_buf()], &opts).map_err(|e| e.context("--built-for"))?;
    if opened.len() != 1 {
        return Err(Error::usage(format!(
            "--built-for {}: names {} kernels; give the one the patch was built for",
            path.display(),
            opened.len()
        )));
    }
    opened
        .remove(0)
        .kernel
        .map_err(|e| e.context("--built-for"))
}
