//! Opening kernels: every source klpsym reads, composed with loaded modules, paired with the
//! same build's debug vmlinux, and prepared for the questions the caller will ask.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use klpsym_core::{ObjectId, Resched};
use klpsym_io::{LoadOptions, LoadedKernel, ModuleTree, Placement};

use crate::error::{Error, ErrorKind, Result};
use crate::kernel::{Kernel, Note};
use crate::options::{Options, Progress, Queries};
use crate::run::{KernelFailure, Kernels};

/// The source used when none is named: the running kernel.
pub const RUNNING_KERNEL: &str = klpsym_io::DEFAULT_SOURCE;

/// One source given to [`open_all`] and what became of it: a kernel, or why not. One bad
/// input never sinks the others.
#[derive(Debug)]
pub struct Opened {
    /// The source as given (a file; for packages of one kernel, the first of them).
    pub source: PathBuf,
    /// The kernel, or the error that kept it from opening.
    pub kernel: Result<Kernel>,
}

/// Opens one kernel from `source`: `/proc/kallsyms` or a saved copy, a System.map, a vmlinux,
/// a kernel image, a module, or a package (`.deb`, `.rpm`). The kind is told from the content.
///
/// ```no_run
/// let k = klpsym::open("/boot/vmlinuz-6.1.0-57-amd64", &klpsym::Options::new())?;
/// println!("{} symbols", k.table().len());
/// # Ok::<(), klpsym::Error>(())
/// ```
pub fn open(source: impl AsRef<Path>, opts: &Options) -> Result<Kernel> {
    let mut all = open_sources(&[source.as_ref().to_path_buf()], opts)?.0;
    match all.len() {
        1 => all.remove(0).kernel,
        n => Err(Error::usage(format!(
            "{}: holds {n} kernels; open it with open_all",
            source.as_ref().display()
        ))),
    }
}

/// Opens the running kernel (its `/proc/kallsyms`, with `/proc/version` and, when it exists,
/// `/lib/modules/$(uname -r)`).
pub fn open_running(opts: &Options) -> Result<Kernel> {
    open(RUNNING_KERNEL, opts)
}

/// Opens every kernel `sources` name: files, folders of them (every regular file in a folder,
/// in name order), packages (the packages of one release, given together or found in one
/// folder, form one kernel: image, `-dbg` vmlinux, config, Module.symvers, modules). Errors
/// that concern all of them (a module tree that cannot be read, options that do not fit) are
/// this function's error; a source that cannot be opened gets its own [`Opened`] with the
/// error, and the others still open.
pub fn open_all(sources: &[PathBuf], opts: &Options) -> Result<Vec<Opened>> {
    Ok(open_sources(sources, opts)?.0)
}

/// Kernels opened from many sources ([`KernelSet::open`]): those that opened, those that
/// could not (each with why), and what was passed over in folders.
#[derive(Debug)]
pub struct KernelSet {
    opened: Vec<Opened>,
    notes: Vec<Note>,
}

impl KernelSet {
    /// Opens every kernel `sources` name, as [`open_all`] does, keeping what was said about
    /// the sources themselves (a folder's files passed over).
    pub fn open(sources: &[PathBuf], opts: &Options) -> Result<KernelSet> {
        let (opened, notes) = open_sources(sources, opts)?;
        Ok(KernelSet { opened, notes })
    }

    /// Each source and what became of it.
    pub fn opened(&self) -> &[Opened] {
        &self.opened
    }

    /// What was said about the sources (files of a folder passed over, and why).
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The kernels, ready to answer as one run ([`Kernels::answer`], [`crate::check_kernels`]):
    /// the sources that did not open are failure rows, what was said is kept. When not one
    /// source opened and a single one was given, its error is this call's.
    pub fn into_kernels(self) -> Result<Kernels> {
        let notes = self.notes.clone();
        let (kernels, failed, _) = self.into_parts();
        Kernels::new(kernels, failed, notes)
    }

    /// The kernels that opened, the sources that did not (each as a failure row), and the
    /// first error among those.
    pub fn into_parts(self) -> (Vec<Kernel>, Vec<KernelFailure>, Option<Error>) {
        let mut kernels = Vec::new();
        let mut failed = Vec::new();
        let mut first = None;
        for Opened { source, kernel } in self.opened {
            match kernel {
                Ok(k) => kernels.push(k),
                Err(e) => {
                    failed.push(KernelFailure::new(source.display().to_string(), &e));
                    first.get_or_insert(e);
                }
            }
        }
        (kernels, failed, first)
    }
}

fn open_sources(sources: &[PathBuf], opts: &Options) -> Result<(Vec<Opened>, Vec<Note>)> {
    let load = opts.load_options();
    let mut rs = opts.resched();
    let loaded = opts.loaded_names()?;
    if opts.place_from.is_some() && loaded.is_empty() {
        return Err(Error::usage(
            "a placement (kallsyms) places the loaded modules, and no loaded modules are named",
        )
        .about(crate::error::Input::Placement));
    }
    if !loaded.is_empty() && opts.modules.is_empty() {
        return Err(Error::usage(
            "loaded modules are named, but no module tree says where their files are",
        )
        .about(crate::error::Input::ModuleTree));
    }
    // Composing the loaded modules needs the tree first; otherwise it is scanned on a helper
    // thread while the kernels load.
    let dirs = &opts.modules;
    let (tree, scanning) = match dirs.is_empty() {
        false if !loaded.is_empty() => (Some(checked_trees(dirs, &load, &mut rs)?), None),
        false => (None, Some(scan_in_background(dirs, &load, &rs))),
        true => (None, None),
    };
    // Starting the helper (its stack mapped, the thread cloned) is a step of its own.
    rs.tick_step()?;
    let opened = open_kernels(sources, opts, &load, tree.clone(), &loaded, &mut rs);
    // A module tree that is wrong is reported first, as when it was scanned first.
    let tree = match scanning {
        Some(scan) => Some(scan.finish(&mut rs)?),
        None => tree,
    };
    let (mut opened, notes) = opened?;
    for o in &mut opened {
        if let Ok(k) = &mut o.kernel {
            k.tree.clone_from(&tree);
            k.by_default = sources.is_empty();
        }
    }
    Ok((opened, notes))
}

/// Every place of [`Options::modules`] scanned and joined into one kernel's modules (the
/// first place's module wins a name), or the error that says why one cannot serve.
fn checked_trees(
    dirs: &[PathBuf],
    load: &LoadOptions,
    rs: &mut Resched,
) -> Result<Arc<ModuleTree>> {
    let trees = dirs
        .iter()
        .map(|d| checked_tree(d, load, rs))
        .collect::<Result<Vec<_>>>()?;
    if trees.len() == 1 {
        return Ok(Arc::clone(&trees[0]));
    }
    let refs: Vec<&ModuleTree> = trees.iter().map(|t| &**t).collect();
    Ok(Arc::new(ModuleTree::join(&refs, rs)?))
}

/// A module tree (a folder or a package) scanned, or the error that says why it cannot serve.
fn checked_tree(dir: &Path, load: &LoadOptions, rs: &mut Resched) -> Result<Arc<ModuleTree>> {
    let t = ModuleTree::open(dir, load, rs).map_err(|e| {
        Error::from(e)
            .context("module tree")
            .about(crate::error::Input::ModuleTree)
    })?;
    if t.is_empty() {
        return Err(Error::new(
            ErrorKind::BadInput,
            format!(
                "module tree {}: no kernel modules (.ko, .ko.xz, .ko.zst, .ko.gz) under it",
                dir.display()
            ),
        )
        .about(crate::error::Input::ModuleTree));
    }
    Ok(Arc::new(t))
}

/// A module tree being scanned on a helper thread (or, when no thread could be started,
/// not yet: [`BackgroundScan::finish`] then scans it).
struct BackgroundScan {
    dirs: Vec<PathBuf>,
    load: LoadOptions,
    thread: Option<std::thread::JoinHandle<Result<Arc<ModuleTree>>>>,
}

fn scan_in_background(dirs: &[PathBuf], load: &LoadOptions, rs: &Resched) -> BackgroundScan {
    let (d, o, mut helper_rs) = (dirs.to_vec(), load.clone(), rs.sibling());
    let thread = std::thread::Builder::new()
        .name("klpsym-modules".into())
        .spawn(move || {
            // Starting the thread is its own stretch, apart from the walk's first.
            helper_rs.tick_step()?;
            checked_trees(&d, &o, &mut helper_rs)
        })
        .ok();
    BackgroundScan {
        dirs: dirs.to_vec(),
        load: load.clone(),
        thread,
    }
}

impl BackgroundScan {
    fn finish(self, rs: &mut Resched) -> Result<Arc<ModuleTree>> {
        match self.thread.map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            // A panicked helper or none started: scan here.
            Some(Err(_)) | None => checked_trees(&self.dirs, &self.load, rs),
        }
    }
}

/// The body of [`open_all`] once the module tree is known or on its way.
fn open_kernels(
    sources: &[PathBuf],
    opts: &Options,
    load: &LoadOptions,
    tree: Option<Arc<ModuleTree>>,
    loaded: &[String],
    rs: &mut Resched,
) -> Result<(Vec<Opened>, Vec<Note>)> {
    let paths: Vec<PathBuf> = if sources.is_empty() {
        vec![PathBuf::from(RUNNING_KERNEL)]
    } else {
        sources.to_vec()
    };
    let placement_kernel = match &opts.place_from {
        Some(p) => Some(klpsym_io::load(p, load, rs).map_err(|e| {
            Error::from(e)
                .context("placement kallsyms")
                .about(crate::error::Input::Placement)
        })?),
        None => None,
    };
    let placement = placement_kernel
        .as_ref()
        .map_or(Placement::None, |k| Placement::Kallsyms(&k.table));
    // A folder listed and each file's first bytes read (what it is): a point after.
    let expanded = crate::sources::expand_dirs(&paths);
    rs.tick_step()?;
    let notes = expanded.notes;
    // A source that yields no kernel (an empty folder, a link to nothing) is a failure in its
    // place; the others are opened.
    let mut unreadable: Vec<Opened> = Vec::new();
    let mut paths = Vec::new();
    for s in expanded.sources {
        match s {
            Ok(p) => paths.push(p),
            Err((source, e)) => unreadable.push(Opened {
                source,
                kernel: Err(e),
            }),
        }
    }
    let debug = match &opts.debug_vmlinux {
        None => None,
        Some(d) => {
            let dk = klpsym_io::load(d, load, rs).map_err(|e| {
                Error::from(e)
                    .context("debug vmlinux")
                    .about(crate::error::Input::DebugVmlinux)
            })?;
            if !dk.table.has_files() {
                return Err(Error::bad_input(format!(
                    "debug vmlinux {}: no source files in it (no DWARF, no FILE entries): expected a vmlinux with debug info (the -dbg package's)",
                    d.display()
                )).about(crate::error::Input::DebugVmlinux));
            }
            Some(dk)
        }
    };
    // The debug vmlinux joins its own kernel: the one kernel given, or among several the one
    // of its build id; a package's own -dbg part joins its image.
    let sole = paths.len() == 1;
    let debug = Mutex::new(debug);
    let finish = |mut k: LoadedKernel, rs: &mut Resched| -> Result<Kernel> {
        let d = match k.debug.take() {
            Some(d) => Some(*d),
            None => {
                let mut held = debug.lock().unwrap_or_else(|p| p.into_inner());
                // Among several: the kernel of its build that names no source files itself.
                let ours = held.as_ref().is_some_and(|d| {
                    sole || (d.facts.build_id.is_some()
                        && d.facts.build_id == k.facts.build_id
                        && !k.table.has_files())
                });
                if ours {
                    held.take()
                } else {
                    None
                }
            }
        };
        let mut kernel = Kernel::new(k, opts.clone());
        // Before composing: the modules keep the source files their own .ko gives.
        if let Some(d) = d {
            kernel.attach_debug(d, rs)?;
        }
        if !loaded.is_empty() {
            let version = kernel.series();
            let k = &mut kernel.inner;
            let (table, layouts) = klpsym_io::compose_with_layouts(
                &k.table,
                tree.as_deref(),
                loaded,
                placement,
                version,
                load,
                rs,
            )?;
            k.table = table;
            k.module_layouts = layouts;
        }
        prepare(&mut kernel, opts.queries, rs)?;
        if kernel.inner.table.addresses_hidden() {
            let why = kernel.hidden_addresses_cause();
            let path = kernel.inner.path.display().to_string();
            kernel.notes.push(Note::warning(format!(
                "{path}: every address is 0000000000000000 — {why}. Name queries (lookup verdicts, positions) still work."
            )));
        }
        Ok(kernel)
    };
    let one = |p: &PathBuf, rs: &mut Resched| -> Result<Kernel> {
        let k = klpsym_io::load(p, load, rs)?;
        finish(k, rs)
    };
    // Packages given together (or found in one folder) form one kernel per release; one
    // package alone is an ordinary source (and cached like one).
    let (packages, files): (Vec<PathBuf>, Vec<PathBuf>) = if paths.len() == 1 {
        (Vec::new(), paths)
    } else {
        paths.into_iter().partition(|p| klpsym_io::is_package(p))
    };
    let mut out: Vec<Opened> = match files.len() {
        0 => Vec::new(),
        1 => vec![Opened {
            kernel: one(&files[0], rs),
            source: files[0].clone(),
        }],
        _ => open_parallel(&files, opts, &one),
    };
    if !packages.is_empty() {
        // Each release is a kernel of its own: one that cannot be read is its error alone.
        for (source, k) in klpsym_io::load_packages(&packages, load, rs)? {
            out.push(Opened {
                kernel: k.map_err(Error::from).and_then(|k| finish(k, rs)),
                source,
            });
        }
    }
    out.extend(unreadable);
    // A cancellation is everybody's: no kernel is reported as cancelled alone.
    if out
        .iter()
        .any(|o| o.kernel.as_ref().is_err_and(Error::is_cancelled))
    {
        return Err(Error::cancelled());
    }
    if let Some(d) = debug.into_inner().unwrap_or_else(|p| p.into_inner()) {
        if out.iter().any(|o| o.kernel.is_ok()) {
            return Err(Error::bad_input(format!(
                "debug vmlinux {}: build id {}: none of the kernels given is that build",
                d.path.display(),
                d.facts.build_id.as_deref().unwrap_or("(none)")
            ))
            .about(crate::error::Input::DebugVmlinux));
        }
    }
    Ok((out, notes))
}

/// Builds the indexes now (timed), or marks the table to be walked; either way, whatever the
/// table builds later on its own (an index a query finds missing) reaches the caller's
/// reschedule points.
fn prepare(k: &mut Kernel, queries: Queries, rs: &mut Resched) -> Result<()> {
    k.inner.table.set_driver(rs.sibling());
    let t0 = std::time::Instant::now();
    match queries {
        Queries::Many => k.inner.table.build_indexes(rs)?,
        Queries::Names => k.inner.table.build_name_index(rs)?,
        Queries::Few => {
            k.inner.table.scan_until_indexed(rs.sibling());
            return Ok(());
        }
    }
    k.inner.index_time = t0.elapsed();
    Ok(())
}

/// Opens many files on all cores, in order, reporting progress.
fn open_parallel(
    paths: &[PathBuf],
    opts: &Options,
    one: &(dyn Fn(&PathBuf, &mut Resched) -> Result<Kernel> + Sync),
) -> Vec<Opened> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len());
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Kernel>>>> =
        Mutex::new((0..paths.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut rs = opts.resched();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = paths.get(i) else { break };
                    let r = one(p, &mut rs);
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if let Some(f) = &opts.progress {
                        f(&Progress::Opened {
                            done: n,
                            total: paths.len(),
                            last: p.clone(),
                        });
                    }
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    paths
        .iter()
        .zip(results)
        .map(|(p, r)| Opened {
            source: p.clone(),
            kernel: r.unwrap_or_else(|| {
                Err(Error::new(
                    ErrorKind::Io,
                    format!("{}: a loader thread stopped before it", p.display()),
                ))
            }),
        })
        .collect()
}

impl Kernel {
    /// Gives this kernel's vmlinux symbols the source files of the same build's debug vmlinux
    /// `d` (see [`klpsym_core::pair_definitions`]), and keeps `d` for declaration lines.
    /// Refuses different build ids.
    fn attach_debug(&mut self, d: LoadedKernel, rs: &mut Resched) -> Result<()> {
        let k = &mut self.inner;
        let (kd, dd) = (k.path.display().to_string(), d.path.display().to_string());
        match (&k.facts.build_id, &d.facts.build_id) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::bad_input(format!(
                    "debug vmlinux {dd}: build id {b}, but {kd} has {a}: not the same build"
                )).about(crate::error::Input::DebugVmlinux))
            }
            (Some(a), Some(_)) => self.notes.push(Note::info(format!(
                "source files from {dd} (build id {a}, the same as {kd}'s)"
            ))),
            _ => self.notes.push(Note::warning(format!(
                "{kd}: no build id to compare with {dd}: source files are matched by name and position only"
            ))),
        }
        let paired = klpsym_core::pair_definitions(&k.table, &d.table, rs)?;
        let mut files: Vec<Option<&str>> = Vec::with_capacity(paired.len());
        for p in &paired {
            rs.tick()?;
            files.push(p.and_then(|id| d.table.file(id)));
        }
        k.table.attach_files(|id| files[id.0 as usize], rs)?;
        klpsym_core::bulk::free_with_points(files, rs)?;
        self.paired = Some(paired);
        k.debug = Some(Box::new(d));
        Ok(())
    }

    /// The vmlinux definition of the debug vmlinux paired with `id` (see
    /// [`klpsym_core::pair_definitions`]), as its address there.
    pub(crate) fn debug_address(&self, id: klpsym_core::SymbolId) -> Option<u64> {
        let d = self.inner.debug.as_deref()?;
        let there = (*self.paired.as_ref()?.get(id.0 as usize)?)?;
        let s = d.table.symbol(there);
        (s.object == ObjectId::VMLINUX).then_some(s.addr)
    }
}
