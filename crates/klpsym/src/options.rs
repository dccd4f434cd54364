//! How kernels are opened: one options struct for every source and every query.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use klpsym_core::{Resched, ReschedPolicy};

/// Where decoded tables are kept between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// `$XDG_CACHE_HOME/klpsym`, else `~/.cache/klpsym`.
    #[default]
    Default,
    /// This folder.
    At(PathBuf),
    /// No cache: neither read nor written.
    Off,
}

/// How many questions a caller will ask of each kernel it opens: what is worth building
/// while opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Queries {
    /// Many, of every kind: the name and address indexes are built while opening (with
    /// reschedule points), so each query is one index lookup.
    #[default]
    Many,
    /// A few: no index is built; a query walks the table (a few hundred microseconds for
    /// 100,000 symbols, with reschedule points) until an index is asked for.
    Few,
    /// Names only (checking or converting a patch): the name index alone is built.
    Names,
}

/// Which modules of [`Options::modules`] count as loaded ([`Options::loaded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loaded {
    /// These modules, in the order `/proc/kallsyms` lists them (newest first), each spelled
    /// as the kernel spells it or as its file (`nf-tables`, `nf_tables.ko`: the kernel's
    /// `nf_tables`).
    Names(Vec<String>),
    /// The modules a `/proc/modules`-format file lists, in its order (`/proc/modules` for
    /// the running system), read when the kernels open.
    ProcModules(PathBuf),
}

/// What a long operation reports while it runs (opening many kernels).
#[derive(Debug, Clone)]
pub enum Progress {
    /// `done` of `total` kernels are open; `last` is the one just finished.
    Opened {
        /// How many are done.
        done: usize,
        /// How many there are.
        total: usize,
        /// The source just opened.
        last: PathBuf,
    },
}

/// What a reschedule point does (see [`Options::interval`]).
#[derive(Clone, Default)]
pub enum PointPolicy {
    /// Nothing but checking the cancel flag: the work runs in bounded stretches that the
    /// kernel's scheduler can preempt.
    #[default]
    Nothing,
    /// Give the CPU away (`sched_yield(2)`): for hosts where latency-critical work shares
    /// the CPU.
    Yield,
    /// Call this; returning `Err(Cancelled)` stops the operation.
    Callback(Arc<dyn Fn() -> Result<(), klpsym_core::Cancelled> + Send + Sync>),
}

impl std::fmt::Debug for PointPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PointPolicy::Nothing => "Nothing",
            PointPolicy::Yield => "Yield",
            PointPolicy::Callback(_) => "Callback",
        })
    }
}

/// A callback for [`Progress`] reports.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How to open kernels and how to behave while doing it.
///
/// Built with [`Options::new`] and the `with_`/`set` methods; every field has a default that
/// suits a command-line user (a cache in the user's folder, 1 GiB limits, reschedule points
/// every 50 µs of work that do nothing unless asked to yield).
///
/// One process-wide effect: the first operation sets glibc's malloc thresholds once
/// (`mallopt`: big blocks stay separately mapped, so freeing them, which klpsym does in steps,
/// never trims tens of megabytes of heap in one call without a reschedule point; see
/// `klpsym_io::bounded_malloc`). Nothing else in the process changes; on other C libraries it
/// does nothing.
///
/// ```
/// use klpsym::{CacheDir, Options};
/// let opts = Options::new()
///     .cache(CacheDir::Off)
///     .yield_cpu(true)
///     .modules("/lib/modules/6.1.0-57-amd64");
/// assert_eq!(opts.max_input_size, 1 << 30);
/// ```
#[derive(Clone)]
pub struct Options {
    /// Where decoded tables are kept between runs.
    pub cache: CacheDir,
    /// The size the cache folder is kept under when a run writes to it (default
    /// [`klpsym_io::DEFAULT_MAX_BYTES`], 4 GiB): entries whose input is gone or changed go
    /// first, then the least recently used. `u64::MAX`: no bound.
    pub cache_max_bytes: u64,
    /// One kernel's modules, from any number of places at once: a module tree
    /// (`/lib/modules/RELEASE`), a package holding one, a folder of out-of-tree modules (a
    /// driver's, the livepatch itself). Every module in any of them is available by its
    /// kernel name; a name in several is the first place's. None given, for the running
    /// kernel (no source named): `/lib/modules/$(uname -r)` when it exists.
    pub modules: Vec<PathBuf>,
    /// Which modules of [`Options::modules`] count as loaded; `None`: none, the kernel's
    /// source lists its own (a `/proc/kallsyms` lists every loaded module).
    pub loaded: Option<Loaded>,
    /// A `/proc/kallsyms` (live or captured) whose module lines place the loaded modules.
    pub place_from: Option<PathBuf>,
    /// The same build's vmlinux with debug info (a `-dbg` package's): source files and lines.
    pub debug_vmlinux: Option<PathBuf>,
    /// CONFIG_KALLSYMS_ALL of a vmlinux ELF when it cannot be read from the image.
    pub kallsyms_all: Option<bool>,
    /// The kernel version whose rules apply, with its stable sublevel where a stable series
    /// took a change (`6.1.192`): for every answer that depends on it (the module symbol
    /// sizes of `%pS`, a check's or conversion's rules). Default: the source's banner, else
    /// a package's name, else a pasted trace's own header line; when nothing tells it, an
    /// answer that depends on it says which rule it assumed.
    pub kernel_version: Option<crate::KernelVersion>,
    /// Refuse inputs larger than this many bytes.
    pub max_input_size: u64,
    /// Refuse to decompress more than this many bytes.
    pub max_decompressed_size: u64,
    /// What a reschedule point does.
    pub policy: PointPolicy,
    /// Work between reschedule points.
    pub interval: Duration,
    /// Set to true to cancel what runs: the next reschedule point returns
    /// [`crate::ErrorKind::Cancelled`].
    pub cancel: Option<Arc<AtomicBool>>,
    /// What opening builds (see [`Queries`]).
    pub queries: Queries,
    /// Called as kernels open.
    pub progress: Option<ProgressFn>,
    /// Measures the work between reschedule points: every driver these options make, and
    /// every helper thread's, records its stretches here (thread CPU time by the recorder's
    /// clock; see [`Recorder`](klpsym_core::Recorder)). For measurements (`klpsym-bench
    /// resched`): a clock read per clock check.
    pub recorder: Option<klpsym_core::Recorder>,
    /// The modules of a patch's objects, read from a package when it is opened (see
    /// [`Options::for_patch`]); a check reads them itself when they were not.
    pub(crate) package_module_names: Option<Vec<String>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("cache", &self.cache)
            .field("cache_max_bytes", &self.cache_max_bytes)
            .field("modules", &self.modules)
            .field("loaded", &self.loaded)
            .field("place_from", &self.place_from)
            .field("debug_vmlinux", &self.debug_vmlinux)
            .field("kallsyms_all", &self.kallsyms_all)
            .field("kernel_version", &self.kernel_version)
            .field("max_input_size", &self.max_input_size)
            .field("max_decompressed_size", &self.max_decompressed_size)
            .field("policy", &self.policy)
            .field("interval", &self.interval)
            .field("cancel", &self.cancel.is_some())
            .field("queries", &self.queries)
            .field("progress", &self.progress.is_some())
            .field("recorder", &self.recorder.is_some())
            .field("package_module_names", &self.package_module_names)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache: CacheDir::Default,
            cache_max_bytes: defaults::CACHE_MAX_BYTES,
            modules: Vec::new(),
            loaded: None,
            place_from: None,
            debug_vmlinux: None,
            kallsyms_all: None,
            kernel_version: None,
            max_input_size: defaults::MAX_INPUT_SIZE,
            max_decompressed_size: defaults::MAX_DECOMPRESSED_SIZE,
            policy: PointPolicy::Nothing,
            interval: Duration::from_micros(defaults::RESCHED_INTERVAL_US),
            cancel: None,
            queries: Queries::Many,
            progress: None,
            recorder: None,
            package_module_names: None,
        }
    }
}

impl Options {
    /// The defaults (see [`Options`]).
    pub fn new() -> Options {
        Options::default()
    }

    /// Sets where decoded tables are kept.
    pub fn cache(mut self, cache: CacheDir) -> Options {
        self.cache = cache;
        self
    }

    /// Sets the size the cache folder is kept under (see [`Options::cache_max_bytes`]).
    pub fn cache_max_bytes(mut self, bytes: u64) -> Options {
        self.cache_max_bytes = bytes;
        self
    }

    /// Adds a place modules are read from (a module tree, a package, a folder of
    /// out-of-tree modules; see [`Options::modules`]).
    pub fn modules(mut self, dir: impl Into<PathBuf>) -> Options {
        self.modules.push(dir.into());
        self
    }

    /// Says which modules of [`Options::modules`] count as loaded (see [`Options::loaded`]).
    pub fn loaded(mut self, loaded: Loaded) -> Options {
        self.loaded = Some(loaded);
        self
    }

    /// Sets the debug vmlinux.
    pub fn debug_vmlinux(mut self, path: impl Into<PathBuf>) -> Options {
        self.debug_vmlinux = Some(path.into());
        self
    }

    /// States the kernel version whose rules apply (see [`Options::kernel_version`]).
    pub fn kernel_version(mut self, v: crate::KernelVersion) -> Options {
        self.kernel_version = Some(v);
        self
    }

    /// Makes every reschedule point give the CPU away (`sched_yield`): for busy hosts.
    pub fn yield_cpu(mut self, yes: bool) -> Options {
        self.policy = if yes {
            PointPolicy::Yield
        } else {
            PointPolicy::Nothing
        };
        self
    }

    /// Sets what opening builds.
    pub fn queries(mut self, q: Queries) -> Options {
        self.queries = q;
        self
    }

    /// Sets the cancel flag.
    pub fn cancel_flag(mut self, flag: Arc<AtomicBool>) -> Options {
        self.cancel = Some(flag);
        self
    }

    /// A reschedule-point driver with these options' policy, interval and cancel flag.
    pub fn resched(&self) -> Resched {
        // Every operation starts here: big blocks are freed in steps only with fixed malloc
        // thresholds (see the crate docs), set once for the process.
        static MALLOC: std::sync::Once = std::sync::Once::new();
        MALLOC.call_once(klpsym_io::bounded_malloc);
        let policy = match &self.policy {
            PointPolicy::Nothing => ReschedPolicy::Nothing,
            PointPolicy::Yield => ReschedPolicy::Yield,
            PointPolicy::Callback(f) => {
                let f = Arc::clone(f);
                ReschedPolicy::Callback(Box::new(move || f()))
            }
        };
        let mut r = Resched::new(policy).with_interval(self.interval);
        if let Some(c) = &self.cancel {
            r = r.with_cancel_flag(Arc::clone(c));
        }
        if let Some(rec) = &self.recorder {
            r = r.with_recorder(rec.clone());
        }
        r
    }

    /// The cache folder, when one is in use.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        match &self.cache {
            CacheDir::Off => None,
            CacheDir::At(d) => Some(d.clone()),
            CacheDir::Default => klpsym_io::Cache::default_dir(),
        }
    }

    /// The I/O layer's options.
    /// The modules [`Options::loaded`] names, as the kernel spells them, in `/proc/kallsyms`
    /// order (a `/proc/modules`-format file is read now); empty when none are named.
    pub(crate) fn loaded_names(&self) -> crate::Result<Vec<String>> {
        Ok(match &self.loaded {
            None => Vec::new(),
            Some(Loaded::Names(list)) => list
                .iter()
                .map(|n| klpsym_core::normalize_module_name(n))
                .collect(),
            Some(Loaded::ProcModules(file)) => klpsym_io::LoadedSpec::ProcModules(file.clone())
                .names()
                .map_err(|e| {
                    crate::Error::from(e)
                        .context("loaded modules")
                        .about(crate::error::Input::LoadedModules)
                })?,
        })
    }

    pub(crate) fn load_options(&self) -> klpsym_io::LoadOptions {
        klpsym_io::LoadOptions {
            max_input_size: self.max_input_size,
            max_decompressed_size: self.max_decompressed_size,
            kallsyms_all: self.kallsyms_all,
            package_modules: self.package_module_names.is_some(),
            package_module_names: self.package_module_names.clone().filter(|n| !n.is_empty()),
            cache: self.cache_dir().map(|dir| klpsym_io::Cache {
                dir,
                max_bytes: self.cache_max_bytes,
            }),
            export_facts: self.queries != Queries::Few,
            debug_packages: true,
        }
    }
}

/// The defaults every front end states (the command's flags, Python's keywords), written once:
/// [`Options::new`], [`crate::CheckOptions::default`] and [`crate::SearchQuery::new`] use them.
pub mod defaults {
    /// [`super::Options::max_input_size`]: 1 GiB.
    pub const MAX_INPUT_SIZE: u64 = 1 << 30;
    /// [`super::Options::max_decompressed_size`]: 1 GiB.
    pub const MAX_DECOMPRESSED_SIZE: u64 = 1 << 30;
    /// [`super::Options::interval`] in microseconds: 50.
    pub const RESCHED_INTERVAL_US: u64 = 50;
    /// [`super::Options::cache_max_bytes`]: 4 GiB.
    pub const CACHE_MAX_BYTES: u64 = klpsym_io::DEFAULT_MAX_BYTES;
    /// [`crate::CheckOptions::hold_warn_ms`]: 100 ms.
    pub const HOLD_WARN_MS: f64 = 100.0;
    /// [`crate::SearchQuery::limit`]: 200 names listed.
    pub const SEARCH_LIMIT: usize = 200;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_names_are_the_kernel_s_spelling_or_a_proc_modules_file_s() {
        assert!(Options::new().loaded_names().unwrap().is_empty());
        let named = Options::new().loaded(Loaded::Names(vec![
            "nf-tables".into(),
            "dummy.ko".into(),
            "/lib/modules/x/kernel/a-b.ko.xz".into(),
        ]));
        assert_eq!(named.loaded_names().unwrap(), ["nf_tables", "dummy", "a_b"]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("modules");
        std::fs::write(
            &file,
            "8021q 40960 0 - Live 0xffffffffc0300000\ngarp 20480 1 8021q, Live 0xffffffffc0290000\n",
        )
        .unwrap();
        let listed = Options::new().loaded(Loaded::ProcModules(file.clone()));
        assert_eq!(listed.loaded_names().unwrap(), ["8021q", "garp"]);
        std::fs::write(&file, "ffffffff81000000 T _text\n").unwrap();
        let e = listed.loaded_names().unwrap_err();
        assert_eq!(e.input(), Some(crate::Input::LoadedModules), "{e}");
        assert!(e.to_string().contains("loaded modules"), "{e}");
    }
}
