//! `klpsym` for Python: the library's kernels, queries, checks and fleets as Python objects.
//! Addresses are ints; kinds are strings (constants in `klpsym/__init__.py`); errors are
//! exceptions by the library's error kind; long work runs without the GIL and stops on
//! Ctrl-C (KeyboardInterrupt).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

mod answers;
mod copies;
mod errors;
mod kinds;

use answers::*;
use errors::{py_err, Interrupt};

/// How often a reschedule point asks Python whether Ctrl-C was pressed (points come every
/// 50 µs of work: about every 50 ms).
const SIGNAL_EVERY: usize = 1000;

/// The library's options for these keyword arguments, with reschedule points that watch for
/// Ctrl-C while the GIL is released.
fn options(
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    modules: Option<PathBuf>,
    debug_vmlinux: Option<PathBuf>,
    yield_cpu: bool,
    interrupt: &Interrupt,
) -> klpsym::Options {
    let cache = match (no_cache, cache_dir) {
        (true, _) => klpsym::CacheDir::Off,
        (false, Some(d)) => klpsym::CacheDir::At(d),
        (false, None) => klpsym::CacheDir::Default,
    };
    let mut o = klpsym::Options::new().cache(cache).yield_cpu(yield_cpu);
    o.modules = modules.into_iter().collect();
    o.debug_vmlinux = debug_vmlinux;
    o.cancel = Some(Arc::clone(&interrupt.cancel));
    let seen = Arc::new(AtomicUsize::new(0));
    let caught = interrupt.clone();
    let yielding = yield_cpu;
    o.policy = klpsym::PointPolicy::Callback(Arc::new(move || {
        if yielding {
            std::thread::yield_now();
        }
        if !seen
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SIGNAL_EVERY)
        {
            return Ok(());
        }
        // On Python's main thread this runs the handlers of signals that came; elsewhere
        // CPython answers that none came (a watched call's thread asks instead).
        Python::attach(|py| match py.check_signals() {
            Ok(()) => Ok(()),
            Err(e) => {
                caught.caught(e);
                Err(klpsym::Cancelled)
            }
        })
    }));
    o
}

/// A kernel: its symbols with the kernel's lookup semantics.
#[pyclass(module = "klpsym", frozen)]
pub struct Kernel {
    pub(crate) inner: Arc<klpsym::Kernel>,
    pub(crate) interrupt: Interrupt,
}

#[pymethods]
impl Kernel {
    /// The source it was opened from.
    #[getter]
    fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// What kind of source: `kallsyms`, `system_map`, `vmlinux_elf`, `kernel_image`, `module`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// The kernel release (`6.1.0-57-amd64`), when the source tells it.
    #[getter]
    fn release(&self) -> Option<String> {
        self.inner.release()
    }

    /// The GNU build id (hex), when the source has one.
    #[getter]
    fn build_id(&self) -> Option<String> {
        self.inner.facts().build_id.clone()
    }

    /// `x86_64`, `aarch64`, when the source tells.
    #[getter]
    fn arch(&self) -> Option<String> {
        self.inner.facts().arch.clone()
    }

    /// What was said while opening it: `(level, text)` pairs.
    #[getter]
    fn notes(&self) -> Vec<(String, String)> {
        notes(self.inner.notes())
    }

    fn __len__(&self) -> usize {
        self.inner.table().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<klpsym.Kernel {} ({}, {} symbols)>",
            self.inner.path().display(),
            self.inner
                .release()
                .unwrap_or_else(|| "release unknown".into()),
            self.inner.table().len()
        )
    }

    /// Every definition of `name` with its position (`old_sympos`), address, type, size,
    /// object and source file: a list of Candidate.
    #[pyo3(signature = (name, *, object=None, file=None))]
    fn sympos(
        &self,
        py: Python<'_>,
        name: &str,
        object: Option<&str>,
        file: Option<&str>,
    ) -> PyResult<Vec<Candidate>> {
        let k = Arc::clone(&self.inner);
        let d = self.interrupt.run(py, || k.sympos(name, object, file))?;
        // A path the kernel knows by base name only is not confirmed: said, as the command
        // says it (and exits 1).
        if let (true, Some(note)) = (d.base_name_only, d.file_note.as_deref()) {
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            let message = std::ffi::CString::new(note).unwrap_or_default();
            PyErr::warn(py, &category, &message, 1)?;
        }
        Ok(d.candidates.into_iter().map(Candidate::from).collect())
    }

    /// `klp_find_object_symbol(object, name, sympos)` as this kernel runs it (or the
    /// definition in source file `file`): a Lookup.
    #[pyo3(signature = (name, *, sympos=0, object=None, file=None))]
    fn lookup(
        &self,
        py: Python<'_>,
        name: &str,
        sympos: u64,
        object: Option<&str>,
        file: Option<&str>,
    ) -> PyResult<Lookup> {
        let k = Arc::clone(&self.inner);
        let q = klpsym::LookupQuery {
            name,
            object,
            sympos,
            file,
        };
        let a = self.interrupt.run(py, || k.lookup(&q))?;
        Ok(Lookup::from(a))
    }

    /// Names matching `pattern` (a glob, or a substring without glob characters): a list of
    /// NameMatch, at most `limit`.
    #[pyo3(signature = (pattern, *, object=None, limit=200, duplicates=false))]
    fn search(
        &self,
        py: Python<'_>,
        pattern: &str,
        object: Option<&str>,
        limit: usize,
        duplicates: bool,
    ) -> PyResult<Vec<NameMatch>> {
        let p = klpsym::NamePattern::new(pattern)
            .map_err(|e| errors::BadInputError::new_err(format!("pattern '{pattern}': {e}")))?;
        let k = Arc::clone(&self.inner);
        let q = klpsym::SearchQuery {
            object,
            limit,
            duplicates,
            ..klpsym::SearchQuery::new(&p)
        };
        let a = self.interrupt.run(py, || k.search_by(&q))?;
        Ok(a.matches.into_iter().map(NameMatch::from).collect())
    }

    /// Every function named `name` (in source file `file`, in `object`: vmlinux by default)
    /// with every place its code lives, from the kernel's DWARF: a list of Definition, each
    /// with its copies (out of line, clones, inlined into which functions).
    #[pyo3(signature = (name, *, file=None, object=None))]
    fn copies(
        &self,
        py: Python<'_>,
        name: &str,
        file: Option<&str>,
        object: Option<&str>,
    ) -> PyResult<Vec<copies::Definition>> {
        let k = Arc::clone(&self.inner);
        let c = self.interrupt.run(py, || k.copies(name, file, object))?;
        Ok(c.definitions
            .into_iter()
            .map(copies::Definition::from)
            .collect())
    }

    /// `%pS` of `address`: a Symbol, or None where the kernel has no symbol (it prints the
    /// number). `return_address`: as `%pB` (the caller of a call that ends a function).
    #[pyo3(signature = (address, *, return_address=false))]
    fn symbolize(&self, address: u64, return_address: bool) -> Option<Symbol> {
        let o = if return_address {
            self.inner.symbolize_return(address)
        } else {
            self.inner.symbolize(address)
        };
        Symbol::of(&self.inner, &o)
    }

    /// `%pS` of many addresses at once (the batch path): a list of Symbol or None, in order.
    fn symbolize_batch(
        &self,
        py: Python<'_>,
        addresses: Vec<u64>,
    ) -> PyResult<Vec<Option<Symbol>>> {
        let k = Arc::clone(&self.inner);
        self.interrupt.run(py, || {
            let out = k.symbolize_batch(&addresses)?;
            Ok(out.iter().map(|o| Symbol::of(&k, o)).collect())
        })
    }

    /// Whether a vmlinux with DWARF is at hand: a vmlinux with debug info, or an image or
    /// package opened with its `-dbg` package (`open_all([image, dbg])`, `debug_vmlinux=`).
    /// Without it `source_lines` answers `[]` for vmlinux addresses.
    #[getter]
    fn has_line_tables(&self) -> bool {
        self.inner.has_line_tables()
    }

    /// The `file:line` and inline chain of `address` from the kernel's DWARF, as `addr2line
    /// -f -i` (and `klpsym addr`) give them: a list of SourceFrame, innermost first, paths
    /// relative to the source tree. A module address is read from the module's debug file
    /// (its own `.ko` with DWARF, `/usr/lib/debug/lib/modules/RELEASE`, or the kernel's
    /// `-dbg` package). `return_address`: as `%pB` (looked up one byte back, in the call).
    ///
    /// `[]` where the address has no symbol, DWARF does not tell, or no DWARF is at hand
    /// (for vmlinux addresses: `has_line_tables`): for lines, open the kernel with its `-dbg`
    /// package (`klpsym.open_all([image, dbg])`) or a vmlinux with debug info. The first call
    /// reads the DWARF (seconds for a package not in the cache); later calls reuse it.
    #[pyo3(signature = (address, *, return_address=false))]
    fn source_lines(
        &self,
        py: Python<'_>,
        address: u64,
        return_address: bool,
    ) -> PyResult<Vec<SourceFrame>> {
        let mut all = self.source_lines_batch(py, vec![address], return_address)?;
        Ok(all.pop().unwrap_or_default())
    }

    /// `source_lines` of many addresses at once, in order: a list of lists of SourceFrame.
    /// One pass: the modules the addresses name have their debug files found together (one
    /// read of a `-dbg` package for all of them).
    #[pyo3(signature = (addresses, *, return_address=false))]
    fn source_lines_batch(
        &self,
        py: Python<'_>,
        addresses: Vec<u64>,
        return_address: bool,
    ) -> PyResult<Vec<Vec<SourceFrame>>> {
        let k = Arc::clone(&self.inner);
        // Reading DWARF (a package's, cold) is long, and the library's helpers may run it.
        let lines = self
            .interrupt
            .run_watched(py, || source_lines_of(&k, &addresses, return_address))?;
        Ok(lines
            .into_iter()
            .map(|l| l.into_iter().map(SourceFrame::from).collect())
            .collect())
    }

    /// What `%pS` prints for `address`: `name+0xoff/0xsize [module]`, or the number.
    fn describe(&self, address: u64) -> String {
        self.inner
            .describe_address("", address)
            .text
            .unwrap_or_else(|| format!("{address:#x}"))
    }

    /// The addresses `name+offset` stands for (in `module` when given), narrowed by `size`.
    #[pyo3(signature = (name, offset=0, *, size=None, module=None))]
    fn resolve(
        &self,
        name: &str,
        offset: u64,
        size: Option<u64>,
        module: Option<&str>,
    ) -> PyResult<Vec<u64>> {
        let r = self
            .inner
            .resolve_symbol(name, offset, size, module)
            .map_err(py_err)?;
        Ok(r.into_iter().map(|r| r.address).collect())
    }
}

/// The inline chain of each of `addresses` (`return_address`: as `%pB`), as `klpsym addr`
/// gives it: the addresses answered, then their places found in one pass (modules' debug
/// files looked for once for all). Asked for, so a module's debug file is looked for even
/// where the vmlinux has no DWARF (a saved kallsyms with an unstripped `.ko` among its
/// modules); empty lists where none is found.
fn source_lines_of(
    k: &klpsym::Kernel,
    addresses: &[u64],
    return_address: bool,
) -> klpsym::Result<Vec<Vec<klpsym::SourceFrame>>> {
    let mut rs = k.options().resched();
    let mut answers = Vec::with_capacity(addresses.len());
    for &a in addresses {
        rs.tick()?;
        answers.push(if return_address {
            k.describe_return_address("", a)
        } else {
            k.describe_address("", a)
        });
    }
    k.add_source_lines(&mut answers, return_address)?;
    Ok(answers.into_iter().map(|a| a.source).collect())
}

/// The kernel version a caller states (`"6.12.118"`, `"6.1"`): the rules of that version
/// apply where nothing in the kernel's files tells it.
fn stated_version(v: Option<&str>) -> PyResult<Option<klpsym::KernelVersion>> {
    v.map(|v| v.parse::<klpsym::KernelVersion>().map_err(py_err))
        .transpose()
}

/// Opens one kernel: /proc/kallsyms or a copy, System.map, a vmlinux, an image, a module, a
/// package, or a folder of one kernel's packages.
#[pyfunction]
#[pyo3(signature = (source, *, cache_dir=None, no_cache=false, modules=None, debug_vmlinux=None, yield_cpu=false, kernel_version=None))]
#[allow(clippy::too_many_arguments)]
fn open(
    py: Python<'_>,
    source: PathBuf,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    modules: Option<PathBuf>,
    debug_vmlinux: Option<PathBuf>,
    yield_cpu: bool,
    kernel_version: Option<&str>,
) -> PyResult<Kernel> {
    let interrupt = Interrupt::default();
    let mut opts = options(
        cache_dir,
        no_cache,
        modules,
        debug_vmlinux,
        yield_cpu,
        &interrupt,
    );
    opts.kernel_version = stated_version(kernel_version)?;
    let k = interrupt.run_watched(py, || klpsym::open(&source, &opts))?;
    Ok(Kernel {
        inner: Arc::new(k),
        interrupt,
    })
}

/// Opens the running kernel (/proc/kallsyms, /proc/version, /lib/modules/$(uname -r)).
#[pyfunction]
#[pyo3(signature = (*, no_cache=false, yield_cpu=false))]
fn open_running(py: Python<'_>, no_cache: bool, yield_cpu: bool) -> PyResult<Kernel> {
    let interrupt = Interrupt::default();
    let opts = options(None, no_cache, None, None, yield_cpu, &interrupt);
    let k = interrupt.run_watched(py, || klpsym::open_running(&opts))?;
    Ok(Kernel {
        inner: Arc::new(k),
        interrupt,
    })
}

/// `(kernels, failures, notes)`: what [`open_all`] gives Python.
type Opened = (Vec<Kernel>, Vec<Failure>, Vec<(String, String)>);

/// Opens every kernel `sources` name (files, folders, packages): `(kernels, failures)`; one
/// that cannot be opened is a Failure, the others still open. What a folder passed over is
/// in `notes`: `(kernels, failures, notes)`.
#[pyfunction]
#[pyo3(signature = (sources, *, cache_dir=None, no_cache=false, modules=None, yield_cpu=false))]
fn open_all(
    py: Python<'_>,
    sources: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    modules: Option<PathBuf>,
    yield_cpu: bool,
) -> PyResult<Opened> {
    let interrupt = Interrupt::default();
    let opts = options(cache_dir, no_cache, modules, None, yield_cpu, &interrupt);
    let set = interrupt.run_watched(py, || klpsym::KernelSet::open(&sources, &opts))?;
    let said = notes(set.notes());
    let (kernels, failed, _) = set.into_parts();
    let kernels = kernels
        .into_iter()
        .map(|k| Kernel {
            inner: Arc::new(k),
            interrupt: interrupt.clone(),
        })
        .collect();
    Ok((
        kernels,
        failed.into_iter().map(Failure::from).collect(),
        said,
    ))
}

/// A livepatch module, read once.
#[pyclass(module = "klpsym", frozen)]
pub struct Patch {
    inner: Arc<klpsym::Patch>,
}

#[pymethods]
impl Patch {
    /// Reads the module at `path` (`.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Patch> {
        let opts = klpsym::Options::new();
        let p = py
            .detach(|| klpsym::Patch::read(&path, &opts))
            .map_err(py_err)?;
        Ok(Patch { inner: Arc::new(p) })
    }

    /// The file.
    #[getter]
    fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// The objects it patches (`vmlinux`, module names).
    #[getter]
    fn objects(&self) -> Vec<String> {
        self.inner.objects().to_vec()
    }

    /// Its vermagic.
    #[getter]
    fn vermagic(&self) -> Option<String> {
        self.inner.vermagic().map(str::to_string)
    }

    /// The release its vermagic names: the kernel it was built for.
    #[getter]
    fn built_for_release(&self) -> Option<String> {
        self.inner.built_for_release()
    }

    fn __repr__(&self) -> String {
        format!(
            "<klpsym.Patch {} ({})>",
            self.inner.path().display(),
            self.inner.objects().join(", ")
        )
    }
}

/// The check's options from keyword arguments.
fn check_options(
    built_for: Option<PathBuf>,
    force: bool,
    btf: Option<PathBuf>,
) -> klpsym::CheckOptions {
    klpsym::CheckOptions {
        built_for,
        force,
        target: klpsym::TargetOptions {
            btf,
            ..klpsym::TargetOptions::default()
        },
        ..klpsym::CheckOptions::default()
    }
}

/// `section_bases` as the check takes them: a mapping `{name: address}` or `(name, address)`
/// pairs, in order.
fn section_bases_arg(given: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, u64)>> {
    let Some(given) = given else {
        return Ok(Vec::new());
    };
    let pairs = if given.hasattr("items")? {
        given.call_method0("items")?
    } else {
        given.clone()
    };
    let bad = |e: PyErr| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "section_bases: a dict {{section name: address}} or (section name, address) pairs, \
             an address a non-negative int below 2**64 ({e})"
        ))
    };
    pairs
        .try_iter()
        .map_err(bad)?
        .map(|p| p.and_then(|p| p.extract::<(String, u64)>()).map_err(bad))
        .collect()
}

/// What the kernel will do with `patch` on each of `kernels`: a CheckRun (`results`,
/// `failed`, `outcome`). `built_for`: the kernel the patch was built for (bindings are proven
/// against it); `force`: a forced load; `section_bases`: sections of the patch placed at load
/// addresses (`{".text": 0xffffffffc0a00000}`, or pairs), so PC-relative values are exact;
/// `strict`: a check that leaves something open says no (as `klpsym check --strict`).
#[pyfunction]
#[pyo3(signature = (patch, kernels, *, built_for=None, force=false, btf=None, section_bases=None, strict=false))]
#[allow(clippy::too_many_arguments)]
fn check(
    py: Python<'_>,
    patch: &Patch,
    kernels: Vec<Py<Kernel>>,
    built_for: Option<PathBuf>,
    force: bool,
    btf: Option<PathBuf>,
    section_bases: Option<&Bound<'_, PyAny>>,
    strict: bool,
) -> PyResult<CheckRun> {
    let bases = section_bases_arg(section_bases)?;
    let held: Vec<Arc<klpsym::Kernel>> =
        kernels.iter().map(|k| Arc::clone(&k.get().inner)).collect();
    let Some(first) = kernels.first() else {
        return Err(errors::UsageError::new_err(
            "check needs at least one kernel",
        ));
    };
    let interrupt = first.get().interrupt.clone();
    let copts = klpsym::CheckOptions {
        section_bases: bases,
        strict,
        ..check_options(built_for, force, btf)
    };
    let p = Arc::clone(&patch.inner);
    let run = interrupt.run_watched(py, || {
        let refs: Vec<&klpsym::Kernel> = held.iter().map(|k| k.as_ref()).collect();
        klpsym::check(&p, &refs, &copts)
    })?;
    Ok(CheckRun::checked(run, strict))
}

/// How `name`'s definitions differ between two builds (each definition matched by its source
/// file and copy in it).
#[pyfunction]
#[pyo3(signature = (from_kernel, to_kernel, name, *, object="vmlinux"))]
fn drift(from_kernel: &Kernel, to_kernel: &Kernel, name: &str, object: &str) -> PyResult<Drift> {
    let d = klpsym::drift(&from_kernel.inner, &to_kernel.inner, name, object).map_err(py_err)?;
    Ok(Drift::from(d))
}

/// A patch checked on a fleet, one kernel at a time (`jobs` at once): iterate for a
/// CheckResult or a Failure per kernel, in the order kernels finish.
#[pyclass(module = "klpsym")]
pub struct FleetIter {
    inner: Mutex<Option<klpsym::FleetChecks>>,
    interrupt: Interrupt,
    strict: bool,
}

#[pymethods]
impl FleetIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| errors::Error::new_err("fleet poisoned"))?;
        let Some(it) = guard.as_mut() else {
            return Ok(None);
        };
        // The jobs run on the fleet's own threads: this thread watches for Ctrl-C while it
        // waits for the next kernel, and a signal cancels every job.
        let next = self.interrupt.run_watched(py, || it.next().transpose());
        match next {
            Ok(None) => {
                *guard = None;
                Ok(None)
            }
            Err(e) => {
                *guard = None;
                Err(e)
            }
            Ok(Some(klpsym::FleetItem::Checked(r))) => Ok(Some(
                Py::new(py, CheckResult::checked(*r, self.strict))?.into_any(),
            )),
            Ok(Some(klpsym::FleetItem::Failed(f))) => {
                Ok(Some(Py::new(py, Failure::from(f))?.into_any()))
            }
        }
    }
}

/// Checks `patch` on every kernel `sources` name (files, folders, packages), one kernel at a
/// time, `jobs` at once, only the `shard` (`"2/4"`) when given: an iterator of CheckResult
/// and Failure.
#[pyfunction]
#[pyo3(signature = (patch, sources, *, shard=None, jobs=1, built_for=None, force=false, cache_dir=None, no_cache=false, strict=false))]
#[allow(clippy::too_many_arguments)]
fn fleet(
    py: Python<'_>,
    patch: &Patch,
    sources: Vec<PathBuf>,
    shard: Option<&str>,
    jobs: usize,
    built_for: Option<PathBuf>,
    force: bool,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    strict: bool,
) -> PyResult<FleetIter> {
    let interrupt = Interrupt::default();
    let opts = options(cache_dir, no_cache, None, None, false, &interrupt).for_patch(&patch.inner);
    let shard: klpsym::Shard = match shard {
        Some(s) => s.parse().map_err(py_err)?,
        None => klpsym::Shard::ALL,
    };
    let f = interrupt
        .run_watched(py, || klpsym::Fleet::new(&sources, &opts))?
        .shard(shard)
        .jobs(jobs);
    let it = f.check(
        Arc::clone(&patch.inner),
        check_options(built_for, force, None),
    );
    Ok(FleetIter {
        inner: Mutex::new(Some(it)),
        interrupt,
        strict,
    })
}

#[pymodule]
fn _klpsym(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(open_running, m)?)?;
    m.add_function(wrap_pyfunction!(open_all, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(drift, m)?)?;
    m.add_function(wrap_pyfunction!(fleet, m)?)?;
    m.add_function(wrap_pyfunction!(kinds::kind_names, m)?)?;
    m.add_class::<Kernel>()?;
    m.add_class::<Patch>()?;
    m.add_class::<FleetIter>()?;
    answers::register(m)?;
    copies::register(m)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
