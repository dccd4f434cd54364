//! `klpsym addr`: symbolize addresses like %pS, from arguments or standard input.

use std::io::Write;

use serde::Serialize;

use klpsym::{AddrAnswer, Ended, Note, Queries, Trace};

use crate::cli::AddrArgs;
use crate::options::{open_kernels, print_failure, print_notes};
use crate::output::{print_json, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct AddrJson {
    results: Vec<KernelAddrs>,
}

#[derive(Debug, Serialize)]
struct KernelAddrs {
    kernel: String,
    /// When the trace is of another architecture than the kernel: which, and how it shows.
    arch_mismatch: Option<String>,
    /// What the answers took from the trace or assumed (the kernel version).
    notes: Vec<Note>,
    addresses: Vec<AddrAnswer>,
}

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    // Every line keeps its place; a query that cannot be read is marked in place (with
    // --strict, a line without one is such a query) and the rest go on.
    let trace = if args.addrs.is_empty() {
        Trace::read(std::io::stdin().lock(), args.strict)?
    } else {
        Trace::from_args(&args.addrs)
    };
    let (mut kernels, failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    failed.iter().for_each(print_failure);
    let mut worst = Ended::Found;
    let mut results = Vec::new();
    for k in &mut kernels {
        k.require_addresses()?;
        // A pasted oops's own header line tells the version where nothing else did.
        let mut notes: Vec<Note> = k.hear_trace(&trace).into_iter().collect();
        let k = &*k;
        let (mut addresses, mut ended) = k.answer_trace(&trace, args.return_addresses);
        notes.extend(k.version_assumed(&addresses));
        print_notes(&notes);
        // A trace of another architecture: every answer is this kernel's, none the trace's.
        let arch_mismatch = trace.arch_mismatch(k);
        if let Some(m) = &arch_mismatch {
            eprintln!("klpsym: warning: {m}");
            ended = ended.max(Ended::NotFound);
        }
        if !args.no_lines && k.has_line_tables() {
            k.add_source_lines(&mut addresses, args.return_addresses)?;
        }
        for e in addresses.iter().filter_map(|a| a.error.as_ref()) {
            // Marked in place on stdout too; here for whoever reads only the diagnostics.
            eprintln!("klpsym: error: {e}");
        }
        worst = worst.max(ended);
        let kernel = k.path().display().to_string();
        results.push(KernelAddrs {
            kernel,
            arch_mismatch,
            notes,
            addresses,
        });
    }
    if args.source.json {
        print_json(&AddrJson { results })?;
    } else {
        let mut out = stdout();
        for r in &results {
            if results.len() > 1 {
                writeln!(out, "== {}", r.kernel)?;
            }
            klpsym::render::trace(&mut out, &trace, &r.addresses, args.explain)?;
        }
        out.flush()?;
    }
    match worst {
        Ended::Found => Ok(Outcome::Ok),
        Ended::NotFound => Ok(Outcome::KernelSaysNo),
        // A pasted trace was read: an entry in it that cannot be decoded is an answer of its
        // own (marked in place), as one outside every symbol is.
        Ended::Unreadable if args.addrs.is_empty() => {
            eprintln!(
                "klpsym: error: some stack entries could not be decoded (marked in place); the rest was answered"
            );
            Ok(Outcome::KernelSaysNo)
        }
        // An argument that is no address nor name+0xOFF: the question itself was not asked.
        Ended::Unreadable => {
            Err("some argument could not be read (marked in place); the rest was answered".into())
        }
    }
}
