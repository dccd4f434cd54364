//! Command-line options as the library's options, and opening what they name: the only place
//! that knows both.

use std::sync::Arc;

use klpsym::{CacheDir, Kernel, KernelFailure, Note, Options, Progress, Queries};

use crate::cli::{SourceArgs, YesNo};
use crate::output::{some_input_failed, CliError};

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
        eprintln!(
            "klpsym: {}: {}{settle}",
            match n.level {
                klpsym::Level::Note => "note",
                klpsym::Level::Warning => "warning",
            },
            n.text
        );
    }
}

/// Prints a kernel that could not be opened or answered (the run then ends with exit 2).
pub fn print_failure(f: &KernelFailure) {
    some_input_failed();
    eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
}

/// The kernels the arguments name (or the running one), opened, with what was said while
/// opening printed. A kernel that cannot be opened is given back as a failure (its row), the
/// others still answer; when none opens, the first error is the command's.
pub fn open_kernels(
    args: &SourceArgs,
    opts: &Options,
) -> Result<(Vec<Kernel>, Vec<KernelFailure>), CliError> {
    let set = klpsym::KernelSet::open(&args.kernels, opts)?;
    print_notes(set.notes());
    let (kernels, failed, first_error) = set.into_parts();
    if kernels.is_empty() {
        if let Some(e) = first_error {
            return Err(e.into());
        }
    }
    for k in &kernels {
        print_notes(k.notes());
    }
    Ok((kernels, failed))
}

/// Each kernel's answer to `ask`, in order; a kernel that cannot answer is a failure of its
/// own (printed; the run ends with exit 2), the others still answer. When no kernel answers,
/// the first error is the command's.
pub fn answer_each<T>(
    kernels: &[Kernel],
    failed: &mut Vec<KernelFailure>,
    ask: impl Fn(&Kernel) -> klpsym::Result<T>,
) -> Result<Vec<T>, CliError> {
    let mut out = Vec::with_capacity(kernels.len());
    let mut first = None;
    for k in kernels {
        match ask(k) {
            Ok(a) => out.push(a),
            Err(e) if e.is_cancelled() => return Err(e.into()),
            Err(e) => {
                failed.push(KernelFailure::new(k.path().display().to_string(), &e));
                first.get_or_insert(e);
            }
        }
    }
    match first {
        Some(e) if out.is_empty() && failed.len() == 1 => Err(e.into()),
        _ => {
            for f in failed.iter() {
                print_failure(f);
            }
            Ok(out)
        }
    }
}
