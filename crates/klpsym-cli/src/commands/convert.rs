//! `klpsym convert`: an ordinary module → a livepatch module with klp relocations (see
//! crates/klpsym-livepatch/CLI.md).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use klpsym_livepatch::{convert, ConvertError, ConvertReport, LivepatchModule, Pin, Target};
use klpsym_loader::write_atomically;

use super::check::{exported_by, offline_tables, rules_for};
use crate::cli::SourceArgs;
use crate::output::{hex, print_json, CliError, Outcome};
use crate::sources::load_all;

/// `klpsym convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The module to convert (never modified).
    pub input: PathBuf,
    /// Where to write the converted module (through a temporary file renamed into place).
    #[arg(long, short = 'o', value_name = "OUT.ko")]
    pub output: PathBuf,
    /// Choose a definition: `[OBJ:]NAME=POS` (POS 1-based; 0 = must be unique). Repeatable.
    #[arg(long = "pin", value_name = "[OBJ:]NAME=POS")]
    pub pins: Vec<String>,
    /// A file of pins, one per line; `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    pub pins_file: Option<PathBuf>,
    /// Module.symvers of the target: its names count as exported.
    #[arg(long, value_name = "FILE")]
    pub symvers: Option<PathBuf>,
    /// The kernel version whose rules apply (`6.1`); default: the source's banner.
    #[arg(long, value_name = "X.Y")]
    pub kernel_version: Option<String>,
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

fn read_pins(args: &ConvertArgs) -> Result<Vec<Pin>, CliError> {
    let mut pins: Vec<Pin> = args
        .pins
        .iter()
        .map(|p| Pin::parse(p))
        .collect::<Result<_, _>>()?;
    if let Some(f) = &args.pins_file {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            pins.push(Pin::parse(line).map_err(|e| format!("{}:{}: {e}", f.display(), i + 1))?);
        }
    }
    Ok(pins)
}

/// Names listed in a Module.symvers (`CRC<TAB>NAME<TAB>MODULE<TAB>TYPE...`).
fn read_symvers(path: &Path) -> Result<HashSet<String>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split('\t').nth(1))
        .map(str::to_string)
        .collect())
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
    let bytes = klpsym_loader::read_bounded(
        &args.input,
        args.source.max_input_size,
        &mut klpsym_core::resched::Resched::none(),
    )?;
    let pins = read_pins(args)?;
    let symvers = match &args.symvers {
        Some(p) => read_symvers(p)?,
        None => HashSet::new(),
    };
    let kernels = load_all(&args.source)?;
    let [k] = kernels.as_slice() else {
        return Err("convert needs exactly one --kernel (the target)".into());
    };
    let rules = rules_for(k, args.kernel_version.as_deref())?;
    // Objects named by pins may be modules that are not loaded: offer their .ko.
    let mut names: Vec<String> = pins.iter().filter_map(|p| p.object.clone()).collect();
    if let Ok(m) = LivepatchModule::parse(&bytes) {
        if let Ok(p) = &m.patch {
            names.extend(p.objects.iter().map(|o| o.object_name().to_string()));
        }
    }
    let offline = offline_tables(&args.source, &names, &k.table)?;
    let arch = match LivepatchModule::parse(&bytes) {
        Ok(m) => m.arch,
        Err(e) => return Err(format!("{}: {e}", args.input.display()).into()),
    };
    let mut target = Target::new(&k.table, rules, arch);
    for (n, t) in &offline {
        target = target.with_offline_module(n, t);
    }
    let exported = |n: &str| symvers.contains(n) || exported_by(&k.table, n);
    match convert(&bytes, &target, &pins, &exported) {
        Ok((out, report)) => {
            write_atomically(&args.output, |w| w.write_all(&out))?;
            for w in &report.warnings {
                eprintln!("klpsym: warning: {w}");
            }
            if args.source.json {
                print_json(&ConvertJson {
                    output: args.output.display().to_string(),
                    report: &report,
                })?;
            } else {
                print_report(&report, &args.output);
            }
            Ok(Outcome::Ok)
        }
        Err(ConvertError::Refused(problems)) => {
            if args.source.json {
                print_json(&RefusedJson {
                    error: "refused",
                    problems: &problems,
                })?;
            }
            for p in &problems {
                eprintln!("klpsym: error: {p}");
            }
            Ok(Outcome::KernelSaysNo)
        }
        Err(e @ ConvertError::Parse(_)) => Err(format!("{}: {e}", args.input.display()).into()),
    }
}

fn print_report(r: &ConvertReport, out: &Path) {
    if r.unchanged {
        println!("nothing to convert: {} copied unchanged", out.display());
        return;
    }
    for c in &r.conversions {
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
}
