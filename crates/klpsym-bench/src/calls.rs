//! The Rust side of the Python package's overhead: the same calls `python/bench.py` makes,
//! through the `klpsym` library directly (a batch symbolized, a patch checked), timed per
//! call. scripts/bench-python.sh runs both in turn and prints the ratios.

use std::path::Path;
use std::time::Instant;

/// `runs` rounds of: `%pS` of `n` addresses spread over vmlinux's text in one batch, and a
/// check of `patch` on the kernel; prints the fastest and the median round of each (µs).
pub fn run(
    kernel: &Path,
    patch: &Path,
    n: usize,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let opts = klpsym::Options::new();
    let k = klpsym::open(kernel, &opts).map_err(|e| e.to_string())?;
    let addrs = spread(&k, n);
    let p = klpsym::Patch::read(patch, &opts).map_err(|e| e.to_string())?;
    let (mut batch, mut check) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let out = k.symbolize_batch(&addrs).map_err(|e| e.to_string())?;
        let found = out
            .iter()
            .filter(|o| matches!(o, klpsym::SymbolizeOutcome::Found(_)))
            .count();
        // What Python hands out: the %pS text of each.
        let texts: Vec<String> = out
            .iter()
            .filter_map(|o| match o {
                klpsym::SymbolizeOutcome::Found(s) => Some(s.to_string()),
                _ => None,
            })
            .collect();
        batch.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(texts.len(), found);
        let t = Instant::now();
        let r = klpsym::check(&p, &[&k], &klpsym::CheckOptions::default())
            .map_err(|e| e.to_string())?;
        let json = serde_json::to_string(&r.results).map_err(|e| e.to_string())?;
        check.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(!json.is_empty());
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2])
    };
    let (bmin, bmed) = stats(&mut batch);
    let (cmin, cmed) = stats(&mut check);
    println!(
        "rust batch_symbolize n={n}: min {bmin:.0} us, median {bmed:.0} us ({:.1} ns/address)",
        bmed * 1e3 / n as f64
    );
    println!("rust check: min {cmin:.0} us, median {cmed:.0} us");
    Ok(())
}

/// `n` addresses spread evenly over vmlinux's `[_stext, _etext)` (deterministic).
pub fn spread(k: &klpsym::Kernel, n: usize) -> Vec<u64> {
    let at = |name: &str| k.table().by_name(name).next().map(|s| s.addr);
    let (lo, hi) = (at("_stext").unwrap_or(0), at("_etext").unwrap_or(u64::MAX));
    let span = hi.saturating_sub(lo).max(1);
    (0..n as u64)
        .map(|i| lo + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % span))
        .collect()
}
