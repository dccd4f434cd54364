//! `klpsym check`: what the kernel would do with a livepatch module (see
//! crates/klpsym-livepatch/CLI.md).

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};
use klpsym_livepatch::{
    check_with, errno_name, resolution_cost_with, CheckReport, CheckStatus, CostModel, ExportInfo,
    Fact, LivepatchModule, ObjectState, Preemption, Problem, RelocationReport, ResolutionCost,
    Stage, Target, VerdictKind,
};

use crate::cli::SourceArgs;
use crate::output::{hex, print_json_with, CliError, Outcome};
use crate::sources::{load_all_with, resched};
use crate::targets::{
    btf_path, exported_by, knows_exports, layouts_for, module_tree, offline_tables, rules_for,
    LoaderInputs, TargetArgs,
};

/// `klpsym check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The livepatch module (.ko).
    pub patch: PathBuf,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Place a section of the patch module (`.text=0xffffffffc0a00000`) so PC-relative values
    /// are exact.
    #[arg(long = "section-base", value_name = "NAME=ADDR")]
    pub section_bases: Vec<String>,
    /// Place every section as the kernel did when it loaded this module: its
    /// `/sys/module/<name>/sections` folder (or a copy). With --explain, the bytes of every
    /// relocation are then exact.
    #[arg(long = "sections-from", value_name = "DIR")]
    pub sections_from: Option<PathBuf>,
    /// Print every klp relocation: section, offset, type, symbol, resolved address, bytes.
    #[arg(long)]
    pub explain: bool,
    /// Exit 1 unless everything that decides the load was checked: a deferred object without
    /// its module's .ko, a module-loader check whose target fact is unknown (vermagic, CRCs,
    /// CONFIG_LIVEPATCH; the signature is left out: keyrings are not readable), or a module
    /// that is not a livepatch. For CI.
    #[arg(long)]
    pub strict: bool,
    /// Warn when the kernel would hold a CPU longer than this many milliseconds while it
    /// resolves the patch's symbols (see resolution_cost in --json).
    #[arg(long, value_name = "MS", default_value_t = 100.0)]
    pub hold_warn_ms: f64,
    /// Nanoseconds the target spends per kallsyms entry its lookups visit, for the time
    /// estimates (default: 50, an x86_64 figure not yet calibrated on real hardware).
    #[arg(long, value_name = "NS")]
    pub visit_ns: Option<f64>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// The kernel's resolution cost model for kernel `k`: its preemption and HZ from its config
/// (else what distributions build for its version), the per-entry cost.
fn cost_model(
    args: &CheckArgs,
    rules: &klpsym_livepatch::KernelRules,
    config: Option<&klpsym_loader::KernelConfig>,
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
    let visit_ns = match args.visit_ns {
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
        hold_warn_ms: args.hold_warn_ms,
    }
}

/// Nanoseconds per kallsyms entry: expanding one compressed name and one strcmp().
const DEFAULT_VISIT_NS: f64 = 50.0;

/// `--section-base NAME=ADDR` options as (section index, address).
fn section_bases(
    by_name: &std::collections::HashMap<&str, u32>,
    specs: &[String],
) -> Result<Vec<(u32, u64)>, CliError> {
    specs
        .iter()
        .map(|s| {
            let (name, addr) = s
                .rsplit_once('=')
                .ok_or_else(|| format!("--section-base '{s}': expected NAME=ADDR"))?;
            let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
                .map_err(|_| format!("--section-base '{s}': '{addr}' is not hex"))?;
            let index = by_name.get(name).copied().ok_or_else(|| {
                format!("--section-base '{s}': the module has no section '{name}'")
            })?;
            Ok((index, a))
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct CheckJson {
    patch: String,
    results: Vec<KernelResult>,
}

#[derive(Debug, Serialize)]
struct KernelResult {
    kernel: String,
    /// What was not checked (`--strict` fails on these), in words.
    unchecked: Vec<String>,
    report: CheckReport,
    /// What resolving the patch's symbols costs this kernel (lookups, entries visited, the
    /// longest hold without a reschedule point).
    resolution_cost: ResolutionCost,
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

pub fn run(args: &CheckArgs) -> Result<Outcome, CliError> {
    let mut rs = resched(&args.source);
    let rs = &mut rs;
    let bytes = klpsym_loader::read_bounded(&args.patch, args.source.max_input_size, rs)
        .map_err(|e| format!("PATCH: {e}"))?;
    let btf = btf_path(&args.target, &args.source);
    let layouts = layouts_for(btf.as_ref(), &args.source, rs)?;
    let module = LivepatchModule::parse_with_resched(&bytes, &layouts, rs).map_err(|e| {
        let hint = if args.patch.is_dir() {
            " (PATCH is the module file; a module tree goes to --modules)"
        } else {
            ""
        };
        format!("PATCH {}: {e}{hint}", args.patch.display())
    })?;
    // Section indexes by name, once (a module has dozens to thousands of sections).
    let mut by_name: std::collections::HashMap<&str, u32> =
        std::collections::HashMap::with_capacity(module.elf.sections.len());
    for sec in &module.elf.sections {
        rs.tick()?;
        by_name.entry(sec.name.as_str()).or_insert(sec.index);
    }
    let mut bases: Vec<(u32, u64)> = Vec::new();
    if let Some(dir) = &args.sections_from {
        for (name, addr) in klpsym_loader::read_section_addresses(dir, rs)? {
            let Some(&index) = by_name.get(name.as_str()) else {
                return Err(format!(
                    "--sections-from {}: the kernel placed a section '{name}' that {} does not have: is this the module that was loaded?",
                    dir.display(),
                    args.patch.display()
                )
                .into());
            };
            bases.push((index, addr));
        }
    }
    bases.extend(section_bases(&by_name, &args.section_bases)?);
    let placed = !bases.is_empty();
    let objects: Vec<String> = match &module.patch {
        Ok(p) => p
            .objects
            .iter()
            .map(|o| o.object_name().to_string())
            .collect(),
        Err(_) => Vec::new(),
    };
    // A package's modules are read (the whole package) only when the patch has objects in
    // modules; a vmlinux-only patch needs the image, its config and its export CRCs.
    let needs_modules = objects.is_empty() || objects.iter().any(|o| o != "vmlinux");
    let kernels = load_all_with(&args.source, needs_modules)?;
    let mut results = Vec::new();
    // One check per kernel (the compatibility matrix), all through the user's driver.
    for k in &kernels {
        let mut rules = rules_for(k, args.target.kernel_version.as_deref())?;
        if let Some(b) = &k.facts.version {
            rules = rules.with_banner(b);
        }
        let tree = module_tree(k, &args.source)?;
        let offline = offline_tables(&args.source, tree.as_deref(), &objects, &k.table, rs)?;
        let inputs = LoaderInputs::gather(k, tree.as_deref(), &args.source, &args.target, rs)?;
        let export_info = |n: &str| -> Option<ExportInfo> { inputs.export_info(n) };
        let exported = |n: &str| exported_by(&k.table, n);
        let mut target = Target::new(&k.table, rules, module.arch)
            .with_layouts(layouts)
            .with_loader(inputs.facts(&export_info));
        if knows_exports(&k.table, rs)? {
            target = target.with_exports(&exported);
        }
        for o in &offline {
            target = target
                .with_offline_module(&o.name, &o.table)
                .with_loading_symbols(&o.name, o.loading_symbols);
        }
        for &(i, a) in &bases {
            target = target.with_section_base(i, a);
        }
        let mut report = check_with(&module, &target, rs)?;
        if !args.explain {
            // Every ordinary relocation is listed on request only: a patch has thousands.
            let all = std::mem::take(&mut report.ordinary_relocations);
            bulk::free_with_points(all, rs)?;
        }
        add_candidate_lines(k, &mut report, &args.source)?;
        let model = cost_model(args, &rules, inputs.config());
        let resolution_cost = resolution_cost_with(&module, &target, &model, rs)?;
        results.push(KernelResult {
            kernel: k.path.display().to_string(),
            unchecked: unchecked(&report),
            report,
            resolution_cost,
        });
    }
    let refused = results.iter().any(|r| {
        matches!(
            r.report.verdict.kind,
            VerdictKind::RefusedAtLoad | VerdictKind::RefusedWhenModuleLoads
        )
    });
    let incomplete = results.iter().any(|r| !r.unchecked.is_empty());
    if args.source.json {
        let json = CheckJson {
            patch: args.patch.display().to_string(),
            results,
        };
        print_json_with(&json, rs)?;
        free_results(json.results, rs)?;
    } else {
        for r in &results {
            print_report(r, args.explain, placed, rs)?;
        }
        if results.len() > 1 {
            print_matrix(&results, rs)?;
        }
        free_results(results, rs)?;
    }
    if args.strict && incomplete && !refused {
        eprintln!(
            "klpsym: error: --strict: not everything that decides the load was checked (see above)"
        );
    }
    module.drop_with_points(rs)?;
    bulk::free_with_points(bytes, rs)?;
    let strict_failed = args.strict && incomplete;
    Ok(Outcome::all_ok(!(refused || strict_failed)))
}

/// Frees the reports with reschedule points (a big patch's report is tens of thousands of
/// strings per kernel).
fn free_results(results: Vec<KernelResult>, rs: &mut Resched) -> Result<(), Cancelled> {
    for r in results {
        r.report.drop_with_points(rs)?;
    }
    Ok(())
}

fn stage_label(p: &Problem) -> String {
    let s = match &p.stage {
        Stage::ModuleLoad => "load".to_string(),
        Stage::PatchEnable => "enable".to_string(),
        Stage::ModuleComing { module } => format!("when {module} loads"),
    };
    if p.reached {
        s
    } else {
        format!("{s}, not reached")
    }
}

fn verdict_line(r: &CheckReport) -> String {
    match r.verdict.kind {
        VerdictKind::Accepted if r.verdict.unchecked_modules.is_empty() => "ACCEPTED".into(),
        VerdictKind::Accepted => format!(
            "ACCEPTED (at load; NOT CHECKED for when {} loads)",
            r.verdict.unchecked_modules.join(", ")
        ),
        VerdictKind::RefusedAtLoad => format!(
            "REFUSED AT LOAD ({})",
            r.verdict.errno.map_or("?", errno_name)
        ),
        VerdictKind::RefusedWhenModuleLoads => format!(
            "ACCEPTED, but the kernel will refuse to load: {}",
            r.verdict.refused_modules.join(", ")
        ),
        VerdictKind::OrdinaryModule => format!(
            "NOT A LIVEPATCH: {} has no livepatch tag, klp relocations, klp_patch or klp_enable_patch call; the kernel loads it as an ordinary module",
            r.module
        ),
    }
}

/// The `--explain` lines of relocations: place, type, symbol, then S, A, value and bytes.
fn print_relocations(list: &[RelocationReport], rs: &mut Resched) -> Result<(), Cancelled> {
    for x in list {
        rs.tick()?;
        println!(
            "  {}[{}]  {}+{:#x}  {}  {}",
            x.section, x.index, x.target_section, x.offset, x.type_name, x.symbol
        );
        println!(
            "      S={} A={}  {}  value={}  bytes={}  {}{}",
            match x.resolved {
                None => "?".to_string(),
                Some(a) if x.offline => format!("+{a:#x}"),
                Some(a) => hex(a),
            },
            x.addend,
            x.expression,
            x.value
                .map_or_else(|| "?".to_string(), |v| format!("{v:#x}")),
            x.bytes.as_deref().unwrap_or("?"),
            x.status,
            if x.offline { " (unplaced module)" } else { "" }
        );
        if let Some(n) = &x.note {
            println!("      {n}");
        }
        if x.value.is_none() && x.resolved.is_some() && x.status != "none" {
            println!(
                    "      value ?: {} is PC-relative, so it depends on where the kernel loads {}; give --section-base {}=ADDR",
                    x.type_name, x.target_section, x.target_section
                );
        } else if x.resolved.is_none() && x.note.is_none() {
            println!("      S ?: the symbol was not resolved (see the problems above)");
        }
    }
    Ok(())
}

/// The readable report; `placed`: the user placed sections (ordinary relocations are then
/// listed one by one under --explain).
fn print_report(
    res: &KernelResult,
    explain: bool,
    placed: bool,
    rs: &mut Resched,
) -> Result<(), Cancelled> {
    let r = &res.report;
    println!(
        "{} on {} (rules {}, KSYM_NAME_LEN {}, layouts: {})",
        r.module, res.kernel, r.kernel_version, r.ksym_name_len, r.layouts_source
    );
    println!("{}", verdict_line(r));
    println!("{}", cost_line(&res.resolution_cost));
    if let Some(w) = &res.resolution_cost.warning {
        eprintln!("klpsym: warning: {w}");
    }
    for p in &r.problems {
        rs.tick()?;
        let label = stage_label(p);
        let mut lines = p.log.iter();
        match lines.next() {
            Some(first) => println!("  [{label}] {first}"),
            None => println!(
                "  [{label}] (the kernel fails with {} without a message)",
                p.errno_name
            ),
        }
        for l in lines {
            println!("  {:width$} {l}", "", width = label.len() + 2);
        }
        println!("      {}", p.hint);
        if !p.candidates.is_empty() {
            let files = p.candidates.iter().any(|c| c.file.is_some());
            println!(
                "       POS  ADDRESS             TYPE  OBJECT{}",
                if files { "      FILE" } else { "" }
            );
            for c in &p.candidates {
                println!(
                    "      {:>4}  {:<18}  {:<4}  {}{}",
                    c.position,
                    match c.address {
                        None => "(hidden)".to_string(),
                        Some(a) if c.unplaced => format!("+{a:#x}"),
                        Some(a) => hex(a),
                    },
                    c.kind,
                    if files {
                        format!("{:<10}", c.object)
                    } else {
                        c.object.clone()
                    },
                    match (&c.file, files) {
                        (Some(f), _) => format!(
                            "  {}",
                            crate::commands::file_line_text(f, c.decl_file.as_deref(), c.line)
                        ),
                        (None, true) => "  ?".to_string(),
                        (None, false) => String::new(),
                    }
                );
            }
            if p.candidates.iter().any(|c| c.unplaced) {
                println!("      {}", crate::commands::UNPLACED_NOTE);
            }
        }
    }
    println!("module loader:");
    for c in &r.loader_checks {
        let status = match c.status {
            CheckStatus::Passed => "ok",
            CheckStatus::Failed => "FAILED",
            CheckStatus::NotChecked => "not checked",
            CheckStatus::NotApplicable => "n/a",
            CheckStatus::NotReached => "not reached",
        };
        if c.detail.is_empty() {
            println!("  {:<20} {status}", c.check);
        } else {
            println!("  {:<20} {status:<12} {}", c.check, c.detail);
        }
    }
    if !r.objects.is_empty() {
        println!("objects:");
        for o in &r.objects {
            let state = match o.state {
                ObjectState::Loaded => "loaded",
                ObjectState::DeferredChecked => "deferred, checked",
                ObjectState::DeferredUnchecked => "deferred, UNCHECKED (no .ko under --modules)",
            };
            println!("  {:<12} {state}", o.name);
            // A deferred object is checked on its module's unplaced layout: `+0x...`.
            let unplaced = o.state == ObjectState::DeferredChecked;
            for f in &o.funcs {
                rs.tick()?;
                println!(
                    "      {},{} -> {} ({})",
                    f.old_name.as_deref().unwrap_or("(null)"),
                    f.old_sympos,
                    match f.address {
                        None => "-".to_string(),
                        Some(a) if unplaced => format!("+{a:#x}"),
                        Some(a) => hex(a),
                    },
                    f.new_func.as_deref().unwrap_or("?")
                );
            }
        }
    }
    if matches!(
        r.verdict.kind,
        VerdictKind::Accepted | VerdictKind::RefusedWhenModuleLoads
    ) {
        println!("kernel log (predicted):");
        for l in &r.kernel_log {
            rs.tick()?;
            let when = match &l.stage {
                Stage::ModuleComing { module } => format!("when {module} loads: "),
                _ => String::new(),
            };
            println!("  {when}{}", l.line);
        }
    }
    if explain {
        println!("relocations:");
        print_relocations(&r.relocations, rs)?;
        let ordinary = &r.ordinary_relocations;
        // The loader's checks are a handful: the relocations line says whether one failed.
        let refused = r
            .loader_checks
            .iter()
            .any(|c| c.check == "relocations" && c.status == CheckStatus::Failed);
        if placed || refused || r.verdict.kind == VerdictKind::OrdinaryModule {
            println!("ordinary relocations (apply_relocate_add):");
            print_relocations(ordinary, rs)?;
        } else if !ordinary.is_empty() {
            // Unplaced, they are mostly "?": the count is in the loader check's line.
            println!(
                "ordinary relocations: {} (listed with --section-base or --sections-from, or in --json --explain)",
                ordinary.len()
            );
        }
    }
    for w in &r.warnings {
        rs.tick()?;
        eprintln!("klpsym: warning: {w}");
    }
    for u in &res.unchecked {
        eprintln!("klpsym: warning: NOT CHECKED: {u}");
    }
    Ok(())
}

/// The resolution cost in one line.
fn cost_line(c: &ResolutionCost) -> String {
    format!(
        "resolution: {} lookups, {} kallsyms entries visited, longest unbroken {} ({:?} preemption): ~{:.1} ms CPU, longest hold ~{:.1} ms",
        c.lookups,
        c.symbols_visited,
        c.longest_unbroken_visits,
        c.preemption,
        c.estimated_cpu_ms,
        c.estimated_longest_hold_ms
    )
    .replace("Voluntary", "voluntary")
    .replace("Lazy", "lazy")
    .replace("Full", "full")
    .replace("(None preemption)", "(no preemption)")
}

fn print_matrix(results: &[KernelResult], rs: &mut Resched) -> Result<(), Cancelled> {
    println!("\ncompatibility:");
    let width = results
        .iter()
        .map(|r| r.kernel.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "  {:<width$}  {:<14}  {:>12}  PROBLEMS",
        "KERNEL", "VERDICT", "LONGEST HOLD"
    );
    for r in results {
        let mut kinds: Vec<String> = Vec::new();
        for p in &r.report.problems {
            rs.tick()?;
            if p.reached {
                kinds.push(
                    serde_json::to_value(p.kind)
                        .map(|v| v.as_str().unwrap_or("?").to_string())
                        .unwrap_or_default(),
                );
            }
        }
        if !r.unchecked.is_empty() {
            kinds.push(format!("{} not checked", r.unchecked.len()));
        }
        let verdict = match r.report.verdict.kind {
            VerdictKind::Accepted => "accepted",
            VerdictKind::RefusedAtLoad => "refused",
            VerdictKind::RefusedWhenModuleLoads => "refused later",
            VerdictKind::OrdinaryModule => "not livepatch",
        };
        let cell = if kinds.is_empty() {
            "-".to_string()
        } else {
            kinds.join(",")
        };
        let hold = format!("{:.1} ms", r.resolution_cost.estimated_longest_hold_ms);
        println!("  {:<width$}  {verdict:<14}  {hold:>12}  {cell}", r.kernel);
    }
    Ok(())
}

/// DWARF declaration lines for the vmlinux candidates of ambiguity reports, when `k` is (or
/// has) a vmlinux with debug info: the n-th candidate is the n-th definition of the name.
fn add_candidate_lines(
    k: &klpsym_loader::LoadedKernel,
    report: &mut klpsym_livepatch::CheckReport,
    args: &crate::cli::SourceArgs,
) -> Result<(), CliError> {
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
            .table
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
    let mut rs = crate::sources::resched(args);
    let lines = k.decl_lines(&ids, args.max_input_size, &mut rs)?;
    for ((pi, ci), l) in at.into_iter().zip(lines) {
        if let Some(l) = l {
            let c = &mut report.problems[pi].candidates[ci];
            c.line = Some(l.line);
            c.decl_file = Some(l.file);
        }
    }
    Ok(())
}
