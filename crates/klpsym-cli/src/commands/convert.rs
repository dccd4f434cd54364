//! `klpsym convert`: an ordinary module → a livepatch module with klp relocations (see
//! docs/cli.md).

use serde::Serialize;

use klpsym::{ConvertReport, Converted, Outcome, Pin, Queries};

use crate::cli::ConvertArgs;
use crate::options::{open_kernels, print_notes};
use crate::output::{print_json_with, stdout, CliError};

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
    // Opened for this module as check opens for a patch: a package's modules are read with
    // the kernel (any of them may define what the module refers to).
    let opts = args.source.options(Queries::Names);
    let input = klpsym::Patch::read(&args.input, &opts)?;
    let opts = opts.for_patch(&input);
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
    let ([k], []) = (kernels.kernels.as_slice(), kernels.failed()) else {
        return Err("convert needs exactly one --kernel (the target)".into());
    };
    print_notes(kernels.notes());
    let run = klpsym::convert_patch(&input, &args.output, k, &copts)?;
    print_notes(&run.notes);
    let outcome = run.run_outcome();
    match run.outcome {
        Converted::Written(report) => {
            if args.source.json {
                let output = args.output.display().to_string();
                print_json_with(
                    &ConvertJson {
                        output,
                        report: &report,
                    },
                    rs,
                )?;
            } else {
                klpsym::render::convert_report(&mut stdout(), &report, &args.output, rs)?;
            }
            report.drop_with_points(rs)?;
            Ok(outcome)
        }
        Converted::Refused(problems) => {
            if args.source.json {
                let doc = RefusedJson {
                    error: "refused",
                    problems: &problems,
                };
                print_json_with(&doc, rs)?;
            }
            for p in &problems {
                eprintln!("klpsym: error: {p}");
            }
            // The library says which pin would choose (`[OBJ:]NAME=POS`); the flags are ours.
            if problems.iter().any(|p| p.contains("=POS")) {
                eprintln!(
                    "klpsym: note: a pin is given with --pin [OBJ:]NAME=POS or --pin [OBJ:]NAME@PATH (repeatable), or one per line in --pins-file FILE"
                );
            }
            Ok(outcome)
        }
    }
}
