//! `klpsym-bench`: the experiments behind klpsym's claims.
//!
//! - `latency`: the seed's experiment (CPU hogging by symbol walks), four strategies side by side.
//! - `resched`: the longest stretch between reschedule points, per operation, on real inputs.
//! - `names`: variant hints for missing names and `search` matching, side by side.
//! - `sweep`: the CPU cost of reschedule points per interval (the default's justification).

mod bound;
mod calls;
mod job;
mod judge;
mod latency;
mod names;
mod plot;
mod resolve;
mod sweep;
mod sys;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use klpsym_core::resched::Resched;
use klpsym_io::{load, LoadOptions};

use crate::job::{Job, SortedIndex, Strategy};

#[derive(Debug, Parser)]
#[command(
    name = "klpsym-bench",
    about = "klpsym's experiments: latency under symbol-resolution jobs, reschedule bounds"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per run: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// The seed's experiment: a 1 ms probe (and a TCP echo client) next to a resolution job,
    /// under the kernel's historic strategies and klpsym's. Writes latency.json and latency.svg.
    Latency {
        /// Symbol source the job resolves against.
        #[arg(long, default_value = "/proc/kallsyms")]
        kernel: PathBuf,
        /// Lookups in the generated patch.
        #[arg(long, default_value_t = 20_000)]
        lookups: usize,
        /// How often the 5.17 strategy's cond_resched() finds need_resched set (the scheduler
        /// tick), in microseconds.
        #[arg(long, default_value_t = 1000)]
        kernel_tick_us: u64,
        /// Output directory for latency.json and latency.svg.
        #[arg(long, default_value = "target/bench-latency")]
        out: PathBuf,
        /// Only this setting: fifo or async.
        #[arg(long)]
        setting: Option<String>,
    },
    /// Resolve a generated patch (klp relocations + replaced functions over vmlinux and 20
    /// modules) with klpsym and with the kernel's historic strategies, side by side.
    Resolve {
        /// Symbol source (its vmlinux part is used; 20 modules are added).
        #[arg(long, default_value = "/proc/kallsyms")]
        kernel: PathBuf,
        /// klp relocation symbols in the patch.
        #[arg(long, default_value_t = 10_000)]
        relocs: usize,
        /// Replaced functions in the patch.
        #[arg(long, default_value_t = 1_000)]
        funcs: usize,
        /// Time only klpsym's lookups, over N passes, and print the fastest and the median
        /// pass per lookup: the figure that compares two builds of the core lookup (run them
        /// in turn, several times; the other strategies take seconds).
        #[arg(long, value_name = "N")]
        klpsym_only: Option<usize>,
    },
    /// The reschedule bound, judged: every operation (each loader on real inputs, the index
    /// builds, queries, a large patch) runs several times with every driver instrumented,
    /// helper threads' included, and every run is judged (docs/performance.md, "The bound,
    /// judged"); exits 2 when an operation is over the bound, 3 when nothing is over but an
    /// operation could not be judged at the bound (the machine too noisy, or unfit: its fresh
    /// pages alone take stretches past the bound; then only gross overruns are judged).
    Resched {
        /// A saved kallsyms (text): loaded, and the table of the index, query and patch
        /// operations. /proc/kallsyms by default.
        #[arg(long, default_value = "/proc/kallsyms")]
        kernel: PathBuf,
        /// The live kallsyms to load, required (default: /proc/kallsyms when it can be read
        /// and is not --kernel).
        #[arg(long)]
        live: Option<PathBuf>,
        /// Do not load the live kallsyms.
        #[arg(long, conflicts_with = "live")]
        no_live: bool,
        /// A kernel image (vmlinuz) to load.
        #[arg(long)]
        image: Option<PathBuf>,
        /// A stripped vmlinux ELF (the image package's) to load.
        #[arg(long)]
        vmlinux: Option<PathBuf>,
        /// A vmlinux with debug info (the -dbg package's) to load.
        #[arg(long)]
        debug_vmlinux: Option<PathBuf>,
        /// An image package (.deb, .rpm) to load; also opened in a folder with --dbg-deb.
        #[arg(long)]
        image_deb: Option<PathBuf>,
        /// A -dbg package, opened in a folder with --image-deb as the library opens a folder.
        #[arg(long)]
        dbg_deb: Option<PathBuf>,
        /// A module tree: scanned, every .ko under it loaded, and given with the folder.
        #[arg(long)]
        modules: Option<PathBuf>,
        /// The interval under test, in microseconds.
        #[arg(long, default_value_t = 50)]
        interval_us: u64,
        /// The bound every stretch must hold, in microseconds.
        #[arg(long, default_value_t = 100)]
        bound_us: u64,
        /// The most noise allowance a run may get, in microseconds: a run whose calibration
        /// shows more jitter is noisy, not judged.
        #[arg(long, default_value_t = 50)]
        cap_us: u64,
        /// Judged runs per operation (at least 2).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Judged runs added, at most, for an overrun seen in one run only.
        #[arg(long, default_value_t = 3)]
        extra_runs: usize,
        /// The threshold, in microseconds, on a machine unfit to judge the bound (a probe's
        /// median first-touch stretch over the bound): only overruns past it are judged there.
        #[arg(long, default_value_t = 2000)]
        gross_us: u64,
        /// Noisy runs redone per operation before it fails as too noisy to judge.
        #[arg(long, default_value_t = 4)]
        noisy_retries: usize,
        /// The compute calibration before each run, in milliseconds.
        #[arg(long, default_value_t = 200)]
        calibrate_ms: u64,
        /// Only the operations whose name holds this text (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Points call sched_yield (default: points do nothing, the stretches are the same).
        #[arg(long)]
        yield_cpu: bool,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Hints for names missing everywhere (compiler-made variants) through the stem index,
    /// against a walk per name and one pass over the table; `search` against grep.
    Names {
        /// Symbol source.
        #[arg(long, default_value = "/proc/kallsyms")]
        kernel: PathBuf,
        /// Missing names in the generated patch.
        #[arg(long, default_value_t = 21_000)]
        missing: usize,
        /// Runs (medians are reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
    },
    /// The calls the Python package's benchmark makes (python/bench.py), through the Rust
    /// library: a batch of addresses symbolized, a patch checked.
    Calls {
        /// Kernel source (an image, a package...).
        #[arg(long)]
        kernel: PathBuf,
        /// A livepatch module to check.
        #[arg(long)]
        patch: PathBuf,
        /// Addresses in the batch.
        #[arg(long, default_value_t = 100_000)]
        addresses: usize,
        /// Rounds.
        #[arg(long, default_value_t = 7)]
        runs: usize,
    },
    /// The CPU cost of reschedule points per interval (10-200 µs): the measurement behind the
    /// default interval.
    Sweep {
        /// Symbol source (text).
        #[arg(long, default_value = "/proc/kallsyms")]
        kernel: PathBuf,
        /// Runs per interval and policy (interleaved; medians are reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
}

fn main() -> std::process::ExitCode {
    klpsym_io::bounded_malloc();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Latency {
            kernel,
            lookups,
            kernel_tick_us,
            out,
            setting,
        } => run_latency(
            &kernel,
            lookups,
            Duration::from_micros(kernel_tick_us),
            &out,
            setting.as_deref(),
        ),
        Cmd::Resolve {
            kernel,
            relocs,
            funcs,
            klpsym_only,
        } => resolve::run(&kernel, relocs, funcs, klpsym_only),
        Cmd::Resched {
            kernel,
            live,
            no_live,
            image,
            vmlinux,
            debug_vmlinux,
            image_deb,
            dbg_deb,
            modules,
            interval_us,
            bound_us,
            cap_us,
            runs,
            extra_runs,
            noisy_retries,
            gross_us,
            calibrate_ms,
            only,
            yield_cpu,
            json,
        } => bound::run(bound::BoundArgs {
            kernel,
            live,
            no_live,
            image,
            vmlinux,
            debug_vmlinux,
            image_deb,
            dbg_deb,
            modules,
            interval: Duration::from_micros(interval_us),
            bound: Duration::from_micros(bound_us),
            cap: Duration::from_micros(cap_us),
            runs,
            extra_runs,
            noisy_retries,
            gross: Duration::from_micros(gross_us),
            calibrate: Duration::from_millis(calibrate_ms),
            policy_yield: yield_cpu,
            only,
        })
        .and_then(|(results, verdict)| {
            if let Some(p) = json {
                std::fs::write(&p, serde_json::to_string_pretty(&results)?)?;
            }
            match verdict {
                bound::Verdict::Within => Ok(()),
                bound::Verdict::Over(what) => Err(format!("not within the bound: {what}").into()),
                bound::Verdict::NotJudged(what) => {
                    eprintln!("klpsym-bench: not judged at the bound: {what}");
                    Err(NotJudged.into())
                }
            }
        }),
        Cmd::Names {
            kernel,
            missing,
            reps,
        } => names::run(&kernel, missing, reps),
        Cmd::Sweep { kernel, runs } => sweep::sweep(&kernel, runs),
        Cmd::Calls {
            kernel,
            patch,
            addresses,
            runs,
        } => calls::run(&kernel, &patch, addresses, runs),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.is::<NotJudged>() => std::process::ExitCode::from(3),
        Err(e) => {
            eprintln!("klpsym-bench: error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `resched`'s outcome when nothing was over but not everything was judged at the bound.
#[derive(Debug)]
struct NotJudged;

impl std::fmt::Display for NotJudged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not judged at the bound")
    }
}

impl std::error::Error for NotJudged {}

fn run_latency(
    kernel: &std::path::Path,
    lookups: usize,
    tick: Duration,
    out: &std::path::Path,
    only: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let k = load(kernel, &LoadOptions::default(), &mut Resched::none())?;
    if k.table.addresses_hidden() {
        return Err(format!(
            "{}: addresses are hidden (kptr_restrict); run as root",
            kernel.display()
        )
        .into());
    }
    k.table.build_indexes(&mut Resched::none())?;
    let sorted = SortedIndex::build(&k.table);
    let job = Job::generate(&k.table, lookups);
    eprintln!(
        "job: {} lookups against {} ({} symbols)",
        job.lookups.len(),
        kernel.display(),
        k.table.len()
    );
    if let Some((rt, period)) = sys::rt_throttling() {
        eprintln!("RT throttling: SCHED_FIFO tasks get {} ms per {} ms; a longer job is throttled, and the probe (also FIFO) with it", rt.as_millis(), period.as_millis());
    }
    let mut results = Vec::new();
    let fifo_ok = only.is_none_or(|s| s == "fifo");
    if fifo_ok {
        for s in Strategy::ALL {
            match latency::run_fifo(&k.table, &sorted, &job, s, tick) {
                Ok(r) => results.push(r),
                Err(e) => {
                    eprintln!("setting (a) needs SCHED_FIFO (root / CAP_SYS_NICE): {e}; running setting (b) only");
                    break;
                }
            }
            eprintln!("  fifo  {:<42} done", s.label());
        }
    }
    if only.is_none_or(|s| s == "async") {
        for s in Strategy::ALL {
            results.push(latency::run_async_echo(&k.table, &sorted, &job, s, tick)?);
            eprintln!("  async {:<42} done", s.label());
        }
    }
    println!(
        "{:<12} {:<42} {:>10} {:>9} {:>10} {:>10} {:>11}",
        "setting", "strategy", "job ms", "resolved", "p50 µs", "p99 µs", "max µs"
    );
    for r in &results {
        println!(
            "{:<12} {:<42} {:>10.1} {:>9} {:>10.1} {:>10.1} {:>11.1}",
            r.setting,
            r.strategy.label(),
            r.job_ms,
            r.resolved,
            r.lateness.p50_us,
            r.lateness.p99_us,
            r.lateness.max_us
        );
        if r.resolved != job.lookups.len() {
            return Err(format!(
                "{:?} resolved {} of {} lookups",
                r.strategy,
                r.resolved,
                job.lookups.len()
            )
            .into());
        }
    }
    std::fs::create_dir_all(out)?;
    let json = serde_json::json!({
        "kernel": kernel.display().to_string(),
        "symbols": k.table.len(),
        "lookups": job.lookups.len(),
        "kernel_tick_us": tick.as_micros() as u64,
        "results": results,
    });
    std::fs::write(
        out.join("latency.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    let title = format!(
        "{} lookups against {} symbols: latency next to the job",
        job.lookups.len(),
        k.table.len()
    );
    std::fs::write(out.join("latency.svg"), plot::svg(&results, &title))?;
    eprintln!("wrote {}/latency.json and latency.svg", out.display());
    Ok(())
}
