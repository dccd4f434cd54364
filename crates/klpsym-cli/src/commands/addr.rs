//! `klpsym addr`: symbolize addresses like %pS, from arguments or standard input.

use std::io::Write;

use serde::Serialize;

use klpsym::{KernelFailure, Outcome, Queries, Trace, TraceAnswers};

use crate::cli::AddrArgs;
use crate::options::{open_kernels, print_notes, print_run};
use crate::output::{print_json, stdout, CliError};

#[derive(Debug, Serialize)]
struct AddrJson<'a> {
    results: &'a [TraceAnswers],
    failed: &'a [KernelFailure],
}

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    // Every line keeps its place; a query that cannot be read is marked in place (with
    // --strict, a line without one is such a query) and the rest go on.
    let trace = if args.addrs.is_empty() {
        Trace::read(std::io::stdin().lock(), args.strict)?
    } else {
        Trace::from_args(&args.addrs)
    };
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let run = klpsym::symbolize_trace(kernels, &trace, args.return_addresses, !args.no_lines)?;
    for r in &run.results {
        print_notes(&r.notes);
        for e in r.addresses.iter().filter_map(|a| a.error.as_ref()) {
            // Marked in place on stdout too; here for whoever reads only the diagnostics.
            eprintln!("klpsym: error: {e}");
        }
    }
    // Then what the run said (what opening said, and a summary of the entries in error).
    print_run(&run.notes, &run.failed);
    if args.source.json {
        print_json(&AddrJson {
            results: &run.results,
            failed: &run.failed,
        })?;
    } else {
        let mut out = stdout();
        for r in &run.results {
            if run.results.len() > 1 {
                writeln!(out, "== {}", r.kernel)?;
            }
            klpsym::render::trace(&mut out, &trace, &r.addresses, args.explain)?;
        }
        out.flush()?;
    }
    Ok(run.outcome)
}
