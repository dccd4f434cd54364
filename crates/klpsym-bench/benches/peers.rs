//! Peers side by side: klpsym against blazesym (libbpf's symbolizer, our closest peer) on the
//! same kallsyms file in one run, plus the kernel's historic name-lookup strategies against
//! klpsym's `find_object_symbol`.
//!
//! Run: `cargo bench -p klpsym-bench --bench peers` (root, so that /proc/kallsyms shows
//! addresses). `PEERS_KALLSYMS=path` uses another kallsyms file, `PEERS_REPS=n` changes the
//! number of repetitions (default 11).
//!
//! What is measured, and why this way:
//! - **load**, cold: from opening the file to the first answered address, in a fresh
//!   `Symbolizer` / a fresh `load()` each repetition. klpsym also builds its name index here
//!   (`build_indexes`), which blazesym never builds for symbolization; the address-index-only
//!   variant is shown too. Reading /proc/kallsyms makes the kernel format every line, a floor
//!   both pay: it is printed on its own.
//! - **single**: one address per call through each library's public per-call API:
//!   `Symbolizer::symbolize_single` on a kallsyms-only `Kernel` source (no vmlinux, KASLR
//!   offset 0, no debug symbols), and `SymbolTable::symbolize`. Timed over a whole loop of calls
//!   (a clock read per call would cost more than klpsym's call), per-call = loop time / calls.
//!   blazesym stats the file on every call to notice a changed file (auto reload, its default);
//!   a row with auto reload off shows what that check costs.
//! - **batch**: 100,000 addresses per call: `Symbolizer::symbolize` on a slice, and a loop over
//!   `symbolize` collecting the outcomes.
//! - **agreement**: names must match for addresses inside symbols; where they cannot (blazesym
//!   has no sizes, so it blames gaps on the symbol below; it has no module column) the
//!   differences are counted and printed, not hidden.
//! - **name lookups**: the kernel's full walk per lookup (before 6.2) and its name-sorted
//!   binary search (6.2) against klpsym's `find_object_symbol`, all three checked to agree.
//!
//! Medians of N repetitions, the two libraries interleaved so that noise from the other users of
//! this shared machine hits both alike. No divan: its table has no ratios between functions, and
//! the numbers here need the same inputs across libraries; a plain `harness = false` main keeps
//! that in one place.

use std::borrow::Cow;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized as BzSymbolized, Symbolizer};
use blazesym::MaybeDefault;
use klpsym_core::resched::Resched;
use klpsym_core::{
    find_object_symbol, LookupRequest, LookupVerdict, ObjectId, SymbolTable, SymbolizeOutcome,
    SIZE_UNKNOWN,
};
use klpsym_io::{load, LoadOptions};

// The kernel strategies and the lookup generator of the latency job, shared with the bench
// binary (a bench target cannot import a binary's modules).
#[allow(dead_code)]
#[path = "../src/job.rs"]
mod job;
use job::{Job, SortedIndex};

/// Addresses per batch call (the "e.g. 100,000").
const BATCH: usize = 100_000;
/// Calls per timed loop of single-address calls.
const SINGLE_CALLS: usize = 20_000;
/// Name lookups for the kernel-strategy baselines ("a few thousand").
const LOOKUPS: usize = 3_000;

fn main() {
    let path = std::env::var_os("PEERS_KALLSYMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"));
    let reps: usize = std::env::var("PEERS_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(11);

    let table = load_klpsym(&path);
    assert!(
        !table.addresses_hidden(),
        "{}: addresses are hidden (kptr_restrict); run as root",
        path.display()
    );
    let vml = table.object_info(ObjectId::VMLINUX).symbol_count;
    println!(
        "kallsyms: {} — {} symbols ({} vmlinux, {} objects); {} repetitions, medians",
        path.display(),
        table.len(),
        vml,
        table.objects().len(),
        reps
    );
    let inside = addresses_inside_symbols(&table, BATCH);
    let src = blazesym_source(&path);

    let mut rows = Vec::new();
    rows.extend(bench_load(&path, &src, inside[0], reps));
    rows.extend(bench_single(&table, &src, &inside, reps));
    rows.extend(bench_batch(&table, &src, &inside, reps));
    one_line_slots(&table, &inside);
    check_agreement(&table, &src, &inside);
    rows.extend(bench_lookups(&table, reps));
    print_summary(&rows);
}

/// One comparison: klpsym's time and the peer's, per unit (a load, a call, an address).
struct Row {
    what: String,
    unit: &'static str,
    klpsym: Duration,
    peer: Duration,
    peer_name: &'static str,
    target: Option<f64>,
}

fn load_klpsym(path: &Path) -> SymbolTable {
    let k = load(path, &LoadOptions::default(), &mut Resched::none())
        .unwrap_or_else(|e| panic!("klpsym cannot load {}: {e}", path.display()));
    k.table
        .build_indexes(&mut Resched::none())
        .expect("no cancellation without a flag");
    k.table
}

/// blazesym's kernel source on exactly this kallsyms file: no vmlinux (not even discovered
/// from /boot), KASLR offset 0 (kallsyms addresses are already relocated), no debug symbols.
fn blazesym_source(path: &Path) -> Source<'static> {
    Source::Kernel(Kernel {
        kallsyms: MaybeDefault::Some(path.to_path_buf()),
        vmlinux: MaybeDefault::None,
        kaslr_offset: Some(0),
        debug_syms: false,
        ..Kernel::default()
    })
}

fn blazesym_symbolizer(auto_reload: bool) -> Symbolizer {
    Symbolizer::builder()
        .enable_auto_reload(auto_reload)
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .build()
}

/// `n` addresses spread over the whole table (deterministic xorshift), each strictly inside a
/// symbol of known extent: the symbol's start plus an offset below its size.
fn addresses_inside_symbols(t: &SymbolTable, n: usize) -> Vec<u64> {
    let sized: Vec<(u64, u64)> = t
        .iter()
        .filter(|s| s.addr != 0)
        .map(|s| (s.addr, t.size(s.id)))
        .filter(|&(_, size)| size != SIZE_UNKNOWN && size > 0)
        .collect();
    assert!(!sized.is_empty(), "no symbol with a known size");
    let mut x = XorShift(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let (addr, size) = sized[x.below(sized.len() as u64) as usize];
            addr + x.below(size)
        })
        .collect()
}

/// A deterministic generator, so that every run measures the same inputs.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The median of `reps` runs of `f`, each returning its own elapsed time.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The name of what klpsym answers, for black-boxing and comparison.
fn klpsym_name(o: SymbolizeOutcome<'_>) -> Option<&str> {
    match o {
        SymbolizeOutcome::Found(s) => Some(s.symbol.name),
        _ => None,
    }
}

fn bench_load(path: &Path, src: &Source<'_>, first: u64, reps: usize) -> Vec<Row> {
    let (mut full, mut addr_only, mut read, mut bz) = (vec![], vec![], vec![], vec![]);
    for _ in 0..reps {
        // klpsym: load, both indexes, first answer.
        let t0 = Instant::now();
        let k = load(path, &LoadOptions::default(), &mut Resched::none()).expect("load");
        k.table
            .build_indexes(&mut Resched::none())
            .expect("no cancellation without a flag");
        black_box(klpsym_name(k.table.symbolize(first)).map(str::len));
        full.push(t0.elapsed());
        read.push(k.read_time);
        drop(k);

        // klpsym: load, first answer (builds the address index only, on first use).
        let t0 = Instant::now();
        let k = load(path, &LoadOptions::default(), &mut Resched::none()).expect("load");
        black_box(klpsym_name(k.table.symbolize(first)).map(str::len));
        addr_only.push(t0.elapsed());
        drop(k);

        // blazesym: a fresh symbolizer, first answer (parses kallsyms on first use).
        let t0 = Instant::now();
        let s = blazesym_symbolizer(true);
        let r = s
            .symbolize_single(src, Input::AbsAddr(first))
            .expect("blazesym symbolize");
        black_box(r.as_sym().map(|s| s.name.len()));
        drop(r);
        bz.push(t0.elapsed());
        drop(s);
    }
    let (full, addr_only, read, bz) = (median(full), median(addr_only), median(read), median(bz));
    println!("\n== load (cold: read + parse + index + first answer), per load");
    println!("  klpsym, both indexes        {:>10.2} ms", ms(full));
    println!("  klpsym, address index only  {:>10.2} ms", ms(addr_only));
    println!("    of which reading the file {:>10.2} ms", ms(read));
    println!("  blazesym                    {:>10.2} ms", ms(bz));
    vec![
        Row {
            what: "load (both indexes)".into(),
            unit: "load",
            klpsym: full,
            peer: bz,
            peer_name: "blazesym",
            target: Some(2.0),
        },
        Row {
            what: "load (address index only)".into(),
            unit: "load",
            klpsym: addr_only,
            peer: bz,
            peer_name: "blazesym",
            target: Some(2.0),
        },
    ]
}

fn bench_single(t: &SymbolTable, src: &Source<'_>, addrs: &[u64], reps: usize) -> Vec<Row> {
    let bz = blazesym_symbolizer(true);
    let bz_pinned = blazesym_symbolizer(false);
    // Warm both caches (blazesym parses on first use; klpsym's indexes are built).
    for s in [&bz, &bz_pinned] {
        s.symbolize_single(src, Input::AbsAddr(addrs[0]))
            .expect("blazesym symbolize");
    }
    let chunk = SINGLE_CALLS.min(addrs.len());
    let (mut k, mut b, mut bp) = (vec![], vec![], vec![]);
    for rep in 0..reps {
        let start = (rep * chunk) % (addrs.len() - chunk + 1);
        let part = &addrs[start..start + chunk];

        let t0 = Instant::now();
        for &a in part {
            black_box(klpsym_name(t.symbolize(black_box(a))).map(str::len));
        }
        k.push(t0.elapsed() / chunk as u32);

        for (s, out) in [(&bz, &mut b), (&bz_pinned, &mut bp)] {
            let t0 = Instant::now();
            for &a in part {
                let r = s
                    .symbolize_single(src, Input::AbsAddr(black_box(a)))
                    .expect("blazesym symbolize");
                black_box(r.as_sym().map(|s| s.name.len()));
            }
            out.push(t0.elapsed() / chunk as u32);
        }
    }
    let (k, b, bp) = (median(k), median(b), median(bp));
    println!("\n== single-address calls ({chunk} calls per timed loop), per call");
    println!(
        "  klpsym   SymbolTable::symbolize              {:>10.1} ns",
        ns(k)
    );
    println!(
        "  blazesym symbolize_single (auto reload on)   {:>10.1} ns",
        ns(b)
    );
    println!(
        "  blazesym symbolize_single (auto reload off)  {:>10.1} ns",
        ns(bp)
    );
    vec![
        Row {
            what: "single-address call".into(),
            unit: "call",
            klpsym: k,
            peer: b,
            peer_name: "blazesym",
            target: Some(20.0),
        },
        Row {
            what: "single-address call".into(),
            unit: "call",
            klpsym: k,
            peer: bp,
            peer_name: "blazesym, no reload",
            target: Some(20.0),
        },
    ]
}

fn bench_batch(t: &SymbolTable, src: &Source<'_>, addrs: &[u64], reps: usize) -> Vec<Row> {
    let bz = blazesym_symbolizer(true);
    bz.symbolize_single(src, Input::AbsAddr(addrs[0]))
        .expect("blazesym symbolize");
    let n = addrs.len() as u32;
    let (mut k, mut b) = (vec![], vec![]);
    for _ in 0..reps {
        let t0 = Instant::now();
        let mut out: Vec<SymbolizeOutcome<'_>> = Vec::with_capacity(addrs.len());
        t.symbolize_batch(addrs, &mut out);
        black_box(&out);
        k.push(t0.elapsed() / n);
        drop(out);

        let t0 = Instant::now();
        let out = bz
            .symbolize(src, Input::AbsAddr(addrs))
            .expect("blazesym symbolize");
        black_box(&out);
        b.push(t0.elapsed() / n);
        drop(out);
    }
    let (k, b) = (median(k), median(b));
    let (bare, bucketed) = reference_floors(t, addrs, reps);
    // The same addresses in address order: each lookup touches what the previous one touched,
    // so the difference to the random order is what cache and TLB misses cost.
    let mut in_order = addrs.to_vec();
    in_order.sort_unstable();
    let mut ko = vec![];
    for _ in 0..reps {
        let t0 = Instant::now();
        let out: Vec<SymbolizeOutcome<'_>> = in_order.iter().map(|&a| t.symbolize(a)).collect();
        black_box(&out);
        ko.push(t0.elapsed() / n);
    }
    let ko = median(ko);
    println!(
        "\n== batch ({} addresses per call), per address",
        addrs.len()
    );
    println!(
        "  klpsym   SymbolTable::symbolize_batch    {:>10.1} ns",
        ns(k)
    );
    println!(
        "  blazesym Symbolizer::symbolize           {:>10.1} ns",
        ns(b)
    );
    println!(
        "  reference: klpsym, the same addresses in address order  {:>10.1} ns",
        ns(ko)
    );
    println!(
        "  reference: bare binary search, sorted u64 addresses  {:>10.1} ns",
        ns(bare)
    );
    println!(
        "  reference: page-bucketed search (prototype)          {:>10.1} ns",
        ns(bucketed)
    );
    vec![Row {
        what: format!("batch of {}", addrs.len()),
        unit: "address",
        klpsym: k,
        peer: b,
        peer_name: "blazesym",
        target: Some(10.0),
    }]
}

/// What the address lookup alone costs on this machine, as a yardstick for the targets: a bare
/// `partition_point` over the sorted addresses (what both libraries do at heart), and a
/// prototype that first jumps to a bucket of 2^k bytes of address space (one small array read),
/// then searches only that bucket. Both are checked against each other.
fn reference_floors(t: &SymbolTable, addrs: &[u64], reps: usize) -> (Duration, Duration) {
    let mut sorted: Vec<u64> = t.iter().map(|s| s.addr).filter(|&a| a != 0).collect();
    sorted.sort_unstable();
    let lo = sorted[0];
    let span = sorted[sorted.len() - 1] - lo;
    // About one bucket per symbol, but never more buckets than 4 per symbol's worth of a
    // 64-bit span: shift = ceil(log2(span / n)).
    let per = (span / sorted.len() as u64).max(1);
    let shift = 64 - (per - 1).leading_zeros();
    let nb = (span >> shift) as usize + 2;
    // starts[b] = first index whose address is in bucket b or later.
    let mut starts = vec![0u32; nb + 1];
    let mut i = 0usize;
    for (b, s) in starts.iter_mut().enumerate() {
        while i < sorted.len() && (((sorted[i] - lo) >> shift) as usize) < b {
            i += 1;
        }
        *s = i as u32;
    }
    let bare = |a: u64| sorted.partition_point(|&x| x <= a);
    let bucketed = |a: u64| -> usize {
        if a < lo {
            return 0;
        }
        let b = (((a - lo) >> shift) as usize).min(nb - 1);
        let (s, e) = (starts[b] as usize, starts[b + 1] as usize);
        s + sorted[s..e].partition_point(|&x| x <= a)
    };
    for &a in addrs.iter().take(10_000) {
        assert_eq!(bare(a), bucketed(a), "bucketed prototype at {a:#x}");
    }
    let n = addrs.len() as u32;
    let (mut x, mut y) = (vec![], vec![]);
    for _ in 0..reps {
        let t0 = Instant::now();
        for &a in addrs {
            black_box(bare(black_box(a)));
        }
        x.push(t0.elapsed() / n);
        let t0 = Instant::now();
        for &a in addrs {
            black_box(bucketed(black_box(a)));
        }
        y.push(t0.elapsed() / n);
    }
    (median(x), median(y))
}

/// Why the index is not one cache line away from its answer, measured on this table: the
/// buckets the address index cuts each 16 MiB chunk into (about one per record, equal width)
/// and the records a query's bucket holds; then the "one-miss" layout, a 64-byte slot per
/// bucket holding the record that covers the bucket's start and the first record starting in
/// it, which can answer in its own line only when at most one record starts in the bucket
/// below the query. Queries are `inside` (a random symbol, then a random offset in it): a kernel's
/// symbols cluster, so most queries land where records are dense.
fn one_line_slots(t: &SymbolTable, inside: &[u64]) {
    const CHUNK: u32 = 24;
    let mut addrs: Vec<u64> = t.iter().map(|s| s.addr).filter(|&a| a != 0).collect();
    addrs.sort_unstable();
    addrs.dedup();
    // Per chunk: its first record and its record count.
    let mut chunks: Vec<(u64, usize, usize)> = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        match chunks.last_mut() {
            Some(c) if c.0 == a >> CHUNK => c.2 += 1,
            _ => chunks.push((a >> CHUNK, i, 1)),
        }
    }
    println!(
        "\n== address index layouts at {} random symbols (records: distinct addresses)",
        inside.len()
    );
    for extra in 0..4u32 {
        let (mut buckets, mut held, mut one_line) = (0usize, 0usize, 0usize);
        for c in &chunks {
            buckets += 1 << ((c.2 as u64).saturating_sub(1).ilog2() + 1 + extra).min(20);
        }
        for &a in inside {
            let Some(c) = chunks.iter().find(|c| c.0 == a >> CHUNK) else {
                continue;
            };
            let bits = ((c.2 as u64).saturating_sub(1).ilog2() + 1 + extra).min(20);
            let shift = CHUNK - bits;
            let lo = a >> shift << shift;
            let s = addrs.partition_point(|&x| x < lo);
            let e = addrs.partition_point(|&x| x < lo + (1 << shift));
            held += e - s;
            // Records starting inside the bucket at or below the query, past its first byte.
            let starts_below = addrs[s..e].iter().filter(|&&x| x > lo && x <= a).count();
            // At best (the slot also knowing where its second record starts): one line when
            // at most one record starts in the bucket at or below the query.
            one_line += usize::from(starts_below <= 1);
        }
        let n = inside.len() as f64;
        println!(
            "  {} bucket(s) per record: bucket starts {:>6.1} MB, one-line slots {:>6.1} MB; records in the query's bucket {:>5.1} on average; a slot answers at best {:>5.1}% in one line",
            1 << extra,
            (buckets * 4) as f64 / 1e6,
            (buckets * 64) as f64 / 1e6,
            held as f64 / n,
            100.0 * one_line as f64 / n
        );
    }
}

/// Compares answers: on addresses inside symbols the names must agree (or the difference be
/// explained: an alias at the same address); on a spread of addresses over the whole range the
/// differences in kind are counted.
fn check_agreement(t: &SymbolTable, src: &Source<'_>, inside: &[u64]) {
    let bz = blazesym_symbolizer(true);
    let answers = bz
        .symbolize(src, Input::AbsAddr(inside))
        .expect("blazesym symbolize");
    let mut same = 0usize;
    let mut alias = 0usize;
    let mut differ: Vec<String> = vec![];
    let (mut with_module, mut bz_module, mut bz_size) = (0usize, 0usize, 0usize);
    for (&a, b) in inside.iter().zip(&answers) {
        let k = t.symbolize(a);
        let b = b.as_sym();
        if let Some(b) = b {
            bz_module += b.module.is_some() as usize;
            bz_size += b.size.is_some() as usize;
        }
        match (k, b) {
            (SymbolizeOutcome::Found(k), Some(b)) => {
                with_module += k.module.is_some() as usize;
                if k.symbol.name == b.name && k.symbol.addr == b.addr {
                    same += 1;
                } else if k.symbol.addr == b.addr {
                    alias += 1;
                    if alias <= 3 {
                        differ.push(format!(
                            "{a:#x}: alias at {:#x}: klpsym {} / blazesym {}",
                            b.addr, k.symbol.name, b.name
                        ));
                    }
                } else {
                    differ.push(format!(
                        "{a:#x}: klpsym {k} / blazesym {}+{:#x}",
                        b.name, b.offset
                    ));
                }
            }
            (k, b) => differ.push(format!(
                "{a:#x}: klpsym {k:?} / blazesym {:?}",
                b.map(|b| &b.name)
            )),
        }
    }
    let wrong = inside.len() - same - alias;
    println!(
        "\n== agreement on {} addresses inside symbols",
        inside.len()
    );
    println!("  same symbol (name and start)        {same}");
    println!("  alias at the same start, other name {alias}");
    println!("  different symbol or no answer       {wrong}");
    for d in differ.iter().take(8) {
        println!("    {d}");
    }
    println!(
        "  module column: klpsym names the module for {with_module}; blazesym reports a module for {bz_module}"
    );
    println!(
        "  symbol size: klpsym knows it for all {}; blazesym for {bz_size} (kallsyms has none)",
        same + alias
    );
    assert_eq!(
        wrong, 0,
        "klpsym and blazesym disagree on addresses inside symbols"
    );

    // A uniform spread over [lowest vmlinux address, highest address]: mostly gaps (the space
    // between the kernel image and the module area, ends of objects). klpsym says "outside" where
    // the address is past a symbol's extent; blazesym, without sizes, names the symbol below.
    let lo = t
        .iter()
        .filter(|s| s.object == ObjectId::VMLINUX && s.addr != 0)
        .map(|s| s.addr)
        .min()
        .expect("vmlinux symbols");
    let hi = t.iter().map(|s| s.addr).max().expect("symbols");
    let mut x = XorShift(0x2545_f491_4f6c_dd1d);
    let spread: Vec<u64> = (0..20_000).map(|_| lo + x.below(hi - lo + 1)).collect();
    let answers = bz
        .symbolize(src, Input::AbsAddr(&spread))
        .expect("blazesym symbolize");
    let (mut both, mut k_outside_bz_named, mut other) = (0usize, 0usize, 0usize);
    let mut example: Option<String> = None;
    for (&a, b) in spread.iter().zip(&answers) {
        match (t.symbolize(a), b) {
            (SymbolizeOutcome::Found(k), BzSymbolized::Sym(b)) => {
                if k.symbol.addr == b.addr {
                    both += 1
                } else {
                    other += 1
                }
            }
            (SymbolizeOutcome::Outside { nearest, size }, BzSymbolized::Sym(b)) => {
                k_outside_bz_named += 1;
                if example.is_none() {
                    example = Some(format!(
                        "{a:#x}: klpsym outside ({} size {}), blazesym {}+{:#x}",
                        nearest.name,
                        if size == SIZE_UNKNOWN {
                            Cow::Borrowed("unknown")
                        } else {
                            Cow::Owned(format!("{size:#x}"))
                        },
                        b.name,
                        b.offset
                    ));
                }
            }
            _ => other += 1,
        }
    }
    println!(
        "  uniform spread of {} addresses over [{lo:#x}, {hi:#x}]:",
        spread.len()
    );
    println!("    both name the same symbol              {both}");
    println!(
        "    klpsym: outside any symbol; blazesym names the symbol below  {k_outside_bz_named}"
    );
    println!("    other                                  {other}");
    if let Some(e) = example {
        println!("    e.g. {e}");
    }
}

/// Before 6.2: one full walk over vmlinux's symbols per lookup, no reschedule point.
fn walk_one(t: &SymbolTable, vml_end: u32, name: &str, sympos: u64) -> Option<u64> {
    job::walk_one(t, vml_end, name, sympos, || Ok(())).unwrap_or(None)
}

fn klpsym_resolve(t: &SymbolTable, name: &str, sympos: u64) -> Option<u64> {
    let o = find_object_symbol(
        t,
        &LookupRequest {
            name,
            object: None,
            sympos,
        },
    );
    (o.verdict == LookupVerdict::Found)
        .then_some(o.address)
        .flatten()
}

fn bench_lookups(t: &SymbolTable, reps: usize) -> Vec<Row> {
    let jobs = Job::generate(t, LOOKUPS).lookups;
    let vml_end = t.object_info(ObjectId::VMLINUX).symbol_count;
    let t0 = Instant::now();
    let sorted = SortedIndex::build(t);
    let sorted_build = t0.elapsed();

    // Results first: all three strategies must give every lookup the same address.
    for (name, pos) in &jobs {
        let k = klpsym_resolve(t, name, *pos);
        assert!(k.is_some(), "klpsym does not resolve {name},{pos}");
        assert_eq!(
            sorted.resolve(name, *pos),
            k,
            "sorted index on {name},{pos}"
        );
        assert_eq!(
            walk_one(t, vml_end, name, *pos),
            k,
            "full walk on {name},{pos}"
        );
    }

    let n = jobs.len() as u32;
    // The walk takes ~100 µs a lookup: three repetitions are plenty and keep the run short.
    let walk_reps = reps.min(3);
    let (mut w, mut s, mut k) = (vec![], vec![], vec![]);
    for rep in 0..reps {
        if rep < walk_reps {
            let t0 = Instant::now();
            for (name, pos) in &jobs {
                black_box(walk_one(t, vml_end, black_box(name), *pos));
            }
            w.push(t0.elapsed() / n);
        }
        let t0 = Instant::now();
        for (name, pos) in &jobs {
            black_box(sorted.resolve(black_box(name), *pos));
        }
        s.push(t0.elapsed() / n);
        let t0 = Instant::now();
        for (name, pos) in &jobs {
            black_box(klpsym_resolve(t, black_box(name), *pos));
        }
        k.push(t0.elapsed() / n);
    }
    let (w, s, k) = (median(w), median(s), median(k));
    println!(
        "\n== name lookups ({} resolvable vmlinux lookups, all three agree), per lookup",
        jobs.len()
    );
    println!(
        "  kernel <6.2: full walk per lookup        {:>12.1} ns",
        ns(w)
    );
    println!(
        "  kernel 6.2: name-sorted binary search    {:>12.1} ns  (index build {:.2} ms)",
        ns(s),
        ms(sorted_build)
    );
    println!(
        "  klpsym find_object_symbol               {:>12.1} ns",
        ns(k)
    );
    vec![
        Row {
            what: "name lookup".into(),
            unit: "lookup",
            klpsym: k,
            peer: w,
            peer_name: "kernel full walk",
            target: None,
        },
        Row {
            what: "name lookup".into(),
            unit: "lookup",
            klpsym: k,
            peer: s,
            peer_name: "kernel sorted index",
            target: None,
        },
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ns(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9
}

fn human(d: Duration) -> String {
    let n = ns(d);
    if n >= 1e6 {
        format!("{:.2} ms", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.2} µs", n / 1e3)
    } else {
        format!("{n:.1} ns")
    }
}

/// The results table (markdown, for the README): speed-up = peer time / klpsym time.
fn print_summary(rows: &[Row]) {
    println!(
        "\n== summary: speed-up = peer time / klpsym time (klpsym is that many times faster)\n"
    );
    println!("| what | per | klpsym | peer | peer time | klpsym/peer | speed-up | target | met |");
    println!("|---|---|---:|---|---:|---:|---:|---:|---|");
    for r in rows {
        let speedup = r.peer.as_secs_f64() / r.klpsym.as_secs_f64().max(1e-12);
        let (target, met) = match r.target {
            Some(t) => (format!("≥{t}x"), if speedup >= t { "yes" } else { "NO" }),
            None => ("-".to_string(), "-"),
        };
        println!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.1}x | {} | {} |",
            r.what,
            r.unit,
            human(r.klpsym),
            r.peer_name,
            human(r.peer),
            1.0 / speedup.max(1e-12),
            speedup,
            target,
            met
        );
    }
}
