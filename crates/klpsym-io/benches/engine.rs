//! The engine's speed: load, name lookup and address lookup, on this machine's
//! /proc/kallsyms and on a generated table of 500k symbols.
//!
//! Run: `cargo bench -p klpsym-io --bench engine`. Every benchmark also checks its result,
//! so a fast wrong answer fails instead of reporting a number.

use std::path::Path;
use std::sync::OnceLock;

use divan::{black_box, Bencher};
use klpsym_core::resched::Resched;
use klpsym_core::{
    find_object_symbol, LookupRequest, LookupVerdict, SymbolTable, SymbolizeOutcome,
};
use klpsym_io::{load, LoadOptions};
use klpsym_sources::parse_text;

fn main() {
    divan::main();
}

/// The input tables: (label, kallsyms text).
fn inputs() -> &'static [(&'static str, Vec<u8>)] {
    static INPUTS: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let mut v = Vec::new();
        if let Ok(b) = std::fs::read("/proc/kallsyms") {
            if !b.starts_with(b"0000000000000000 ") || b.len() < 1000 {
                v.push(("proc_kallsyms", b));
            }
        }
        v.push(("generated_500k", generate(500_000)));
        v
    })
}

/// A kallsyms-like text: vmlinux then 40 modules, names with realistic duplicate rates.
fn generate(n: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(n * 45);
    let mut addr: u64 = 0xffffffff81000000;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let vmlinux = n * 9 / 10;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if i == vmlinux {
            addr = 0xffffffffc0000000;
        }
        addr += 16 + (x % 512);
        // 1 in 50 names is a static name defined in up to ~20 places (like init_once, of
        // which a 6.x kernel has a dozen); the rest are unique.
        let name = if x.is_multiple_of(50) {
            format!("common_{}", x % 500)
        } else {
            format!("sym_{i}_{:x}", x & 0xffff)
        };
        let kind = if x.is_multiple_of(3) { 'T' } else { 't' };
        if i < vmlinux {
            writeln!(s, "{addr:016x} {kind} {name}").unwrap();
        } else {
            writeln!(
                s,
                "{addr:016x} {kind} {name}\t[mod_{}]",
                (i - vmlinux) * 40 / (n - vmlinux)
            )
            .unwrap();
        }
    }
    s.into_bytes()
}

fn table(label: &str) -> &'static SymbolTable {
    static TABLES: OnceLock<Vec<(String, SymbolTable)>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        inputs()
            .iter()
            .map(|(l, b)| {
                let t = parse_text(b.clone(), &mut Resched::none()).unwrap().table;
                t.build_indexes(&mut Resched::none()).unwrap();
                (l.to_string(), t)
            })
            .collect()
    });
    &tables.iter().find(|(l, _)| l == label).unwrap().1
}

fn labels() -> Vec<&'static str> {
    inputs().iter().map(|(l, _)| *l).collect()
}

/// Reading /proc/kallsyms and parsing it (the kernel's formatting time included).
#[divan::bench(sample_count = 20)]
fn load_proc_kallsyms(b: Bencher) {
    if !Path::new("/proc/kallsyms").exists() {
        return;
    }
    b.bench(|| {
        let k = load(
            Path::new("/proc/kallsyms"),
            &LoadOptions::default(),
            &mut Resched::none(),
        )
        .unwrap();
        assert!(k.table.len() > 1000);
        k
    });
}

/// Parsing text already in memory: the user time klpsym adds beyond the kernel's.
#[divan::bench(args = labels(), sample_count = 30)]
fn parse(b: Bencher, label: &str) {
    let bytes = &inputs().iter().find(|(l, _)| *l == label).unwrap().1;
    b.with_inputs(|| bytes.clone()).bench_values(|buf| {
        let t = parse_text(buf, &mut Resched::none()).unwrap().table;
        assert!(!t.is_empty());
        t
    });
}

/// Parsing plus building both indexes: everything before the first answer.
#[divan::bench(args = labels(), sample_count = 20)]
fn parse_and_index(b: Bencher, label: &str) {
    let bytes = &inputs().iter().find(|(l, _)| *l == label).unwrap().1;
    b.with_inputs(|| bytes.clone()).bench_values(|buf| {
        let t = parse_text(buf, &mut Resched::none()).unwrap().table;
        t.build_indexes(&mut Resched::none()).unwrap();
        t
    });
}

/// klp_find_object_symbol for 1024 names spread over the table (per-iteration = 1024 lookups).
#[divan::bench(args = labels())]
fn name_lookup_x1024(b: Bencher, label: &str) {
    let t = table(label);
    let step = (t.len() / 1024).max(1);
    let names: Vec<(String, Option<String>)> = (0..t.len())
        .step_by(step)
        .take(1024)
        .map(|i| {
            let s = t.symbol(klpsym_core::SymbolId(i as u32));
            let info = t.object_info(s.object);
            let obj = (info.kind != klpsym_core::ObjectKind::Vmlinux).then(|| info.name.clone());
            (s.name.to_string(), obj)
        })
        .collect();
    b.bench(|| {
        let mut found = 0;
        for (n, o) in &names {
            let r = find_object_symbol(
                t,
                &LookupRequest {
                    name: n,
                    object: o.as_deref(),
                    sympos: 1,
                },
            );
            found += (r.verdict == LookupVerdict::Found) as usize;
        }
        assert!(found > 0);
        black_box(found)
    });
}

/// %pS symbolization of 1024 addresses inside symbols (per-iteration = 1024 lookups).
#[divan::bench(args = labels())]
fn addr_lookup_x1024(b: Bencher, label: &str) {
    let t = table(label);
    let step = (t.len() / 1024).max(1);
    let addrs: Vec<u64> = (0..t.len())
        .step_by(step)
        .take(1024)
        .map(|i| t.symbol(klpsym_core::SymbolId(i as u32)).addr + 1)
        .collect();
    b.bench(|| {
        let mut found = 0;
        for &a in &addrs {
            if let SymbolizeOutcome::Found(s) = t.symbolize(black_box(a)) {
                found += s.offset as usize;
            }
        }
        black_box(found)
    });
}
