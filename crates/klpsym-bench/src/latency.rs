//! The seed's experiment: how late does a 1 ms periodic probe run while a symbol-resolution job
//! runs on the same CPU, under each strategy?
//!
//! (a) FIFO: job and probe both SCHED_FIFO at one priority, pinned to one CPU — the kernel's
//!     situation: the probe runs only when the job gives the CPU away.
//! (b) async: one executor thread runs a loopback TCP echo server and the job as tasks; a
//!     client on another CPU sends a request every millisecond and measures the round trip.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use klpsym_core::SymbolTable;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::job::{run_async, run_sync, Job, SortedIndex, Strategy};
use crate::sys;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Percentiles {
    pub samples: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Percentiles {
    pub fn of(samples_ns: &mut [u64]) -> Percentiles {
        if samples_ns.is_empty() {
            return Percentiles::default();
        }
        samples_ns.sort_unstable();
        let at =
            |q: f64| samples_ns[((samples_ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
        Percentiles {
            samples: samples_ns.len(),
            p50_us: at(0.5),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }
}

/// One strategy's run in one setting.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub strategy: Strategy,
    pub setting: &'static str,
    pub job_ms: f64,
    pub resolved: usize,
    pub lateness: Percentiles,
    /// Every lateness sample (ns), for the plot.
    #[serde(skip)]
    pub raw_ns: Vec<u64>,
}

/// Setting (a). Errors when SCHED_FIFO is not allowed (not root).
pub fn run_fifo(
    t: &SymbolTable,
    sorted: &SortedIndex<'_>,
    job: &Job,
    strategy: Strategy,
    tick: Duration,
) -> std::io::Result<RunResult> {
    let done = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let probe = scope.spawn(|| -> std::io::Result<Vec<u64>> {
            sys::pin_to_cpu(0)?;
            sys::set_fifo(10)?;
            let mut samples = Vec::new();
            let period = 1_000_000u64;
            let mut next = sys::now_ns() + period;
            started.store(true, Ordering::Release);
            loop {
                sys::sleep_until(next);
                let now = sys::now_ns();
                samples.push(now.saturating_sub(next));
                if done.load(Ordering::Acquire) {
                    break;
                }
                // Skip the periods missed while blocked: one sample per wake-up.
                next += period;
                while next <= now {
                    next += period;
                }
            }
            let _ = sys::set_normal();
            Ok(samples)
        });
        while !started.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let job_thread = scope.spawn(|| -> std::io::Result<(f64, usize)> {
            sys::pin_to_cpu(0)?;
            sys::set_fifo(10)?;
            let t0 = Instant::now();
            let resolved = run_sync(t, sorted, job, strategy, tick);
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let _ = sys::set_normal();
            done.store(true, Ordering::Release);
            Ok((ms, resolved))
        });
        let job_res = job_thread.join().expect("job thread");
        if job_res.is_err() {
            done.store(true, Ordering::Release);
        }
        let (job_ms, resolved) = job_res?;
        let mut raw = probe.join().expect("probe thread")?;
        let lateness = Percentiles::of(&mut raw);
        Ok(RunResult {
            strategy,
            setting: "fifo",
            job_ms,
            resolved,
            lateness,
            raw_ns: raw,
        })
    })
}

/// Setting (b): executor thread on CPU 0 with the echo server and the job; client on CPU 1.
pub fn run_async_echo(
    t: &SymbolTable,
    sorted: &SortedIndex<'_>,
    job: &Job,
    strategy: Strategy,
    tick: Duration,
) -> std::io::Result<RunResult> {
    let done = Arc::new(AtomicBool::new(false));
    let (port_tx, port_rx) = mpsc::channel::<u16>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let done_exec = done.clone();
        let exec = scope.spawn(move || -> std::io::Result<(f64, usize)> {
            let _ = sys::pin_to_cpu(0);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()?;
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                port_tx.send(listener.local_addr()?.port()).ok();
                tokio::spawn(async move {
                    while let Ok((mut sock, _)) = listener.accept().await {
                        let _ = sock.set_nodelay(true);
                        tokio::spawn(async move {
                            let mut buf = [0u8; 16];
                            while sock.read_exact(&mut buf).await.is_ok() {
                                if sock.write_all(&buf).await.is_err() {
                                    break;
                                }
                            }
                        });
                    }
                });
                // Let the client connect and warm up, then run the job on this thread.
                loop {
                    if go_rx.try_recv().is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let t0 = Instant::now();
                let resolved = run_async(t, sorted, job, strategy, tick).await;
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                done_exec.store(true, Ordering::Release);
                // Keep serving until the client has seen `done`.
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, std::io::Error>((ms, resolved))
            })
        });
        let port = port_rx
            .recv()
            .map_err(|_| std::io::Error::other("echo server did not start"))?;
        let _ = sys::pin_to_cpu(1);
        let mut s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 16];
        for _ in 0..20 {
            s.write_all(&buf)?;
            s.read_exact(&mut buf)?;
        }
        go_tx.send(()).ok();
        let mut raw = Vec::new();
        let period = 1_000_000u64;
        let mut next = sys::now_ns();
        while !done.load(Ordering::Acquire) {
            sys::sleep_until(next);
            let t0 = sys::now_ns();
            s.write_all(&buf)?;
            s.read_exact(&mut buf)?;
            let now = sys::now_ns();
            raw.push(now - t0);
            next += period;
            while next <= now {
                next += period;
            }
        }
        let (job_ms, resolved) = exec.join().expect("executor thread")?;
        let lateness = Percentiles::of(&mut raw);
        Ok(RunResult {
            strategy,
            setting: "async_echo",
            job_ms,
            resolved,
            lateness,
            raw_ns: raw,
        })
    })
}
