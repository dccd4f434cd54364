//! `klpsym check`: what the kernel would do with a livepatch module (see
//! crates/klpsym-livepatch/CLI.md). Also the target-building helpers `convert` shares.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::SymbolTable;
use klpsym_livepatch::{
    btf, check_with, CheckReport, KernelRules, LivepatchModule, Problem, Stage, StructLayouts,
    Target, VerdictKind,
};
use klpsym_loader::{module_symbols_table, LoadedKernel, ModuleTree};

use crate::cli::SourceArgs;
use crate::output::{hex, print_json_with, CliError, Outcome};
use crate::sources::{load_all, load_options, resched};

/// `klpsym check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The livepatch module (.ko).
    pub patch: PathBuf,
    /// The target's BTF (/sys/kernel/btf/vmlinux or an extracted .BTF section) for the klp
    /// struct layouts; without it, the documented 5.1–6.18 fallback.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The kernel version whose rules apply (`6.1`); default: the source's banner.
    #[arg(long, value_name = "X.Y")]
    pub kernel_version: Option<String>,
    /// Place a section of the patch module (`.text=0xffffffffc0a00000`) so PC-relative values
    /// are exact.
    #[arg(long = "section-base", value_name = "NAME=ADDR")]
    pub section_bases: Vec<String>,
    /// Print every klp relocation: section, offset, type, symbol, resolved address, bytes.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Rules for a loaded kernel: `--kernel-version`, else its banner, else 6.1 with a warning.
pub fn rules_for(k: &LoadedKernel, flag: Option<&str>) -> Result<KernelRules, CliError> {
    if let Some(v) = flag {
        return KernelRules::from_release(v)
            .ok_or_else(|| format!("--kernel-version '{v}': expected X.Y").into());
    }
    let banner = k.facts.version.as_deref().unwrap_or_default();
    let release = banner.strip_prefix("Linux version ").unwrap_or(banner);
    Ok(KernelRules::from_release(release).unwrap_or_else(|| {
        eprintln!(
            "klpsym: warning: {}: kernel version unknown; using 6.1 rules (pass --kernel-version)",
            k.path.display()
        );
        KernelRules::for_version(6, 1)
    }))
}

/// Layouts from `--btf`, or the fallback.
pub fn layouts_for(
    btf_path: Option<&PathBuf>,
    rs: &mut Resched,
) -> Result<StructLayouts, CliError> {
    match btf_path {
        Some(p) => {
            let bytes = klpsym_loader::read_bounded(p, 1 << 30, rs)?;
            let layouts =
                btf::layouts_from_btf(&bytes).map_err(|e| format!("{}: {e}", p.display()))?;
            bulk::free_with_points(bytes, rs)?;
            Ok(layouts)
        }
        None => Ok(StructLayouts::fallback(6, 1)),
    }
}

/// Tables of the patch's objects that are not loaded on `table`, from `--modules DIR`.
pub fn offline_tables(
    source: &SourceArgs,
    names: &[String],
    table: &SymbolTable,
    rs: &mut Resched,
) -> Result<Vec<(String, SymbolTable)>, CliError> {
    let Some(dir) = &source.modules else {
        return Ok(Vec::new());
    };
    let tree = ModuleTree::scan(dir)?;
    let opts = load_options(source);
    let mut out = Vec::new();
    for n in names {
        rs.tick()?;
        if n == "vmlinux" || table.object_by_name(n).is_some() || tree.path(n).is_none() {
            continue;
        }
        let m = tree.load(n, &opts, rs)?;
        out.push((n.clone(), module_symbols_table(&m, None)?));
    }
    Ok(out)
}

/// True when `table` exports `name` (`__ksymtab_<name>` is in kallsyms).
pub fn exported_by(table: &SymbolTable, name: &str) -> bool {
    table.by_name(&format!("__ksymtab_{name}")).next().is_some()
}

/// True when the table carries `__ksymtab_*` symbols (CONFIG_KALLSYMS_ALL), so "not exported"
/// can be told from "unknown". A walk over the table, a tick per symbol.
pub fn knows_exports(table: &SymbolTable, rs: &mut Resched) -> Result<bool, Cancelled> {
    for s in table.iter() {
        rs.tick()?;
        if s.name.starts_with("__ksymtab_") {
            return Ok(true);
        }
    }
    Ok(false)
}

fn section_bases(m: &LivepatchModule<'_>, specs: &[String]) -> Result<Vec<(u32, u64)>, CliError> {
    specs
        .iter()
        .map(|s| {
            let (name, addr) = s
                .split_once('=')
                .ok_or_else(|| format!("--section-base '{s}': expected NAME=ADDR"))?;
            let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
                .map_err(|_| format!("--section-base '{s}': '{addr}' is not hex"))?;
            let sec = m
                .elf
                .section_by_name(name)
                .ok_or_else(|| format!("--section-base: no section '{name}'"))?;
            Ok((sec.index, a))
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
    report: CheckReport,
}

pub fn run(args: &CheckArgs) -> Result<Outcome, CliError> {
    let mut rs = resched(&args.source);
    let rs = &mut rs;
    let bytes = klpsym_loader::read_bounded(&args.patch, args.source.max_input_size, rs)?;
    let layouts = layouts_for(args.btf.as_ref(), rs)?;
    if args.btf.is_none() {
        eprintln!("klpsym: note: no --btf: klp struct layouts from the 5.1-6.18 fallback");
    }
    let module = LivepatchModule::parse_with_resched(&bytes, &layouts, rs)
        .map_err(|e| format!("{}: {e}", args.patch.display()))?;
    let bases = section_bases(&module, &args.section_bases)?;
    let objects: Vec<String> = match &module.patch {
        Ok(p) => p
            .objects
            .iter()
            .map(|o| o.object_name().to_string())
            .collect(),
        Err(_) => Vec::new(),
    };
    let kernels = load_all(&args.source)?;
    let mut results = Vec::new();
    // One check per kernel (the compatibility matrix), all through the user's driver.
    for k in &kernels {
        let rules = rules_for(k, args.kernel_version.as_deref())?;
        let offline = offline_tables(&args.source, &objects, &k.table, rs)?;
        let exported = |n: &str| exported_by(&k.table, n);
        let mut target = Target::new(&k.table, rules, module.arch).with_layouts(layouts);
        if knows_exports(&k.table, rs)? {
            target = target.with_exports(&exported);
        }
        for (n, t) in &offline {
            target = target.with_offline_module(n, t);
        }
        for &(i, a) in &bases {
            target = target.with_section_base(i, a);
        }
        results.push(KernelResult {
            kernel: k.path.display().to_string(),
            report: check_with(&module, &target, rs)?,
        });
    }
    let ok = results
        .iter()
        .all(|r| r.report.verdict.kind == VerdictKind::Accepted);
    if args.source.json {
        let json = CheckJson {
            patch: args.patch.display().to_string(),
            results,
        };
        print_json_with(&json, rs)?;
        free_results(json.results, rs)?;
    } else {
        for r in &results {
            print_report(&r.kernel, &r.report, args.explain, rs)?;
        }
        if results.len() > 1 {
            print_matrix(&results, rs)?;
        }
        free_results(results, rs)?;
    }
    module.drop_with_points(rs)?;
    bulk::free_with_points(bytes, rs)?;
    Ok(Outcome::all_ok(ok))
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

fn print_report(
    kernel: &str,
    r: &CheckReport,
    explain: bool,
    rs: &mut Resched,
) -> Result<(), Cancelled> {
    println!(
        "{} on {kernel} (rules {}, KSYM_NAME_LEN {}, layouts: {})",
        r.module, r.kernel_version, r.ksym_name_len, r.layouts_source
    );
    match r.verdict.kind {
        VerdictKind::Accepted => println!("ACCEPTED"),
        VerdictKind::RefusedAtLoad => println!(
            "REFUSED AT LOAD ({})",
            r.verdict.errno.map_or("?", klpsym_livepatch_errno)
        ),
        VerdictKind::RefusedWhenModuleLoads => {
            println!(
                "ACCEPTED, but the kernel will refuse to load: {}",
                r.verdict.refused_modules.join(", ")
            )
        }
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
            println!("       POS  ADDRESS             TYPE  OBJECT");
            for c in &p.candidates {
                println!(
                    "      {:>4}  {:<18}  {:<4}  {}",
                    c.position,
                    c.address.map_or_else(|| "(hidden)".to_string(), hex),
                    c.kind,
                    c.object
                );
            }
        }
    }
    if !r.objects.is_empty() {
        println!("objects:");
        for o in &r.objects {
            let state = match o.state {
                klpsym_livepatch::ObjectState::Loaded => "loaded",
                klpsym_livepatch::ObjectState::DeferredChecked => "deferred, checked",
                klpsym_livepatch::ObjectState::DeferredUnchecked => {
                    "deferred, UNCHECKED (no .ko under --modules)"
                }
            };
            println!("  {:<12} {state}", o.name);
            for f in &o.funcs {
                rs.tick()?;
                println!(
                    "      {},{} -> {} ({})",
                    f.old_name.as_deref().unwrap_or("(null)"),
                    f.old_sympos,
                    f.address.map_or_else(|| "-".to_string(), hex),
                    f.new_func.as_deref().unwrap_or("?")
                );
            }
        }
    }
    if explain {
        println!("relocations:");
        for x in &r.relocations {
            rs.tick()?;
            println!(
                "  {}[{}]  {}+{:#x}  {}  {}",
                x.section, x.index, x.target_section, x.offset, x.type_name, x.symbol
            );
            println!(
                "      S={} A={}  {}  value={}  bytes={}  {}{}",
                x.resolved.map_or_else(|| "?".to_string(), hex),
                x.addend,
                x.expression,
                x.value
                    .map_or_else(|| "?".to_string(), |v| format!("{v:#x}")),
                x.bytes.as_deref().unwrap_or("?"),
                x.status,
                if x.offline { " (offline layout)" } else { "" }
            );
            if let Some(n) = &x.note {
                println!("      {n}");
            }
        }
    }
    for w in &r.warnings {
        rs.tick()?;
        eprintln!("klpsym: warning: {w}");
    }
    Ok(())
}

fn klpsym_livepatch_errno(e: i32) -> &'static str {
    match e {
        2 => "ENOENT",
        8 => "ENOEXEC",
        17 => "EEXIST",
        22 => "EINVAL",
        _ => "?",
    }
}

fn print_matrix(results: &[KernelResult], rs: &mut Resched) -> Result<(), Cancelled> {
    println!("\ncompatibility:");
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
        let cell = if kinds.is_empty() {
            "ok".to_string()
        } else {
            kinds.join(",")
        };
        println!("  {:<40} {cell}", r.kernel);
    }
    Ok(())
}
