//! Cancellation: open a kernel on a busy host with reschedule points that give the CPU away,
//! and stop it from another thread (here after a deadline; a signal handler or a UI would set
//! the same flag). A cancelled operation fails with `ErrorKind::Cancelled` and leaves nothing
//! behind; the next run starts afresh (the cache is written only by a whole read).
//!
//! ```text
//! cargo run -p klpsym --example cancel -- KERNEL [MILLISECONDS]
//! ```
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use klpsym::{CacheDir, ErrorKind, Options};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, rest @ ..] = args.as_slice() else {
        eprintln!("usage: cancel KERNEL [MILLISECONDS]");
        std::process::exit(2);
    };
    let after: u64 = rest.first().and_then(|m| m.parse().ok()).unwrap_or(5);
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = Options::new()
        .cache(CacheDir::Off)
        .yield_cpu(true)
        .cancel_flag(Arc::clone(&cancel));
    let flag = Arc::clone(&cancel);
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(after));
        flag.store(true, Ordering::Relaxed);
    });
    let t0 = Instant::now();
    let outcome = klpsym::open(source, &opts);
    let took = t0.elapsed();
    timer.join().expect("the timer thread");
    match outcome {
        Err(e) if e.kind() == ErrorKind::Cancelled => {
            println!(
                "cancelled after {after} ms: stopped {:.1} ms later",
                (took.as_secs_f64() * 1e3 - after as f64).max(0.0)
            );
            Ok(())
        }
        Err(e) => Err(e),
        Ok(k) => {
            println!(
                "opened before the deadline: {} symbols in {:.1} ms",
                k.table().len(),
                took.as_secs_f64() * 1e3
            );
            Ok(())
        }
    }
}
