//! `klpsym addr`: symbolize addresses like %pS, from arguments or standard input.

use std::io::{BufRead, BufWriter, Write};

use serde::Serialize;

use klpsym_core::{SymbolTable, SymbolizeOutcome, SIZE_UNKNOWN};

use crate::cli::AddrArgs;
use crate::output::{hex, print_json, CliError, Outcome};
use crate::sources::{load_all, require_addresses};

#[derive(Debug, Serialize)]
struct AddrJson {
    results: Vec<KernelAddrs>,
}

#[derive(Debug, Serialize)]
struct KernelAddrs {
    kernel: String,
    addresses: Vec<AddrResult>,
}

#[derive(Debug, Serialize)]
struct AddrResult {
    /// The argument or input line, as given.
    input: String,
    /// Why the input could not be read or resolved (then the other fields are null).
    error: Option<String>,
    /// The address (for `name+0xoff` input: the address it stands for).
    address: Option<String>,
    /// For `name+0xoff` input matching several definitions: every address, in kernel order.
    addresses: Vec<String>,
    /// true when the address is inside a symbol.
    found: bool,
    /// `name+0xoff/0xsize [module]`, as %pS prints it (found only).
    text: Option<String>,
    symbol: Option<String>,
    offset: Option<String>,
    size: Option<String>,
    /// Module or pseudo-object; null for vmlinux.
    module: Option<String>,
    /// Why not found: `before_first_symbol` or `outside_symbol`.
    reason: Option<&'static str>,
    /// For `outside_symbol`: the symbol just below the address.
    nearest: Option<String>,
}

/// Parses `ffffffff81000000`, `0xffffffff81000000` (and upper case).
pub fn parse_addr(s: &str) -> Option<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if t.is_empty() || t.len() > 16 {
        return None;
    }
    u64::from_str_radix(t, 16).ok()
}

/// What one argument or input line asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// Symbolize this address.
    Address(u64),
    /// The other direction: `name+0xoff[/0xsize] [module]` to an address.
    Symbol {
        name: String,
        offset: u64,
        size: Option<u64>,
        module: Option<String>,
    },
}

/// Parses what people paste: a hex address; a kernel stack line (`[<ffffffff81...>] name+...`
/// gives the address in brackets; `? schedule+0x10/0xa0 [mod]`, `RIP: 0010:name+0x1/0x2`
/// give a symbol and offset); or `name+0xoff` with an optional `/0xsize` and `[module]`.
pub fn parse_query(line: &str) -> Result<Query, String> {
    let t = line.trim();
    if let Some(a) = parse_addr(t) {
        return Ok(Query::Address(a));
    }
    if let Some(open) = t.find("[<") {
        if let Some(close) = t[open..].find(">]") {
            let inner = &t[open + 2..open + close];
            return parse_addr(inner)
                .map(Query::Address)
                .ok_or_else(|| format!("[<{inner}>] is not a hex address"));
        }
    }
    // The last word of the form name+0xoff[/0xsize], with an optional [module] after it.
    let words: Vec<&str> = t.split_whitespace().collect();
    let (sym_word, module) = match words.as_slice() {
        [.., w, m] if m.starts_with('[') && m.ends_with(']') && w.contains('+') => {
            (*w, Some(m[1..m.len() - 1].to_string()))
        }
        [.., w] => (*w, None),
        [] => return Err("empty".into()),
    };
    // `RIP: 0010:name+0x1/0x2`: the segment selector is not part of the name.
    let sym_word = sym_word.rsplit_once(':').map_or(sym_word, |(_, r)| r);
    let Some((name, rest)) = sym_word.rsplit_once('+') else {
        return Err(format!(
            "{t:?} is neither a hex address, a kernel stack line nor name+0xOFFSET"
        ));
    };
    let (off, size) = match rest.split_once('/') {
        Some((o, sz)) => (o, Some(sz)),
        None => (rest, None),
    };
    let hexnum = |x: &str| -> Option<u64> {
        let x = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X"))?;
        u64::from_str_radix(x, 16).ok()
    };
    let offset =
        hexnum(off).ok_or_else(|| format!("{t:?}: offset '{off}' is not 0x-prefixed hex"))?;
    let size = match size {
        Some(sz) => {
            Some(hexnum(sz).ok_or_else(|| format!("{t:?}: size '{sz}' is not 0x-prefixed hex"))?)
        }
        None => None,
    };
    if name.is_empty() {
        return Err(format!("{t:?}: no symbol name before '+'"));
    }
    Ok(Query::Symbol {
        name: name.to_string(),
        offset,
        size,
        module,
    })
}

/// The addresses `name+offset` stands for: every definition of `name` (in `module` when
/// given; vmlinux's when none), narrowed to those of the given size when the size is known.
fn resolve_symbol(
    t: &SymbolTable,
    name: &str,
    offset: u64,
    size: Option<u64>,
    module: Option<&str>,
) -> Result<Vec<(u64, String)>, String> {
    let object = match module {
        Some(m) => Some(
            t.object_by_name(&klpsym_core::normalize_module_name(m))
                .ok_or_else(|| format!("module '{m}' is not in this table"))?,
        ),
        None => None,
    };
    let mut out = Vec::new();
    for s in t.by_name(name) {
        if object.is_some_and(|o| o != s.object) {
            continue;
        }
        if object.is_none() && s.object != klpsym_core::ObjectId::VMLINUX {
            continue;
        }
        if t.object_info(s.object).relative {
            return Err(format!(
                "{name} is in {}, read offline: it has no load address (place it with --loaded and --place-from)",
                t.object_info(s.object).name
            ));
        }
        if let Some(sz) = size {
            let known = t.size(s.id);
            if known != SIZE_UNKNOWN && known != sz {
                continue;
            }
        }
        out.push((s.addr + offset, t.object_info(s.object).name.clone()));
    }
    if out.is_empty() {
        return Err(match module {
            Some(m) => format!(
                "no symbol {name} in [{m}]{}",
                if size.is_some() { " of that size" } else { "" }
            ),
            None => format!(
                "no symbol {name} in vmlinux{} (for a module symbol add [module])",
                if size.is_some() { " of that size" } else { "" }
            ),
        });
    }
    Ok(out)
}

fn describe(t: &SymbolTable, input: &str, addr: u64) -> AddrResult {
    let mut r = AddrResult {
        input: input.to_string(),
        error: None,
        address: Some(hex(addr)),
        addresses: Vec::new(),
        found: false,
        text: None,
        symbol: None,
        offset: None,
        size: None,
        module: None,
        reason: None,
        nearest: None,
    };
    match t.symbolize(addr) {
        SymbolizeOutcome::Found(s) => {
            r.found = true;
            r.text = Some(s.to_string());
            r.symbol = Some(s.symbol.name.to_string());
            r.offset = Some(format!("{:#x}", s.offset));
            r.size = (s.size != SIZE_UNKNOWN).then(|| format!("{:#x}", s.size));
            r.module = s.module.map(str::to_string);
        }
        SymbolizeOutcome::BeforeFirst => r.reason = Some("before_first_symbol"),
        SymbolizeOutcome::Outside { nearest, size } => {
            r.reason = Some("outside_symbol");
            r.nearest = Some(nearest.name.to_string());
            r.size = (size != SIZE_UNKNOWN).then(|| format!("{size:#x}"));
        }
        SymbolizeOutcome::AddressesHidden => r.reason = Some("addresses_hidden"),
    }
    r
}

fn human(t: &SymbolTable, addr: u64, out: &mut impl Write) -> std::io::Result<bool> {
    match t.symbolize(addr) {
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

/// How one query ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    Found,
    NotFound,
    Unreadable,
}

fn answer_json(t: &SymbolTable, input: &str, q: &Result<Query, String>) -> (AddrResult, Ended) {
    let failed = |error: String, ended| {
        (
            AddrResult {
                input: input.to_string(),
                error: Some(error),
                address: None,
                addresses: Vec::new(),
                found: false,
                text: None,
                symbol: None,
                offset: None,
                size: None,
                module: None,
                reason: None,
                nearest: None,
            },
            ended,
        )
    };
    match q {
        Err(e) => failed(e.clone(), Ended::Unreadable),
        Ok(Query::Address(a)) => {
            let r = describe(t, input, *a);
            let e = if r.found {
                Ended::Found
            } else {
                Ended::NotFound
            };
            (r, e)
        }
        Ok(Query::Symbol {
            name,
            offset,
            size,
            module,
        }) => match resolve_symbol(t, name, *offset, *size, module.as_deref()) {
            Err(e) => failed(e, Ended::NotFound),
            Ok(hits) => {
                let mut r = describe(t, input, hits[0].0);
                r.addresses = hits.iter().map(|(a, _)| hex(*a)).collect();
                (r, Ended::Found)
            }
        },
    }
}

fn answer_human(
    t: &SymbolTable,
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
        Ok(Query::Address(a)) => Ok(if human(t, *a, out)? {
            Ended::Found
        } else {
            Ended::NotFound
        }),
        Ok(Query::Symbol {
            name,
            offset,
            size,
            module,
        }) => {
            match resolve_symbol(t, name, *offset, *size, module.as_deref()) {
                Err(e) => {
                    out.flush()?;
                    eprintln!("klpsym: error: {:?}: {e}", input.trim());
                    Ok(Ended::NotFound)
                }
                Ok(hits) => {
                    let many = if hits.len() > 1 {
                        format!("  ({} definitions of {name}: add /0xSIZE or [module] to tell them apart)", hits.len())
                    } else {
                        String::new()
                    };
                    for (a, obj) in &hits {
                        writeln!(out, "{} -> {a:016x} [{obj}]{many}", input.trim())?;
                    }
                    Ok(Ended::Found)
                }
            }
        }
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
    let kernels = load_all(&args.source)?;
    for k in &kernels {
        require_addresses(k)?;
        if k.kind == klpsym_loader::SourceKind::Module {
            return Err(format!(
                "{}: a module read from its file has no load address (its symbols are unplaced, at section offsets); symbolize against the kernel's /proc/kallsyms, or place it with --kernel KALLSYMS --modules DIR --loaded NAME",
                k.path.display()
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
                kernel: k.path.display().to_string(),
                addresses: queries
                    .iter()
                    .map(|(input, q)| {
                        let (r, e) = answer_json(&k.table, input, q);
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
                writeln!(out, "== {}", k.path.display())?;
            }
            for (input, q) in &queries {
                note(answer_human(&k.table, input, q, &mut out)?);
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

#[cfg(test)]
mod tests {
    use super::{parse_addr, parse_query, Query};

    #[test]
    fn parses_what_people_paste() {
        let sym = |name: &str, offset, size, module: Option<&str>| Query::Symbol {
            name: name.into(),
            offset,
            size,
            module: module.map(str::to_string),
        };
        assert_eq!(
            parse_query(" ? schedule+0x10/0xa0 [dummy]"),
            Ok(sym("schedule", 0x10, Some(0xa0), Some("dummy")))
        );
        assert_eq!(
            parse_query(" [<ffffffff81234567>] schedule+0x10/0xa0"),
            Ok(Query::Address(0xffffffff81234567))
        );
        assert_eq!(
            parse_query("RIP: 0010:cmdline_proc_show+0x5/0x30"),
            Ok(sym("cmdline_proc_show", 5, Some(0x30), None))
        );
        assert_eq!(
            parse_query("init_once.isra.0+0x4"),
            Ok(sym("init_once.isra.0", 4, None, None))
        );
        assert_eq!(parse_query("0xffff"), Ok(Query::Address(0xffff)));
        assert!(parse_query("schedule+16").is_err());
        assert!(parse_query("hello world").is_err());
    }

    #[test]
    fn parses_hex_forms() {
        assert_eq!(parse_addr("0xffffffff81000000"), Some(0xffffffff81000000));
        assert_eq!(parse_addr(" FFFF "), Some(0xffff));
        assert_eq!(parse_addr("xyz"), None);
        assert_eq!(parse_addr("0x"), None);
        assert_eq!(parse_addr("11111111111111111"), None);
    }
}
