//! Command-line options as the library's options: the only place that knows both.

use std::sync::Arc;

use klpsym::{
    CacheDir, Kernel, KernelFailure, Note, Opened, Options, PointPolicy, Progress, Queries,
};

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
            package_module_names: None,
            debug_packages: true,
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

/// Opens every kernel the arguments name (or the running one) and prints what was said while
/// opening. A kernel that cannot be opened is reported on stderr (`klpsym: error: ...`) and
/// the run ends with exit 2, while the others still answer; when none opens, its error is the
/// command's.
pub fn open_kernels(args: &SourceArgs, opts: &Options) -> Result<Vec<Kernel>, CliError> {
    let (kernels, failed) = open_kernels_each(args, opts)?;
    for f in &failed {
        eprintln!("klpsym: error: {}: {}", f.kernel, f.error);
    }
    Ok(kernels)
}

/// [`open_kernels`] giving the kernels that could not be opened to the caller (check makes a
/// matrix row of each) instead of printing them. Either way the run ends with exit 2.
pub fn open_kernels_each(
    args: &SourceArgs,
    opts: &Options,
) -> Result<(Vec<Kernel>, Vec<KernelFailure>), CliError> {
    let opened = klpsym::open_all(&args.kernels, opts)?;
    let mut out = Vec::with_capacity(opened.len());
    let mut failed = Vec::new();
    let mut first_error = None;
    for Opened { kernel, source } in opened {
        match kernel {
            Ok(k) => out.push(k),
            Err(e) => {
                let text = source.display().to_string();
                // The error names the file already when it is about that file.
                let f = KernelFailure::new(text.clone(), &e);
                let f = if f.error.contains(&text) {
                    KernelFailure {
                        error: f.error.replace(&format!("{text}: "), ""),
                        ..f
                    }
                } else {
                    f
                };
                failed.push(f);
                first_error.get_or_insert(e);
            }
        }
    }
    if out.is_empty() {
        if let Some(e) = first_error {
            return Err(e.into());
        }
    }
    if !failed.is_empty() {
        crate::output::some_input_failed();
    }
    for k in &out {
        print_notes(k.notes());
    }
    Ok((out, failed))
}
