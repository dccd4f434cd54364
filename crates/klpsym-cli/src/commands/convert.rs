//! `klpsym convert`: an ordinary module → a livepatch module with klp relocations (see
//! crates/klpsym-livepatch/CLI.md).

use std::path::Path;

use serde::Serialize;

use klpsym::{Cancelled, ConvertReport, Converted, Pin, Queries, Resched};

use crate::cli::ConvertArgs;
use crate::options::{open_kernels, print_notes};
use crate::output::{print_json_with, CliError, Outcome};

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

pub fn run(args: &ConvertArgs) -> Result<Outcome, CliError> {
    let mut opts = args.source.options(Queries::Names);
    // The target's modules (a package's too): a pin or an object may name one.
    opts.package_modules = true;
    let mut rs = opts.resched();
    let rs = &mut rs;
    let mut pins: Vec<Pin> = args
        .pins
        .iter()
        .map(|p| Pin::parse(p))
        .collect::<Result<_, _>>()?;
    if let Some(f) = &args.pins_file {
        pins.extend(klpsym::read_pins_file(f, args.source.max_input_size, rs)?);
    }
    let copts = klpsym::ConvertOptions {
        target: args.target.options(),
        pins,
    };
    let kernels = open_kernels(&args.source, &opts)?;
    let [k] = kernels.as_slice() else {
        return Err("convert needs exactly one --kernel (the target)".into());
    };
    let run = klpsym::convert(&args.input, &args.output, k, &copts)?;
    print_notes(&run.notes);
    match run.outcome {
        Converted::Written(report) => {
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
            Ok(Outcome::Ok)
        }
        Converted::Refused(problems) => {
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
    }
}

fn print_report(r: &ConvertReport, out: &Path, rs: &mut Resched) -> Result<(), Cancelled> {
    if r.unchanged {
        println!("nothing to convert: {} copied unchanged", out.display());
        return Ok(());
    }
    for c in &r.conversions {
        rs.tick()?;
        let addr = c
            .address
            .map_or_else(|| "address hidden".to_string(), klpsym::hex);
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
