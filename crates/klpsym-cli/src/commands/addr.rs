//! `klpsym addr`: symbolize addresses like %pS, from arguments or standard input.

use std::io::{BufRead, BufWriter, Write};

use serde::Serialize;

use klpsym::{
    parse_query, AddrAnswer, Ended, Kernel, Queries, Query, SymbolizeOutcome, SIZE_UNKNOWN,
};

use crate::cli::AddrArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

#[derive(Debug, Serialize)]
struct AddrJson {
    results: Vec<KernelAddrs>,
}

#[derive(Debug, Serialize)]
struct KernelAddrs {
    kernel: String,
    addresses: Vec<AddrAnswer>,
}

/// `INPUT => ANSWER` for an address: `%pS` of it (`%pB` for a return address), or why there
/// is none.
fn human(
    k: &Kernel,
    input: &str,
    addr: u64,
    return_address: bool,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    let t = k.table();
    let outcome = if return_address {
        k.symbolize_return(addr)
    } else {
        k.symbolize(addr)
    };
    let (text, found) = match outcome {
        SymbolizeOutcome::Found(s) => (s.to_string(), true),
        SymbolizeOutcome::BeforeFirst => ("?? (below the first symbol)".to_string(), false),
        SymbolizeOutcome::Outside { nearest, size } => {
            let obj = &t.object_info(nearest.object).name;
            let why = if size == SIZE_UNKNOWN {
                format!(
                    "past {} [{obj}], the last symbol there, whose size is unknown",
                    nearest.name
                )
            } else {
                format!(
                    "past the end of {} [{obj}] at {:#x}",
                    nearest.name,
                    nearest.addr + size
                )
            };
            (format!("?? (outside every symbol: {why})"), false)
        }
        SymbolizeOutcome::AddressesHidden => return Ok(false),
        SymbolizeOutcome::OutsideKernel { nearest } => (
            format!(
                "{addr:#x} (not a kernel address: outside vmlinux's _stext.._end, past {}; %pS prints the number)",
                nearest.name
            ),
            false,
        ),
    };
    writeln!(out, "{input} => {text}")?;
    Ok(found)
}

fn answer_human(
    k: &Kernel,
    input: &str,
    q: &Result<Query, String>,
    return_address: bool,
    out: &mut impl Write,
) -> std::io::Result<Ended> {
    match q {
        Err(e) => {
            out.flush()?;
            // The message quotes the input already, once.
            if e.contains(input.trim()) {
                eprintln!("klpsym: error: {e}");
            } else {
                eprintln!("klpsym: error: {input:?}: {e}");
            }
            Ok(Ended::Unreadable)
        }
        Ok(Query::Address(a)) => Ok(if human(k, input, *a, return_address, out)? {
            Ended::Found
        } else {
            Ended::NotFound
        }),
        Ok(Query::Symbol {
            name,
            offset,
            size,
            module,
        }) => match k.resolve_symbol(name, *offset, *size, module.as_deref()) {
            Err(e) => {
                out.flush()?;
                eprintln!("klpsym: error: {:?}: {e}", input.trim());
                Ok(Ended::NotFound)
            }
            Ok(hits) => {
                let many = if hits.len() > 1 {
                    format!(
                        "  ({} definitions of {name}: add /0xSIZE or [module] to tell them apart)",
                        hits.len()
                    )
                } else {
                    String::new()
                };
                for (a, obj) in &hits {
                    writeln!(out, "{input} => {a:016x} [{obj}]{many}")?;
                }
                Ok(Ended::Found)
            }
        },
    }
}

/// One line of what was given: a query (an argument, or a stdin line holding a stack
/// entry), or a stdin line without one, passed through as it is.
enum Item {
    Query {
        /// As given (a whole line, timestamp and `?` kept).
        input: String,
        /// Its line on standard input.
        line: Option<usize>,
        query: Result<Query, String>,
    },
    Text(String),
}

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    // Every query keeps its text; a line that cannot be read is passed through (or, with
    // --strict, reported) and the rest go on.
    let items: Vec<Item> = if args.addrs.is_empty() {
        let stdin = std::io::stdin();
        let mut v = Vec::new();
        for (i, line) in stdin.lock().split(b'\n').enumerate() {
            let line = line?;
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            if line.trim().is_empty() {
                if !args.strict {
                    v.push(Item::Text(line));
                }
                continue;
            }
            match parse_query(&line) {
                Err(_) if !args.strict => v.push(Item::Text(line)),
                q => v.push(Item::Query {
                    query: q.map_err(|e| format!("standard input line {}: {e}", i + 1)),
                    input: line,
                    line: Some(i + 1),
                }),
            }
        }
        v
    } else {
        args.addrs
            .iter()
            .map(|a| Item::Query {
                input: a.clone(),
                line: None,
                query: parse_query(a),
            })
            .collect()
    };
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    for k in &kernels {
        k.require_addresses()?;
        if k.kind() == klpsym::SourceKind::Module {
            return Err(format!(
                "{}: a module read from its file has no load address (its symbols are unplaced, at section offsets); symbolize against the kernel's /proc/kallsyms, or place it with --kernel KALLSYMS --modules DIR --loaded NAME",
                k.path().display()
            )
            .into());
        }
    }
    let mut worst = Ended::Found;
    let mut note = |e: Ended| {
        if e == Ended::Unreadable || (e == Ended::NotFound && worst == Ended::Found) {
            worst = e;
        }
    };
    if args.source.json {
        // One record per stack entry; lines passed through are not entries.
        let results = kernels
            .iter()
            .map(|k| KernelAddrs {
                kernel: k.path().display().to_string(),
                addresses: items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Query { input, line, query } => {
                            let (mut r, e) = k.answer_with(input, query, args.return_addresses);
                            r.line = *line;
                            note(e);
                            Some(r)
                        }
                        Item::Text(_) => None,
                    })
                    .collect(),
            })
            .collect();
        print_json(&AddrJson { results })?;
    } else {
        let stdout = std::io::stdout();
        let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
        for k in &kernels {
            if kernels.len() > 1 {
                writeln!(out, "== {}", k.path().display())?;
            }
            for item in &items {
                match item {
                    Item::Query { input, query, .. } => note(answer_human(
                        k,
                        input,
                        query,
                        args.return_addresses,
                        &mut out,
                    )?),
                    Item::Text(t) => writeln!(out, "{t}")?,
                }
            }
        }
        out.flush()?;
    }
    match worst {
        Ended::Found => Ok(Outcome::Ok),
        Ended::NotFound => Ok(Outcome::KernelSaysNo),
        Ended::Unreadable => {
            Err("some input could not be read (see above); the rest was answered".into())
        }
    }
}
