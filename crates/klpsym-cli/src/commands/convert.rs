//! `klpsym convert`: an ordinary module → a livepatch module with klp relocations (see
//! crates/klpsym-livepatch/CLI.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};
use klpsym_livepatch::{
    convert_with, ConvertError, ConvertReport, LivepatchModule, Pin, StructLayouts, Target,
};
use klpsym_loader::{read_bounded, write_atomically_with};

use crate::cli::SourceArgs;
use crate::output::{hex, print_json_with, CliError, Outcome};
use crate::sources::{load_all_with, load_options, resched};
use crate::targets::{exported_by, module_tree, offline_tables, rules_for, TargetArgs};

/// `klpsym convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The module to convert (never modified).
    pub input: PathBuf,
    /// Where to write the converted module (through a temporary file renamed into place).
    #[arg(long, short = 'o', value_name = "OUT.ko")]
    pub output: PathBuf,
    /// Choose a definition: `[OBJ:]NAME=POS` (POS 1-based; 0 = must be unique), or
    /// `[OBJ:]NAME@PATH` for the definition in that source file (`init_once@fs/inode.c`,
    /// matched on a path suffix; needs a --kernel with FILE entries: a vmlinux with .symtab,
    /// e.g. the -dbg package's). Repeatable.
    #[arg(long = "pin", value_name = "[OBJ:]NAME=POS|NAME@PATH")]
    pub pins: Vec<String>,
    /// A file of pins, one per line; `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    pub pins_file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Serialize)]
struct ConvertJson<'a> {
    output: String,
    #[serde(flatten)]
    report: &'a ConvertReport,
}

#[derive(Debug, Serialize)]
struct RefusedJson<'a> {
    error: &'static str,
    problems: &'a [String],
}

/// The lines of a text file read through the bounded reader, a tick per line; a line that is
/// not UTF-8 is an error naming it. `start` learns the number of lines first (counted in
/// steps), to size `out`, which `f` fills.
fn for_each_line<T>(
    path: &Path,
    limit: u64,
    rs: &mut Resched,
    out: &mut T,
    start: impl FnOnce(&mut T, usize),
    mut f: impl FnMut(&mut T, usize, &str) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let bytes = read_bounded(path, limit, rs)?;
    let mut lines = 1;
    for c in bytes.chunks(64 << 10) {
        lines += c.iter().filter(|&&b| b == b'\n').count();
        rs.tick_step()?;
    }
    start(out, lines);
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        rs.tick()?;
        let line = std::str::from_utf8(line)
            .map_err(|e| format!("{}:{}: not UTF-8: {e}", path.display(), i + 1))?;
        f(out, i, line.strip_suffix('\r').unwrap_or(line))?;
    }
    bulk::free_with_points(bytes, rs)?;
    Ok(())
}

fn read_pins(args: &ConvertArgs, rs: &mut Resched) -> Result<Vec<Pin>, CliError> {
    let mut pins: Vec<Pin> = args
        .pins
        .iter()
        .map(|p| Pin::parse(p))
        .collect::<Result<_, _>>()?;
    if let Some(f) = &args.pins_file {
        let limit = args.source.max_input_size;
        let parse = |pins: &mut Vec<Pin>, i: usize, line: &str| -> Result<(), CliError> {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                pins.push(Pin::parse(line).map_err(|e| format!("{}:{}: {e}", f.display(), i + 1))?);
            }
            Ok(())
        };
        for_each_line(f, limit, rs, &mut pins, |_, _| {}, parse)?;
    }
    Ok(pins)
}

/// Writes `bytes` in 64 KiB writes with a step between them.
fn write_in_steps(w: &mut dyn Write, bytes: &[u8], rs: &mut Resched) -> std::io::Result<()> {
    for c in bytes.chunks(64 << 10) {
        w.write_all(c)?;
        rs.tick_step()
            .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

pub fn run(args: &ConvertArgs) -> Result<Outcome, CliError> {
    if same_file(&args.input, &args.output) {
        return Err("the output path is the input: convert never modifies its input".into());
    }
    let mut rs = resched(&args.source);
    let rs = &mut rs;
    let bytes = read_bounded(&args.input, args.source.max_input_size, rs)?;
    let pins = read_pins(args, rs)?;
    let symvers = match &args.target.symvers {
        Some(p) => {
            klpsym_loader::read_symvers_with(p, &load_options(&args.source), rs)
                .map_err(|e| format!("--symvers: {e}"))?
                .symbols
        }
        None => Default::default(),
    };
    let kernels = load_all_with(&args.source, true)?;
    let [k] = kernels.as_slice() else {
        return Err("convert needs exactly one --kernel (the target)".into());
    };
    let rules = rules_for(k, args.target.kernel_version.as_deref())?;
    // Objects named by pins may be modules that are not loaded: offer their .ko.
    let mut names: Vec<String> = pins.iter().filter_map(|p| p.object.clone()).collect();
    let module = LivepatchModule::parse_with_resched(&bytes, &StructLayouts::fallback(6, 1), rs)
        .map_err(|e| format!("{}: {e}", args.input.display()))?;
    if let Ok(p) = &module.patch {
        names.extend(p.objects.iter().map(|o| o.object_name().to_string()));
    }
    let arch = module.arch;
    module.drop_with_points(rs)?;
    let tree = module_tree(k, &args.source)?;
    let offline = offline_tables(&args.source, tree.as_deref(), &names, &k.table, rs)?;
    let mut target = Target::new(&k.table, rules, arch);
    for o in &offline {
        target = target
            .with_offline_module(&o.name, &o.table)
            .with_loading_symbols(&o.name, o.loading_symbols);
    }
    let exported = |n: &str| symvers.contains_key(n) || exported_by(&k.table, n);
    let result = convert_with(&bytes, &target, &pins, &exported, rs);
    match result {
        Ok((out, report)) => {
            // The output keeps the input's mode (a module is often 0644, tempfiles are 0600).
            let mode = std::fs::metadata(&args.input).ok().map(|m| m.permissions());
            write_atomically_with(&args.output, mode, |w| write_in_steps(w, &out, rs))?;
            bulk::free_with_points(out, rs)?;
            for w in &report.warnings {
                rs.tick()?;
                eprintln!("klpsym: warning: {w}");
            }
            if args.source.json {
                print_json_with(
                    &ConvertJson {
                        output: args.output.display().to_string(),
                        report: &report,
                    },
                    rs,
                )?;
            } else {
                print_report(&report, &args.output, rs)?;
            }
            report.drop_with_points(rs)?;
            drop(symvers);
            bulk::free_with_points(bytes, rs)?;
            Ok(Outcome::Ok)
        }
        Err(ConvertError::Refused(problems)) => {
            if args.source.json {
                print_json_with(
                    &RefusedJson {
                        error: "refused",
                        problems: &problems,
                    },
                    rs,
                )?;
            }
            for p in &problems {
                eprintln!("klpsym: error: {p}");
            }
            Ok(Outcome::KernelSaysNo)
        }
        Err(e @ (ConvertError::Parse(_) | ConvertError::Cancelled)) => {
            Err(format!("{}: {e}", args.input.display()).into())
        }
    }
}

fn print_report(r: &ConvertReport, out: &Path, rs: &mut Resched) -> Result<(), Cancelled> {
    if r.unchanged {
        println!("nothing to convert: {} copied unchanged", out.display());
        return Ok(());
    }
    for c in &r.conversions {
        rs.tick()?;
        let addr = c.address.map_or_else(|| "address hidden".to_string(), hex);
        let n = c.relocations;
        println!(
            "{:<24} -> {:<48} ({}{addr}, {n} relocation{})",
            c.name,
            c.klp_name,
            if c.pinned { "pinned, " } else { "" },
            if n == 1 { "" } else { "s" }
        );
    }
    for s in &r.sections_created {
        println!("created {s}");
    }
    println!("wrote {}", out.display());
    Ok(())
}
