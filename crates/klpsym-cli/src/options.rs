//! Command-line options as the library's options: the only place that knows both.

use std::sync::Arc;

use klpsym::{CacheDir, Kernel, Note, Opened, Options, PointPolicy, Progress, Queries};

use crate::cli::{SourceArgs, YesNo};
use crate::output::CliError;

impl SourceArgs {
    /// The library's options for these arguments, for a verb asking `queries`.
    pub fn options(&self, queries: Queries) -> Options {
        Options {
            cache: if self.no_cache {
                CacheDir::Off
            } else {
                self.cache_dir
                    .clone()
                    .map_or(CacheDir::Default, CacheDir::At)
            },
            modules: self.modules.clone(),
            loaded: match self.loaded.as_deref() {
                // `@FILE`: a /proc/modules-format file, read when the kernels open.
                Some(s) if s.starts_with('@') => vec![s.to_string()],
                Some(s) => s
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(str::to_string)
                    .collect(),
                None => Vec::new(),
            },
            place_from: self.place_from.clone(),
            debug_vmlinux: self.debug_vmlinux.clone(),
            kallsyms_all: self.kallsyms_all.map(|v| v == YesNo::Y),
            max_input_size: self.max_input_size,
            max_decompressed_size: self.max_decompressed_size,
            policy: if self.yield_cpu {
                PointPolicy::Yield
            } else {
                PointPolicy::Nothing
            },
            interval: std::time::Duration::from_micros(self.resched_us),
            cancel: None,
            queries,
            progress: progress_bar(),
            package_modules: false,
        }
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
        eprintln!(
            "klpsym: {}: {}",
            match n.level {
                klpsym::Level::Note => "note",
                klpsym::Level::Warning => "warning",
            },
            n.text
        );
    }
}

/// Opens every kernel the arguments name (or the running one), failing on the first that
/// cannot be opened, and prints what was said while opening.
pub fn open_kernels(args: &SourceArgs, opts: &Options) -> Result<Vec<Kernel>, CliError> {
    let opened = klpsym::open_all(&args.kernels, opts)?;
    let mut out = Vec::with_capacity(opened.len());
    for Opened { kernel, .. } in opened {
        let k = kernel?;
        out.push(k);
    }
    for k in &out {
        print_notes(k.notes());
    }
    Ok(out)
}
