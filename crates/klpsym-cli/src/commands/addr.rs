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
    address: String,
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

fn describe(t: &SymbolTable, addr: u64) -> AddrResult {
    let mut r = AddrResult {
        address: hex(addr),
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

pub fn run(args: &AddrArgs) -> Result<Outcome, CliError> {
    let addrs: Vec<u64> = if args.addrs.is_empty() {
        let stdin = std::io::stdin();
        let mut v = Vec::new();
        for (i, line) in stdin.lock().lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            v.push(parse_addr(&line).ok_or_else(|| {
                format!(
                    "standard input line {}: {:?} is not a hex address",
                    i + 1,
                    line.trim()
                )
            })?);
        }
        v
    } else {
        args.addrs
            .iter()
            .map(|a| parse_addr(a).ok_or_else(|| format!("{a:?} is not a hex address (expected e.g. ffffffff81000000 or 0xffffffff81000000)")))
            .collect::<Result<_, _>>()?
    };
    let kernels = load_all(&args.source)?;
    for k in &kernels {
        require_addresses(k)?;
    }
    let mut all = true;
    if args.source.json {
        let results = kernels
            .iter()
            .map(|k| KernelAddrs {
                kernel: k.path.display().to_string(),
                addresses: addrs
                    .iter()
                    .map(|&a| {
                        let r = describe(&k.table, a);
                        all &= r.found;
                        r
                    })
                    .collect(),
            })
            .collect();
        print_json(&AddrJson { results })?;
        return Ok(Outcome::all_ok(all));
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    for k in &kernels {
        if kernels.len() > 1 {
            writeln!(out, "== {}", k.path.display())?;
        }
        for &a in &addrs {
            all &= human(&k.table, a, &mut out)?;
        }
    }
    out.flush()?;
    Ok(Outcome::all_ok(all))
}

#[cfg(test)]
mod tests {
    use super::parse_addr;

    #[test]
    fn parses_hex_forms() {
        assert_eq!(parse_addr("0xffffffff81000000"), Some(0xffffffff81000000));
        assert_eq!(parse_addr(" FFFF "), Some(0xffff));
        assert_eq!(parse_addr("xyz"), None);
        assert_eq!(parse_addr("0x"), None);
        assert_eq!(parse_addr("11111111111111111"), None);
    }
}
