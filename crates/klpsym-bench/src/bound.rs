//! Proof that the reschedule bound holds: run each long operation with an instrumented
//! [`Resched`] and report the longest stretch between two points.

use std::path::Path;
use std::time::{Duration, Instant};

use klpsym_core::resched::{Resched, ReschedPolicy};
use klpsym_core::{find_object_symbol, write_kallsyms, LookupRequest, SymbolTable};
use klpsym_loader::{load, LoadOptions};

use crate::job::Job;

fn report(op: &str, r: &Resched, took: Duration, interval: Duration, worst: &mut Duration) {
    let s = r.stats();
    *worst = (*worst).max(s.longest_stretch);
    println!(
        "{:<34} {:>9.1} ms {:>9} points {:>10} items   longest stretch {:>7.1} µs{}",
        op,
        took.as_secs_f64() * 1e3,
        s.points,
        s.items,
        s.longest_stretch.as_secs_f64() * 1e6,
        if s.longest_stretch > interval * 2 {
            "   OVER 2x INTERVAL"
        } else {
            ""
        }
    );
    let loc = |l: Option<&std::panic::Location<'_>>| match l {
        Some(l) => format!("{}:{}", l.file(), l.line()),
        None => "-".to_string(),
    };
    println!(
        "{:<34}    from {} to {}",
        "",
        loc(s.longest_from),
        loc(s.longest_to)
    );
}

pub fn run(
    kernel: &Path,
    image: Option<&Path>,
    interval: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "interval under test: {} µs (policy: nothing; a stretch is the thread's CPU time between two points, so time spent preempted by other work does not count)",
        interval.as_micros()
    );
    let mk = || {
        Resched::new(ReschedPolicy::Nothing)
            .with_interval(interval)
            .with_work_clock(crate::sys::thread_cpu_time)
    };
    let mut worst = Duration::ZERO;

    let mut r = mk();
    let t0 = Instant::now();
    let k = load(kernel, &LoadOptions::default(), &mut r)?;
    report(
        &format!("load {}", kernel.display()),
        &r,
        t0.elapsed(),
        interval,
        &mut worst,
    );
    let t: &SymbolTable = &k.table;

    let mut r = mk();
    let t0 = Instant::now();
    t.build_indexes(&mut r)?;
    report(
        "build name + address indexes",
        &r,
        t0.elapsed(),
        interval,
        &mut worst,
    );

    let mut r = mk();
    let t0 = Instant::now();
    write_kallsyms(t, &mut std::io::sink(), &mut r)?;
    report(
        "dump (/proc/kallsyms format)",
        &r,
        t0.elapsed(),
        interval,
        &mut worst,
    );

    let addrs: Vec<u64> = t.iter().map(|s| s.addr).collect();
    let mut r = mk();
    let t0 = Instant::now();
    let mut found = 0usize;
    for _ in 0..4 {
        for &a in &addrs {
            r.tick()?;
            found += matches!(t.symbolize(a), klpsym_core::SymbolizeOutcome::Found(_)) as usize;
        }
    }
    report(
        &format!("symbolize {} addresses", addrs.len() * 4),
        &r,
        t0.elapsed(),
        interval,
        &mut worst,
    );
    assert!(found > 0);

    let job = Job::generate(t, 20_000);
    let mut r = mk();
    let t0 = Instant::now();
    for (n, p) in &job.lookups {
        r.tick()?;
        let _ = find_object_symbol(
            t,
            &LookupRequest {
                name: n,
                object: None,
                sympos: *p,
            },
        );
    }
    report(
        "resolve a 20,000-lookup patch",
        &r,
        t0.elapsed(),
        interval,
        &mut worst,
    );

    if let Some(img) = image {
        let mut r = mk();
        let t0 = Instant::now();
        let k = load(img, &LoadOptions::default(), &mut r)?;
        report(
            &format!("load image ({} symbols)", k.table.len()),
            &r,
            t0.elapsed(),
            interval,
            &mut worst,
        );
    }
    // Optional inputs without a flag of their own yet (main.rs belongs to another change): a
    // vmlinux ELF with .symtab, and a module tree whose every .ko is loaded under one driver.
    if let Some(elf) = std::env::var_os("KLPSYM_BENCH_VMLINUX_ELF") {
        let mut r = mk();
        let t0 = Instant::now();
        let k = load(Path::new(&elf), &LoadOptions::default(), &mut r)?;
        report(
            &format!("load vmlinux ELF ({} symbols)", k.table.len()),
            &r,
            t0.elapsed(),
            interval,
            &mut worst,
        );
    }
    if let Some(dir) = std::env::var_os("KLPSYM_BENCH_MODULES") {
        let files = module_files(Path::new(&dir))?;
        let mut r = mk();
        let t0 = Instant::now();
        let mut symbols = 0usize;
        for f in &files {
            symbols += load(f, &LoadOptions::default(), &mut r)?.table.len();
        }
        report(
            &format!("load {} modules ({symbols} symbols)", files.len()),
            &r,
            t0.elapsed(),
            interval,
            &mut worst,
        );
    }
    println!(
        "worst stretch over all operations: {:.1} µs",
        worst.as_secs_f64() * 1e6
    );
    Ok(())
}

/// Every `.ko` file (compressed or not) under `dir`, sorted, so runs load the same sequence.
fn module_files(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                todo.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".ko"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
