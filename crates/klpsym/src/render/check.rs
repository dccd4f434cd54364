//! A patch checked: the readable report of one kernel and the matrix of many.

use std::io::Write;

use klpsym_core::{hex, hex_bytes, Resched};
use klpsym_livepatch::{
    errno_name, CheckReport, CheckStatus, LoaderCheckKind, ObjectState, PatchVerdictKind, Problem,
    RelocationReport, RelocationStatus, ResolutionCost, Stage, PLACEMENT_HINT,
};

use super::names::UNPLACED_NOTE;
use super::Result;
use crate::binding::{AsBuilt, BindingSource, ModuleAsBuilt};
use crate::check::{CheckRun, KernelCheck};

/// The verdict as the report's second line says it.
pub fn verdict_line(c: &KernelCheck) -> String {
    let r = &c.report;
    match r.verdict.kind {
        PatchVerdictKind::Accepted => "ACCEPTED".into(),
        PatchVerdictKind::Unverified => format!(
            "UNVERIFIED: accepted as far as checked; NOT CHECKED: {}",
            c.unchecked_summary().join("; ")
        ),
        PatchVerdictKind::BindsAnotherDefinition => {
            let modules: Vec<&str> = c
                .modules
                .iter()
                .filter(|m| m.differs())
                .map(|m| m.object.as_str())
                .collect();
            let mut why = Vec::new();
            let n = c.misbindings().count();
            if n > 0 {
                why.push(format!("{n} symbol(s) bind another definition than on the kernel it was built for"));
            }
            if !modules.is_empty() {
                why.push(format!("its module object(s) {} are another build than the one it was made for", modules.join(", ")));
            }
            format!("BINDS ANOTHER DEFINITION: the kernel accepts the patch, and {}", why.join("; "))
        }
        PatchVerdictKind::PartialCoverage => super::copies::partial_coverage_line(c),
        PatchVerdictKind::RefusedAtLoad => format!(
            "REFUSED AT LOAD ({})",
            r.verdict.errno.map_or("?", errno_name)
        ),
        PatchVerdictKind::RefusedWhenModuleLoads => format!(
            "ACCEPTED, but the kernel will refuse to load: {}",
            r.verdict.refused_modules.join(", ")
        ),
        PatchVerdictKind::OrdinaryModule => format!(
            "NOT A LIVEPATCH: {} has no livepatch tag, klp relocations, klp_patch or klp_enable_patch call; the kernel loads it as an ordinary module",
            r.module
        ),
        // A verdict this renderer does not know yet: its JSON name.
        other => format!("{other:?}").to_uppercase(),
    }
}

/// The readable report of one kernel; `explain`: every klp relocation, and the ordinary ones
/// when `placed` (sections were placed) or they decide the verdict.
pub fn check_report(
    out: &mut dyn Write,
    c: &KernelCheck,
    explain: bool,
    placed: bool,
    rs: &mut Resched,
) -> Result {
    let r = &c.report;
    writeln!(
        out,
        "{} on {} (rules {}, KSYM_NAME_LEN {}, layouts: {})",
        r.module, c.kernel, r.kernel_version, r.ksym_name_len, r.layouts_source
    )?;
    writeln!(out, "{}", verdict_line(c))?;
    writeln!(out, "{}", cost_line(&c.resolution_cost))?;
    for p in &r.problems {
        rs.tick()?;
        problem(out, p)?;
    }
    loader_checks(out, r)?;
    bindings(out, c, rs)?;
    super::copies::coverage(out, c, rs)?;
    modules(out, c)?;
    objects(out, c, rs)?;
    if matches!(
        r.verdict.kind,
        PatchVerdictKind::Accepted
            | PatchVerdictKind::Unverified
            | PatchVerdictKind::BindsAnotherDefinition
            | PatchVerdictKind::PartialCoverage
            | PatchVerdictKind::RefusedWhenModuleLoads
    ) {
        writeln!(out, "kernel log (predicted):")?;
        for l in &r.kernel_log {
            rs.tick()?;
            let when = match &l.stage {
                Stage::ModuleComing { module } => format!("when {module} loads: "),
                _ => String::new(),
            };
            writeln!(out, "  {when}{}", l.line)?;
        }
    }
    if explain {
        explained_relocations(out, r, placed, rs)?;
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

/// One problem: its stage, the kernel's lines, the hint, the definitions to choose from.
fn problem(out: &mut dyn Write, p: &Problem) -> Result {
    let label = stage_label(p);
    let mut lines = p.log.iter();
    match lines.next() {
        Some(first) => writeln!(out, "  [{label}] {first}")?,
        None => writeln!(
            out,
            "  [{label}] (the kernel fails with {} without a message)",
            p.errno_name
        )?,
    }
    for l in lines {
        writeln!(out, "  {:width$} {l}", "", width = label.len() + 2)?;
    }
    writeln!(out, "      {}", p.hint)?;
    if p.candidates.is_empty() {
        return Ok(());
    }
    let files = p.candidates.iter().any(|c| c.file.is_some());
    writeln!(
        out,
        "       POS  ADDRESS             TYPE  OBJECT{}",
        if files { "      FILE" } else { "" }
    )?;
    for c in &p.candidates {
        writeln!(
            out,
            "      {:>4}  {:<18}  {:<4}  {}{}",
            c.position,
            c.address_text(),
            c.kind,
            if files {
                format!("{:<10}", c.object)
            } else {
                c.object.clone()
            },
            match (c.file_text(), files) {
                (Some(f), _) => format!("  {f}"),
                (None, true) => "  ?".to_string(),
                (None, false) => String::new(),
            }
        )?;
    }
    if p.candidates.iter().any(|c| c.unplaced) {
        writeln!(out, "      {UNPLACED_NOTE}")?;
    }
    Ok(())
}

fn loader_checks(out: &mut dyn Write, r: &CheckReport) -> Result {
    writeln!(out, "module loader:")?;
    for c in &r.loader_checks {
        let status = match c.status {
            CheckStatus::Passed => "ok",
            CheckStatus::Failed => "FAILED",
            CheckStatus::NotChecked => "not checked",
            CheckStatus::NotApplicable => "n/a",
            CheckStatus::NotReached => "not reached",
        };
        if c.detail.is_empty() {
            writeln!(out, "  {:<20} {status}", c.check)?;
        } else {
            // The library says what places the sections; the command's flags are named here.
            let detail = c.detail.replace(
                PLACEMENT_HINT,
                &format!("{PLACEMENT_HINT}: --section-base or --sections-from"),
            );
            writeln!(out, "  {:<20} {status:<12} {detail}", c.check)?;
        }
    }
    Ok(())
}

/// The definition each symbol binds, with its identity and how it compares with the built-for
/// kernel: shown when something is known of it (a source file here, or a built-for kernel).
fn bindings(out: &mut dyn Write, c: &KernelCheck, rs: &mut Resched) -> Result {
    let b = &c.bindings;
    // What was assumed (the kernel itself taken as the built-for one by its release), said
    // once; the command names its option.
    let assumed = b.iter().find_map(|x| match &x.as_built {
        Some(AsBuilt::Assumed { why }) => Some(format!("{why}: --built-for KERNEL")),
        _ => None,
    });
    // Nothing more to tell: no source file known and nothing other than "as built" or
    // assumed.
    if b.iter().all(|x| {
        x.identity.is_none()
            && matches!(
                x.as_built,
                None | Some(AsBuilt::Same) | Some(AsBuilt::Assumed { .. })
            )
    }) {
        if let Some(why) = assumed {
            writeln!(out, "bindings: {why}")?;
        }
        return Ok(());
    }
    writeln!(out, "bindings (the definition each symbol binds; identity: its source file, and which copy in it):")?;
    for x in b {
        rs.tick()?;
        let what = match x.source {
            BindingSource::Function => "function",
            BindingSource::Relocation => "relocation",
        };
        let bound = match &x.bound {
            Some(d) => format!(
                "{} (position {} of {})",
                d.address_text(),
                d.position,
                x.definitions
            ),
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
            Some(AsBuilt::Assumed { .. }) => "  assumed from vermagic".to_string(),
        };
        writeln!(
            out,
            "  {what:<10} {}:{},{} -> {bound}, {identity}{compared}",
            x.object, x.name, x.sympos
        )?;
    }
    if let Some(why) = assumed {
        writeln!(out, "  ({why})")?;
    }
    Ok(())
}

/// Each module object's build here against the built-for kernel's.
fn modules(out: &mut dyn Write, c: &KernelCheck) -> Result {
    if c.modules.is_empty() {
        return Ok(());
    }
    writeln!(out, "modules (the build each module object patches, against the kernel the patch was built for):")?;
    for m in &c.modules {
        let what = match &m.as_built {
            ModuleAsBuilt::Same => "as built".to_string(),
            ModuleAsBuilt::Differs { why } => format!("ANOTHER BUILD: {why}"),
            ModuleAsBuilt::Unproven { why } => format!("not proven: {why}"),
        };
        let file = m
            .here
            .as_ref()
            .and_then(|h| h.file.clone())
            .unwrap_or_else(|| "(no .ko)".to_string());
        writeln!(out, "  {:<16} {file}  {what}", m.object)?;
    }
    Ok(())
}

fn objects(out: &mut dyn Write, c: &KernelCheck, rs: &mut Resched) -> Result {
    let r = &c.report;
    if r.objects.is_empty() {
        return Ok(());
    }
    if c.resolution_cost.is_reached() {
        writeln!(out, "objects:")?;
    } else {
        // The kernel never gets to its lookups: what they would find, not a verdict.
        writeln!(out, "objects (not reached: what the lookups would find):")?;
    }
    for o in &r.objects {
        let state = match o.state {
            ObjectState::Loaded => "loaded",
            ObjectState::DeferredChecked => "deferred, checked",
            ObjectState::DeferredUnchecked => "deferred, UNCHECKED (no .ko under --modules)",
        };
        writeln!(out, "  {:<12} {state}", o.name)?;
        // A deferred object is checked on its module's unplaced layout: `+0x...`.
        let unplaced = o.state == ObjectState::DeferredChecked;
        for f in &o.funcs {
            rs.tick()?;
            writeln!(
                out,
                "      {},{} -> {} ({})",
                f.old_name.as_deref().unwrap_or("(null)"),
                f.old_sympos,
                match f.address {
                    None => "-".to_string(),
                    Some(a) if unplaced => format!("+{a:#x}"),
                    Some(a) => hex(a),
                },
                f.new_func.as_deref().unwrap_or("?")
            )?;
        }
    }
    Ok(())
}

fn explained_relocations(
    out: &mut dyn Write,
    r: &CheckReport,
    placed: bool,
    rs: &mut Resched,
) -> Result {
    writeln!(out, "relocations:")?;
    relocations(out, &r.relocations, rs)?;
    let ordinary = &r.ordinary_relocations;
    // The loader's checks are a handful: the relocations line says whether one failed.
    let refused = r
        .loader_checks
        .iter()
        .any(|c| c.check == LoaderCheckKind::Relocations && c.status == CheckStatus::Failed);
    if placed || refused || r.verdict.kind == PatchVerdictKind::OrdinaryModule {
        writeln!(out, "ordinary relocations (apply_relocate_add):")?;
        relocations(out, ordinary, rs)?;
    } else if !ordinary.is_empty() {
        // Unplaced, they are mostly "?": the count is in the loader check's line.
        writeln!(
            out,
            "ordinary relocations: {} (listed with --section-base or --sections-from, or in --json --explain)",
            ordinary.len()
        )?;
    }
    Ok(())
}

/// The `--explain` lines of relocations: place, type, symbol, then S, A, value and bytes.
fn relocations(out: &mut dyn Write, list: &[RelocationReport], rs: &mut Resched) -> Result {
    for x in list {
        rs.tick()?;
        writeln!(
            out,
            "  {}[{}]  {}+{:#x}  {}  {}",
            x.section, x.index, x.target_section, x.offset, x.type_name, x.symbol
        )?;
        writeln!(
            out,
            "      S={} A={}  {}  value={}  bytes={}  {}{}",
            match x.resolved {
                None => "?".to_string(),
                Some(a) if x.unplaced => format!("+{a:#x}"),
                Some(a) => hex(a),
            },
            x.addend,
            x.expression,
            x.value
                .map_or_else(|| "?".to_string(), |v| format!("{v:#x}")),
            x.bytes
                .as_deref()
                .map_or_else(|| "?".to_string(), hex_bytes),
            x.status,
            if x.unplaced { " (unplaced module)" } else { "" }
        )?;
        if let Some(n) = &x.note {
            writeln!(out, "      {n}")?;
        }
        if x.value.is_none() && x.resolved.is_some() && x.status != RelocationStatus::None {
            writeln!(
                out,
                "      value ?: {} is PC-relative, so it depends on where the kernel loads {}; give --section-base {}=ADDR",
                x.type_name, x.target_section, x.target_section
            )?;
        } else if x.resolved.is_none() && x.note.is_none() {
            writeln!(
                out,
                "      S ?: the symbol was not resolved (see the problems above)"
            )?;
        }
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

/// The compatibility matrix of a run over several kernels: a row per kernel checked or
/// failed.
pub fn matrix(out: &mut dyn Write, run: &CheckRun, rs: &mut Resched) -> Result {
    writeln!(out, "\ncompatibility:")?;
    let width = run
        .results
        .iter()
        .map(|r| r.kernel.chars().count())
        .chain(run.failed.iter().map(|f| f.kernel.chars().count()))
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        out,
        "  {:<width$}  {:<14}  {:>12}  PROBLEMS",
        "KERNEL", "VERDICT", "LONGEST HOLD"
    )?;
    for r in &run.results {
        rs.tick()?;
        let kinds = r.problem_summary();
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
        writeln!(
            out,
            "  {:<width$}  {:<14}  {hold:>12}  {cell}",
            r.kernel,
            matrix_verdict(r.report.verdict.kind)
        )?;
    }
    for f in &run.failed {
        writeln!(
            out,
            "  {:<width$}  {:<14}  {:>12}  {}",
            f.kernel, "error", "-", f.error
        )?;
    }
    Ok(())
}

fn matrix_verdict(kind: PatchVerdictKind) -> &'static str {
    match kind {
        PatchVerdictKind::Accepted => "accepted",
        PatchVerdictKind::Unverified => "unverified",
        // Loads, but patches another function than the one it was built for.
        PatchVerdictKind::BindsAnotherDefinition => "WRONG BINDING",
        // Loads, and some copy of a replaced function keeps the old code.
        PatchVerdictKind::PartialCoverage => "PARTIAL",
        PatchVerdictKind::RefusedAtLoad => "refused",
        PatchVerdictKind::RefusedWhenModuleLoads => "refused later",
        PatchVerdictKind::OrdinaryModule => "not livepatch",
        _ => "?",
    }
}
