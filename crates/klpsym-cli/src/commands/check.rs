//! `klpsym check`: what the kernel would do with a livepatch module (see
//! crates/klpsym-livepatch/CLI.md).

use serde::Serialize;

use klpsym::Cancelled;
use klpsym::{
    errno_name, hex, AsBuilt, BindingSource, CheckReport, CheckRun, CheckStatus, KernelCheck,
    ObjectState, Patch, Problem, Queries, RelocationReport, ResolutionCost, Stage, VerdictKind,
};

use crate::cli::CheckArgs;
use crate::options::{open_kernels_each, print_notes};
use crate::output::{print_json_with, CliError, Outcome};
use klpsym::Resched;

#[derive(Debug, Serialize)]
struct CheckJson<'a> {
    patch: &'a str,
    results: &'a [KernelCheck],
    failed: &'a [klpsym::KernelFailure],
}

pub fn run(args: &CheckArgs) -> Result<Outcome, CliError> {
    let mut opts = args.source.options(Queries::Names);
    // No source file decides a load: a debug package beside the image is passed over.
    opts.debug_packages = false;
    let copts = klpsym::CheckOptions {
        target: args.target.options(),
        section_bases: args.section_bases.clone(),
        sections_from: args.sections_from.clone(),
        explain: args.explain,
        hold_warn_ms: args.hold_warn_ms,
        visit_ns: args.visit_ns,
        built_for: args.built_for.clone(),
        force: args.force,
    };
    let patch = Patch::read(&args.patch, &opts)?;
    // A package's modules are read (the whole package) only when the patch has objects in
    // modules; a vmlinux-only patch needs the image, its config and its export CRCs.
    opts.package_modules = patch.needs_modules();
    opts.package_module_names = patch.module_objects();
    if args.jsonl || args.shard.is_some() {
        return run_fleet(args, &patch, &opts, &copts);
    }
    // A kernel that cannot be opened or checked gets its own row (exit 2 at the end); the
    // others still get their verdicts.
    let (kernels, unopened) = open_kernels_each(&args.source, &opts)?;
    let refs: Vec<&klpsym::Kernel> = kernels.iter().collect();
    let mut run = klpsym::check(&patch, &refs, &copts)?;
    run.failed.splice(0..0, unopened);
    if !run.failed.is_empty() {
        crate::output::some_input_failed();
    }
    let mut rs = opts.resched();
    let rs = &mut rs;
    // Each kernel's error on stderr, also under --json (where "failed" carries it too).
    for f in &run.failed {
        eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
    }
    let refused = run.refused();
    let incomplete = run.incomplete();
    if args.source.json {
        for r in &run.results {
            print_notes(&r.notes);
        }
        print_json_with(
            &CheckJson {
                patch: &run.patch,
                results: &run.results,
                failed: &run.failed,
            },
            rs,
        )?;
    } else {
        for r in &run.results {
            print_notes(&r.notes);
            print_report(r, args.explain, run.placed, rs)?;
        }
        if run.results.len() + run.failed.len() > 1 {
            print_matrix(&run, rs)?;
        }
    }
    if args.strict && incomplete && !refused {
        eprintln!(
            "klpsym: error: --strict: not everything that decides the load was checked (see above)"
        );
    }
    let misbinds = run.binds_another();
    run.free(rs)?;
    let strict_failed = args.strict && incomplete;
    Ok(Outcome::all_ok(!(refused || misbinds || strict_failed)))
}

/// One line of `--jsonl`: a kernel's result or its failure, with the patch.
#[derive(Serialize)]
struct FleetLine<'a, T: Serialize> {
    patch: &'a str,
    #[serde(flatten)]
    line: &'a T,
}

/// `check --jsonl` / `--shard`: the kernels one at a time (`--jobs N`: N at a time), each
/// line printed when its kernel is checked; exit as for the matrix (1 refused or binding
/// another definition, 2 when a kernel could not be read or checked).
fn run_fleet(
    args: &CheckArgs,
    patch: &Patch,
    opts: &klpsym::Options,
    copts: &klpsym::CheckOptions,
) -> Result<Outcome, CliError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let shard: klpsym::Shard = match &args.shard {
        Some(s) => s.parse()?,
        None => klpsym::Shard::ALL,
    };
    if args.source.kernels.is_empty() {
        return Err(klpsym::Error::usage(
            "--jsonl and --shard check the kernels given with --kernel (files, folders); none was given",
        )
        .into());
    }
    let units = shard.take(klpsym::kernel_units(&args.source.kernels)?);
    let next = AtomicUsize::new(0);
    let (refused, misbinds, incomplete) = (
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    );
    let fatal: std::sync::Mutex<Option<CliError>> = std::sync::Mutex::new(None);
    let worker = || {
        while fatal.lock().is_ok_and(|f| f.is_none()) {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let Some(unit) = units.get(n) else { break };
            match fleet_unit(args, patch, opts, copts, unit, (n, units.len())) {
                Ok((r, m, i)) => {
                    refused.fetch_or(r, Ordering::Relaxed);
                    misbinds.fetch_or(m, Ordering::Relaxed);
                    incomplete.fetch_or(i, Ordering::Relaxed);
                }
                Err(e) => {
                    if let Ok(mut f) = fatal.lock() {
                        f.get_or_insert(e);
                    }
                }
            }
        }
    };
    let jobs = args.jobs.clamp(1, units.len().max(1));
    std::thread::scope(|s| {
        for _ in 1..jobs {
            s.spawn(worker);
        }
        worker();
    });
    if let Some(e) = fatal.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let (refused, misbinds, incomplete) = (
        refused.into_inner(),
        misbinds.into_inner(),
        incomplete.into_inner(),
    );
    if args.strict && incomplete && !refused {
        eprintln!(
            "klpsym: error: --strict: not everything that decides the load was checked (see above)"
        );
    }
    Ok(Outcome::all_ok(
        !(refused || misbinds || (args.strict && incomplete)),
    ))
}

/// One unit of a fleet: opened, checked, printed (a line per kernel, written whole) and freed.
/// Gives (refused, binds another, incomplete).
fn fleet_unit(
    args: &CheckArgs,
    patch: &Patch,
    opts: &klpsym::Options,
    copts: &klpsym::CheckOptions,
    unit: &klpsym::KernelUnit,
    (n, total): (usize, usize),
) -> Result<(bool, bool, bool), CliError> {
    use std::io::{IsTerminal, Write};
    let patch_name = args.patch.display().to_string();
    let print = |v: &dyn erased_line::Line| -> Result<(), CliError> {
        let mut line = Vec::new();
        v.write(&mut line)?;
        let mut out = std::io::stdout().lock();
        out.write_all(&line)?;
        out.flush()?;
        Ok(())
    };
    if std::io::stderr().is_terminal() {
        eprintln!("klpsym: [{}/{total}] {}", n + 1, unit.label());
    }
    let mut rs = opts.resched();
    let mut sa = args.source.clone();
    sa.kernels = unit.sources.clone();
    let (kernels, unopened) = match open_kernels_each(&sa, opts) {
        Ok(k) => k,
        Err(e) => {
            if e.downcast_ref::<klpsym::Error>()
                .is_some_and(klpsym::Error::is_cancelled)
            {
                return Err(e);
            }
            crate::output::some_input_failed();
            // The error names the file already when it is about that file.
            let (label, error) = (unit.label(), e.to_string());
            let error = error
                .strip_prefix(&format!("{label}: "))
                .map_or(error.clone(), str::to_string);
            let f = klpsym::KernelFailure {
                kernel: label,
                error,
            };
            eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
            print(&FleetLine {
                patch: &patch_name,
                line: &f,
            })?;
            return Ok((false, false, false));
        }
    };
    let refs: Vec<&klpsym::Kernel> = kernels.iter().collect();
    let mut run = klpsym::check(patch, &refs, copts)?;
    run.failed.splice(0..0, unopened);
    if !run.failed.is_empty() {
        crate::output::some_input_failed();
    }
    for r in &run.results {
        print_notes(&r.notes);
        print(&FleetLine {
            patch: &patch_name,
            line: r,
        })?;
    }
    for f in &run.failed {
        eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
        print(&FleetLine {
            patch: &patch_name,
            line: f,
        })?;
    }
    let flags = (run.refused(), run.binds_another(), run.incomplete());
    // Freed before the next kernel opens: memory is one kernel's (per job).
    run.free(&mut rs)?;
    drop(refs);
    for k in kernels {
        k.free(&mut rs)?;
    }
    Ok(flags)
}

/// A JSON line of any serializable type, written whole.
mod erased_line {
    pub trait Line {
        fn write(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    }
    impl<T: serde::Serialize> Line for T {
        fn write(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
            serde_json::to_writer(&mut *out, self)?;
            writeln!(out)
        }
    }
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
    res: &KernelCheck,
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
                            klpsym::file_line_text(f, c.decl_file.as_deref(), c.line)
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
    print_bindings(res, rs)?;
    if !r.objects.is_empty() {
        if res.resolution_cost.is_reached() {
            println!("objects:");
        } else {
            // The kernel never gets to its lookups: what they would find, not a verdict.
            println!("objects (not reached: what the lookups would find):");
        }
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

/// The definition each symbol binds, with its identity and how it compares with the built-for
/// kernel: shown when something is known of it (a source file here, or a built-for kernel).
fn print_bindings(res: &KernelCheck, rs: &mut Resched) -> Result<(), Cancelled> {
    let b = &res.bindings;
    // Nothing to tell: no source file known and nothing other than "as built" (which one
    // build's table against itself always is).
    if b.iter()
        .all(|x| x.identity.is_none() && matches!(x.as_built, None | Some(AsBuilt::Same)))
    {
        return Ok(());
    }
    println!("bindings (the definition each symbol binds; identity: its source file, and which copy in it):");
    for x in b {
        rs.tick()?;
        let what = match x.source {
            BindingSource::Function => "function",
            BindingSource::Relocation => "relocation",
        };
        let bound = match &x.bound {
            Some(c) => format!("{} (position {} of {})", c.text, c.position, x.definitions),
            None => format!("none ({} definitions)", x.definitions),
        };
        let identity = x
            .identity
            .as_ref()
            .map_or("no source file known".to_string(), |i| i.to_string());
        let compared = match &x.as_built {
            None => String::new(),
            Some(AsBuilt::Same) => "  as built".to_string(),
            Some(AsBuilt::Moved {
                built_for,
                intended_position,
            }) => format!(
                "  BINDS ANOTHER DEFINITION: built for {built_for}, which is position {intended_position} here"
            ),
            Some(AsBuilt::Gone { built_for }) => format!(
                "  BINDS ANOTHER DEFINITION: built for {built_for}, which this kernel does not have"
            ),
            Some(AsBuilt::Unproven { why }) => format!("  not proven: {why}"),
        };
        println!(
            "  {what:<10} {}:{},{} -> {bound}, {identity}{compared}",
            x.object, x.name, x.sympos
        );
    }
    Ok(())
}

/// The resolution cost in one line.
fn cost_line(c: &ResolutionCost) -> String {
    if !c.is_reached() {
        return "resolution: none: the module loader refuses the module before the first lookup"
            .to_string();
    }
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

fn print_matrix(run: &CheckRun, rs: &mut Resched) -> Result<(), Cancelled> {
    let results = &run.results;
    println!("\ncompatibility:");
    let width = results
        .iter()
        .map(|r| r.kernel.chars().count())
        .chain(run.failed.iter().map(|f| f.kernel.chars().count()))
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
        if r.binds_another() {
            kinds.push("binds_another_definition".to_string());
        }
        if !r.unchecked.is_empty() {
            kinds.push(format!("{} not checked", r.unchecked.len()));
        }
        let verdict = match r.report.verdict.kind {
            // Loads, but patches another function than the one it was built for.
            VerdictKind::Accepted if r.binds_another() => "WRONG BINDING",
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
        let hold = if r.resolution_cost.is_reached() {
            format!("{:.1} ms", r.resolution_cost.estimated_longest_hold_ms)
        } else {
            // Refused before any lookup: no cost to show.
            "-".to_string()
        };
        println!("  {:<width$}  {verdict:<14}  {hold:>12}  {cell}", r.kernel);
    }
    for f in &run.failed {
        println!(
            "  {:<width$}  {:<14}  {:>12}  {}",
            f.kernel, "error", "-", f.error
        );
    }
    Ok(())
}
