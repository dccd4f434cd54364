//! `klpsym addr`: symbolize addresses like %pS, from arguments or standard input.

use std::io::{BufRead, Write};

use serde::Serialize;

use klpsym::{parse_query, AddrAnswer, Ended, Kernel, Queries, Query};

use crate::cli::AddrArgs;
use crate::options::{open_kernels, print_failure};
use crate::output::{print_json, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct AddrJson {
    results: Vec<KernelAddrs>,
}

#[derive(Debug, Serialize)]
struct KernelAddrs {
    kernel: String,
    addresses: Vec<AddrAnswer>,
}

/// One line of what was given: a query (an argument, or a stdin line holding a stack
/// entry), or a stdin line without one, passed through as it is.
enum Item {
    Query {
        /// As given (a whole line, timestamp and `?` kept).
        input: String,
        /// Its line on standard input.
        line: Option<usize>,
        query: klpsym::Result<Query>,
    },
    Text(String),
}

/// Standard input, line by line: each stack entry a query, other lines passed through (with
/// `strict`, every non-empty line must be one).
fn read_stdin(strict: bool) -> Result<Vec<Item>, CliError> {
    let mut v = Vec::new();
    for (i, line) in std::io::stdin().lock().split(b'\n').enumerate() {
        let line = String::from_utf8_lossy(&line?)
            .trim_end_matches('\r')
            .to_string();
        if line.trim().is_empty() {
            if !strict {
                v.push(Item::Text(line));
            }
            continue;
        }
        match parse_query(&line) {
            Err(_) if !strict => v.push(Item::Text(line)),
            q => v.push(Item::Query {
                query: q.map_err(|e| e.context(format!("standard input line {}", i + 1))),
                input: line,
                line: Some(i + 1),
            }),
        }
    }
    Ok(v)
}

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    // Every query keeps its text; a line that cannot be read is marked in place (or, with
    // --strict, an error) and the rest go on.
    let items: Vec<Item> = if args.addrs.is_empty() {
        read_stdin(args.strict)?
    } else {
        let query = |a: &String| Item::Query {
            input: a.clone(),
            line: None,
            query: parse_query(a),
        };
        args.addrs.iter().map(query).collect()
    };
    let (kernels, failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    failed.iter().for_each(print_failure);
    for k in &kernels {
        k.require_addresses()?;
    }
    let mut worst = Ended::Found;
    let mut results = Vec::new();
    for k in &kernels {
        results.push(KernelAddrs {
            kernel: k.path().display().to_string(),
            addresses: answers(k, &items, args.return_addresses, &mut worst),
        });
    }
    if args.source.json {
        print_json(&AddrJson { results })?;
    } else {
        render(&kernels, &items, &results, args.explain)?;
    }
    match worst {
        Ended::Found => Ok(Outcome::Ok),
        Ended::NotFound => Ok(Outcome::KernelSaysNo),
        Ended::Unreadable => {
            Err("some input could not be read (marked in place); the rest was answered".into())
        }
    }
}

/// Each query's answer on `k`, in order; `worst` keeps how the worst one ended.
fn answers(k: &Kernel, items: &[Item], return_address: bool, worst: &mut Ended) -> Vec<AddrAnswer> {
    let mut out = Vec::new();
    for item in items {
        let Item::Query { input, line, query } = item else {
            continue;
        };
        let (mut r, e) = k.answer_with(input, query, return_address);
        r.line = *line;
        if let Some(err) = &r.error {
            // Marked in place on stdout too; here for whoever reads only the diagnostics.
            eprintln!("klpsym: error: {err}");
        }
        if e == Ended::Unreadable || (e == Ended::NotFound && *worst == Ended::Found) {
            *worst = e;
        }
        out.push(r);
    }
    out
}

/// The input as given, every stack entry followed by ` => ` and its answer.
fn render(
    kernels: &[Kernel],
    items: &[Item],
    results: &[KernelAddrs],
    explain: bool,
) -> Result<(), CliError> {
    let mut out = stdout();
    for r in results {
        if kernels.len() > 1 {
            writeln!(out, "== {}", r.kernel)?;
        }
        let mut answers = r.addresses.iter();
        for item in items {
            match item {
                Item::Query { .. } => {
                    if let Some(a) = answers.next() {
                        klpsym::render::addr_line(&mut out, a, explain)?;
                    }
                }
                Item::Text(t) => writeln!(out, "{t}")?,
            }
        }
    }
    out.flush()?;
    Ok(())
}
