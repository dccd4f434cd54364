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

fn human(k: &Kernel, addr: u64, out: &mut impl Write) -> std::io::Result<bool> {
    let t = k.table();
    match k.symbolize(addr) {
        SymbolizeOutcome::Found(s) => {
            writeln!(out, "{addr:016x} {s}")?;
            Ok(true)
        }
        SymbolizeOutcome::BeforeFirst => {
            writeln!(out, "{addr:016x} ?? (below the first symbol)")?;
            Ok(false)
        }
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
            writeln!(out, "{addr:016x} ?? (outside every symbol: {why})")?;
            Ok(false)
        }
        SymbolizeOutcome::AddressesHidden => Ok(false),
    }
}

fn answer_human(
    k: &Kernel,
    input: &str,
    q: &Result<Query, String>,
    out: &mut impl Write,
) -> std::io::Result<Ended> {
    match q {
        Err(e) => {
            out.flush()?;
            eprintln!("klpsym: error: {input:?}: {e}");
            Ok(Ended::Unreadable)
        }
        Ok(Query::Address(a)) => Ok(if human(k, *a, out)? {
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
                    writeln!(out, "{} -> {a:016x} [{obj}]{many}", input.trim())?;
                }
                Ok(Ended::Found)
            }
        },
    }
}

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    // Every query keeps its text; a line that cannot be read is reported and the rest go on.
    let queries: Vec<(String, Result<Query, String>)> = if args.addrs.is_empty() {
        let stdin = std::io::stdin();
        let mut v = Vec::new();
        for (i, line) in stdin.lock().split(b'\n').enumerate() {
            let line = line?;
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            if line.trim().is_empty() {
                continue;
            }
            let q = parse_query(&line).map_err(|e| format!("standard input line {}: {e}", i + 1));
            v.push((line, q));
        }
        v
    } else {
        args.addrs
            .iter()
            .map(|a| (a.clone(), parse_query(a)))
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
        let results = kernels
            .iter()
            .map(|k| KernelAddrs {
                kernel: k.path().display().to_string(),
                addresses: queries
                    .iter()
                    .map(|(input, q)| {
                        let (r, e) = k.answer(input, q);
                        note(e);
                        r
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
            for (input, q) in &queries {
                note(answer_human(k, input, q, &mut out)?);
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
