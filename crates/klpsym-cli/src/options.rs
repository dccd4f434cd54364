//! Command-line options as the library's options, and opening what they name: the only place
//! that knows both.

use std::sync::Arc;

use klpsym::{CacheDir, KernelFailure, Kernels, Note, Options, Progress, Queries};

use crate::cli::{SourceArgs, YesNo};
use crate::output::CliError;

impl SourceArgs {
    /// The library's options for these arguments, for a verb asking `queries`.
    pub fn options(&self, queries: Queries) -> Options {
        let mut o = Options::new()
            .cache(if self.no_cache {
                CacheDir::Off
            } else {
                self.cache_dir
                    .clone()
                    .map_or(CacheDir::Default, CacheDir::At)
            })
            .cache_max_bytes(self.cache_max_size)
            .yield_cpu(self.yield_cpu)
            .queries(queries);
        o.modules = self.modules.clone();
        o.loaded = self.loaded.clone();
        o.place_from = self.place_from.clone();
        o.debug_vmlinux = self.debug_vmlinux.clone();
        o.kallsyms_all = self.kallsyms_all.map(|v| v == YesNo::Y);
        o.kernel_version = self.kernel_version;
        o.max_input_size = self.max_input_size;
        o.max_decompressed_size = self.max_decompressed_size;
        o.interval = std::time::Duration::from_micros(self.resched_us);
        o.progress = progress_bar();
        o
    }
}

/// A progress bar on a terminal for opening many kernels.
fn progress_bar() -> Option<klpsym::ProgressFn> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::hidden();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} loading kernels [{bar:30}] {pos}/{len} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(Arc::new(move |p: &Progress| match p {
        Progress::Opened { done, total, last } => {
            if bar.is_hidden() {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_length(*total as u64);
            bar.set_position(*done as u64);
            bar.set_message(
                last.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            if done == total {
                bar.finish_and_clear();
            }
        }
    }))
}

/// Prints what the library said, the way the command line says it.
pub fn print_notes(notes: &[Note]) {
    for n in notes {
        // The argument that settles it, named as the command spells it.
        let settle = match n.input {
            Some(klpsym::Input::KernelVersion) => " (--kernel-version X.Y.Z)",
            _ => "",
        };
        let level = match n.level {
            klpsym::Level::Warning => "warning",
            klpsym::Level::Error => "error",
            _ => "note",
        };
        eprintln!("klpsym: {level}: {}{settle}", n.text);
    }
}

/// Prints a kernel that could not be opened or answered (the run then ends with exit 2).
pub fn print_failure(f: &KernelFailure) {
    eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
}

/// What a run said, then the kernels that failed, on stderr.
pub fn print_run(notes: &[Note], failed: &[KernelFailure]) {
    print_notes(notes);
    failed.iter().for_each(print_failure);
}

/// The kernels the arguments name (or the running one), opened as one run's: a source that
/// cannot be opened is a failure row, the others still answer (the library's rule decides
/// when it is the command's error instead).
pub fn open_kernels(args: &SourceArgs, opts: &Options) -> Result<Kernels, CliError> {
    Ok(klpsym::KernelSet::open(&args.kernels, opts)?.into_kernels()?)
}
