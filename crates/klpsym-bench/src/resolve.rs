//! The resolution benchmark: a generated patch with 10,000 klp relocations and 1,000 replaced
//! functions spread over vmlinux and 20 modules, resolved against a real /proc/kallsyms by the
//! kernel's historic strategies and by klpsym, side by side in one run.
//!
//! The running kernel here has no modules loaded, so 20 modules are added to its table:
//! ~2,000 symbols each, with static names repeated inside a module as real modules have them.
//! Every strategy gets the object already resolved (the kernel looks objects up once per
//! klp_object too) and must agree on every answer.

use std::time::Instant;

use crate::job::{verdict, SortedIndex};
use klpsym_core::resched::Resched;
use klpsym_core::{
    resolve_in_object, LookupVerdict, ObjectId, ObjectKind, SymbolId, SymbolTable,
    SymbolTableBuilder,
};
use klpsym_io::{load, LoadOptions};

const MODULES: usize = 20;
const PER_MODULE: usize = 2_000;

struct Lookup {
    object: ObjectId,
    name: String,
    sympos: u64,
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn with_modules(base: &SymbolTable) -> SymbolTable {
    let mut b =
        SymbolTableBuilder::with_capacity(base.len() + MODULES * PER_MODULE, base.len() * 24);
    for s in base.iter().filter(|s| s.object == ObjectId::VMLINUX) {
        b.push(ObjectId::VMLINUX, s.addr, s.kind as u8, s.name)
            .expect("table");
    }
    let mut addr = 0xffffffffc0000000u64;
    let mut x = 0x1234_5678_9abc_def1u64;
    for m in 0..MODULES {
        let oid = b.object(&format!("bench_mod{m:02}"), ObjectKind::Module);
        for i in 0..PER_MODULE {
            addr += 16 + xorshift(&mut x) % 256;
            // One name in ten is a static helper repeated a few times in the module.
            let name = if i % 10 == 0 {
                format!("mod_static_{}", (i / 10) % 60)
            } else {
                format!("bench_mod{m:02}_fn_{i}")
            };
            b.push(oid, addr, b't', &name).expect("table");
        }
    }
    b.build()
}

fn generate(t: &SymbolTable, n: usize, seed: u64) -> Vec<Lookup> {
    let ids: Vec<SymbolId> = t.iter().filter(|s| s.addr != 0).map(|s| s.id).collect();
    let vml: Vec<SymbolId> = ids
        .iter()
        .copied()
        .filter(|&i| t.symbol(i).object == ObjectId::VMLINUX)
        .collect();
    let mods: Vec<SymbolId> = ids
        .iter()
        .copied()
        .filter(|&i| t.symbol(i).object != ObjectId::VMLINUX)
        .collect();
    let mut x = seed;
    (0..n)
        .map(|_| {
            // 70% vmlinux, 30% modules.
            let pool = if xorshift(&mut x) % 10 < 7 {
                &vml
            } else {
                &mods
            };
            let s = t.symbol(pool[(xorshift(&mut x) % pool.len() as u64) as usize]);
            let same: Vec<SymbolId> = t.by_name_in(s.name, s.object).map(|m| m.id).collect();
            let sympos = if same.len() == 1 {
                0
            } else {
                same.iter().position(|&i| i == s.id).unwrap_or(0) as u64 + 1
            };
            Lookup {
                object: s.object,
                name: s.name.to_string(),
                sympos,
            }
        })
        .collect()
}

/// The kernel before 6.2: every lookup walks every symbol (modules: every module's symbols,
/// comparing the module name too, as module_kallsyms_on_each_symbol did before 6.3).
fn walk(t: &SymbolTable, l: &Lookup) -> Option<u64> {
    let (mut count, mut addr) = (0u64, 0u64);
    for s in t.iter() {
        if s.name == l.name && s.object == l.object {
            addr = s.addr;
            count += 1;
            if (l.sympos != 0 && count == l.sympos) || (l.sympos == 0 && count > 1) {
                break;
            }
        }
    }
    verdict(addr, count, l.sympos)
}

/// The kernel from 6.2/6.3: vmlinux through the name-sorted index (binary search to the run of
/// equal names); a module through a walk of that module's symbols only.
struct Sorted<'t> {
    t: &'t SymbolTable,
    vml: SortedIndex<'t>,
    module_ranges: Vec<(u32, u32)>,
}

impl<'t> Sorted<'t> {
    fn build(t: &'t SymbolTable) -> Self {
        let mut module_ranges = vec![(0, 0); t.objects().len()];
        let mut start = 0u32;
        for (i, o) in t.objects().iter().enumerate() {
            module_ranges[i] = (start, start + o.symbol_count);
            start += o.symbol_count;
        }
        Sorted {
            t,
            vml: SortedIndex::build(t),
            module_ranges,
        }
    }

    fn resolve(&self, l: &Lookup) -> Option<u64> {
        if l.object == ObjectId::VMLINUX {
            return self.vml.resolve(&l.name, l.sympos);
        }
        let (mut count, mut addr) = (0u64, 0u64);
        let (a, b) = self.module_ranges[l.object.0 as usize];
        for i in a..b {
            let s = self.t.symbol(SymbolId(i));
            if s.name == l.name {
                addr = s.addr;
                count += 1;
                if (l.sympos != 0 && count == l.sympos) || (l.sympos == 0 && count > 1) {
                    break;
                }
            }
        }
        verdict(addr, count, l.sympos)
    }
}

pub fn run(
    kernel: &std::path::Path,
    relocs: usize,
    funcs: usize,
    klpsym_only: Option<usize>,
) -> Result<(), Box<dyn std::error::Error>> {
    let k = load(kernel, &LoadOptions::default(), &mut Resched::none())?;
    if k.table.addresses_hidden() {
        return Err(format!(
            "{}: addresses are hidden (kptr_restrict); run as root",
            kernel.display()
        )
        .into());
    }
    let t = with_modules(&k.table);
    t.build_indexes(&mut Resched::none())?;
    let mut lookups = generate(&t, relocs, 0x9e37_79b9_7f4a_7c15);
    lookups.extend(generate(&t, funcs, 0x2545_f491_4f6c_dd1d));
    println!(
        "patch: {relocs} klp relocation symbols + {funcs} replaced functions = {} lookups; table: {} symbols ({} vmlinux from {}, {MODULES} modules x {PER_MODULE})",
        lookups.len(),
        t.len(),
        t.object_info(ObjectId::VMLINUX).symbol_count,
        kernel.display()
    );
    // The fast strategies are timed 7 times (median); the walk, seconds long, once.
    let median = |mut v: Vec<std::time::Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut ours = Vec::new();
    let mut times = Vec::new();
    for _ in 0..7 {
        let t0 = Instant::now();
        ours = lookups
            .iter()
            .map(
                |l| match resolve_in_object(&t, &l.name, l.object, l.sympos) {
                    (LookupVerdict::Found, Some(id)) => Some(t.symbol(id).addr),
                    _ => None,
                },
            )
            .collect();
        times.push(t0.elapsed());
    }
    // The first pass reads an index nothing has read yet (scripts/bench-lookup.sh compares it
    // across builds, so this line is the same in each).
    let per_lookup = |d: std::time::Duration| d.as_secs_f64() * 1e9 / lookups.len() as f64;
    println!(
        "first pass over the new index: {:.1} ns per lookup",
        per_lookup(times[0])
    );
    println!(
        "fastest of 7 passes: {:.1} ns per lookup",
        per_lookup(*times.iter().min().expect("7 passes"))
    );
    let klpsym_time = median(times);
    if let Some(n) = klpsym_only.filter(|&n| n > 0) {
        let mut times = Vec::with_capacity(n);
        let mut sink = 0u64;
        for _ in 0..n {
            let t0 = Instant::now();
            for l in &lookups {
                if let (LookupVerdict::Found, Some(id)) =
                    resolve_in_object(&t, &l.name, l.object, l.sympos)
                {
                    sink = sink.wrapping_add(t.symbol(id).addr);
                }
            }
            times.push(t0.elapsed());
        }
        times.sort();
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e9 / lookups.len() as f64;
        // The sum of the addresses found: equal across builds that answer alike.
        println!(
            "klpsym only, {n} passes: fastest {:.1} ns, median {:.1} ns per lookup (answers {sink:016x})",
            per(times[0]),
            per(times[n / 2])
        );
        return Ok(());
    }
    let t0 = Instant::now();
    let sorted = Sorted::build(&t);
    let sorted_build = t0.elapsed();
    let mut s = Vec::new();
    let mut times = Vec::new();
    for _ in 0..7 {
        let t0 = Instant::now();
        s = lookups.iter().map(|l| sorted.resolve(l)).collect();
        times.push(t0.elapsed());
    }
    let sorted_time = median(times);
    let t0 = Instant::now();
    let w: Vec<Option<u64>> = lookups.iter().map(|l| walk(&t, l)).collect();
    let walk_time = t0.elapsed();
    if ours != s || ours != w {
        return Err("the strategies disagree".into());
    }
    let resolved = ours.iter().filter(|a| a.is_some()).count();
    if resolved != lookups.len() {
        return Err(format!("only {resolved} of {} lookups resolved", lookups.len()).into());
    }
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e9 / lookups.len() as f64;
    println!(
        "{:<46} {:>12} {:>14} {:>10}",
        "strategy", "total", "per lookup", "klpsym is"
    );
    println!(
        "{:<46} {:>9.3} ms {:>11.1} ns {:>10}",
        "klpsym (hash index)",
        klpsym_time.as_secs_f64() * 1e3,
        per(klpsym_time),
        "-"
    );
    println!(
        "{:<46} {:>9.3} ms {:>11.1} ns {:>9.1}x   (+{:.1} ms to build the index)",
        "kernel 6.2+: name-sorted index, module walk",
        sorted_time.as_secs_f64() * 1e3,
        per(sorted_time),
        sorted_time.as_secs_f64() / klpsym_time.as_secs_f64(),
        sorted_build.as_secs_f64() * 1e3
    );
    println!(
        "{:<46} {:>9.3} ms {:>11.1} ns {:>9.0}x",
        "kernel before 6.2: full walk per lookup",
        walk_time.as_secs_f64() * 1e3,
        per(walk_time),
        walk_time.as_secs_f64() / klpsym_time.as_secs_f64()
    );
    Ok(())
}
