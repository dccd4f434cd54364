//! Name queries side by side: the compiler-made-variant hints for names missing everywhere
//! (a patch with 21,000 missing names) through klpsym's stem index, against a walk over the
//! table per name and against one pass over the table for all names; and `search`'s glob and
//! substring matching against grep over the same kallsyms text.
//!
//! Every approach must find the same variants; medians of `reps` runs, interleaved.

use std::collections::HashSet;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use klpsym_core::resched::Resched;
use klpsym_core::{search_names, NamePattern, SymbolTable};
use klpsym_io::{load, LoadOptions};

type Res = Result<(), Box<dyn std::error::Error>>;

/// Names missing from the table: the stems of its variant names that are not names
/// themselves (the hint finds their variants), then made-up names (the hint finds nothing).
fn missing_names(t: &SymbolTable, n: usize) -> Vec<String> {
    let names: HashSet<&str> = t.iter().map(|s| s.name).collect();
    let mut stems: Vec<String> = t
        .iter()
        .filter_map(|s| s.name.split_once('.').map(|(stem, _)| stem))
        .filter(|stem| !stem.is_empty() && !names.contains(stem))
        .map(str::to_string)
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    stems.sort();
    stems.truncate(n);
    let made_up = n - stems.len();
    stems.extend((0..made_up).map(|i| format!("klpsym_bench_missing_{i}")));
    stems
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

pub fn run(kernel: &Path, missing: usize, reps: usize) -> Res {
    let reps = reps.max(1);
    let opts = LoadOptions::default();
    let base = load(kernel, &opts, &mut Resched::none())?;
    let names = missing_names(&base.table, missing);
    let with_variants = names
        .iter()
        .filter(|n| base.table.variants_of(n).next().is_some())
        .count();
    eprintln!(
        "{} symbols in {}; {} missing names, {with_variants} of them with variants",
        base.table.len(),
        kernel.display(),
        names.len()
    );
    // Walking the table once per name costs too much for all of them: a sample, scaled.
    let sample = names.len().min(200);
    let (mut index, mut pass, mut walk) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        // A fresh table each time, so the stem index is built inside the timing.
        let k = load(kernel, &opts, &mut Resched::none())?;
        let t0 = Instant::now();
        k.table.build_stem_index(&mut Resched::none())?;
        let found_index: usize = names.iter().map(|n| k.table.variants_of(n).count()).sum();
        index.push(t0.elapsed());

        let t0 = Instant::now();
        let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
        let found_pass = k
            .table
            .iter()
            .filter(|s| {
                s.name
                    .split_once('.')
                    .is_some_and(|(stem, _)| wanted.contains(stem))
            })
            .count();
        pass.push(t0.elapsed());

        let t0 = Instant::now();
        let mut found_walk = 0;
        for n in names.iter().take(sample) {
            found_walk += k
                .table
                .iter()
                .filter(|s| {
                    s.name.len() > n.len() + 1
                        && s.name.starts_with(n.as_str())
                        && s.name.as_bytes()[n.len()] == b'.'
                })
                .count();
        }
        walk.push(t0.elapsed().mul_f64(names.len() as f64 / sample as f64));
        let found_sample: usize = names
            .iter()
            .take(sample)
            .map(|n| k.table.variants_of(n).count())
            .sum();
        if found_index != found_pass || found_sample != found_walk {
            return Err(format!(
                "approaches disagree: index {found_index}, one pass {found_pass}; sample: index {found_sample}, walk {found_walk}"
            )
            .into());
        }
        black_box(&k);
    }
    let (i, p, w) = (median(&mut index), median(&mut pass), median(&mut walk));
    println!(
        "hints for {} missing names (median of {reps}):",
        names.len()
    );
    println!("  stem index (build + lookups)      {:>12}", ms(i));
    println!(
        "  one pass over the table           {:>12}  ({:.1}x the index)",
        ms(p),
        p.as_secs_f64() / i.as_secs_f64()
    );
    println!(
        "  a walk per name (from {sample}, scaled) {:>12}  ({:.0}x the index)",
        ms(w),
        w.as_secs_f64() / i.as_secs_f64()
    );
    search_vs_grep(&base.table, kernel, reps)
}

/// `search` matching (the table already loaded) against grep over the kallsyms text.
fn search_vs_grep(t: &SymbolTable, kernel: &Path, reps: usize) -> Res {
    // grep reads a regular copy: /proc/kallsyms would time the kernel's formatting instead.
    let copy = std::env::temp_dir().join(format!("klpsym-bench-names-{}.txt", std::process::id()));
    std::fs::write(&copy, std::fs::read(kernel)?)?;
    let r = search_with(t, &copy, reps);
    let _ = std::fs::remove_file(&copy);
    r
}

fn search_with(t: &SymbolTable, kernel: &Path, reps: usize) -> Res {
    println!("search (median of {reps}; klpsym over the loaded table, grep over the file):");
    for (pattern, grep_args) in [
        ("*init_once*", vec!["-c", "init_once"]),
        ("init_once", vec!["-c", "-F", "init_once"]),
        ("ext4_*_inode", vec!["-c", "-E", " ext4_.*_inode($|\\s)"]),
    ] {
        let p = NamePattern::new(pattern)?;
        let (mut ours, mut grep) = (Vec::new(), Vec::new());
        let mut found = 0;
        for _ in 0..reps {
            let t0 = Instant::now();
            found = search_names(t, &p, None, &mut Resched::none())?.len();
            ours.push(t0.elapsed());
            let t0 = Instant::now();
            let o = std::process::Command::new("grep")
                .args(&grep_args)
                .arg(kernel)
                .output()?;
            grep.push(t0.elapsed());
            black_box(o);
        }
        let (o, g) = (median(&mut ours), median(&mut grep));
        println!(
            "  {:<14} {:>5} names  klpsym {:>10}  grep {:>10}",
            format!("'{pattern}'"),
            found,
            ms(o),
            ms(g)
        );
    }
    Ok(())
}
