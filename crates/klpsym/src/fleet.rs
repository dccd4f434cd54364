//! Many kernels, one at a time: the kernels a list of sources names, told apart without
//! opening them, split into shards, and checked by a [`Fleet`] that opens, checks and frees
//! each before the next (memory bounded by `jobs` kernels, whatever the fleet's size), so that
//! many machines can share a fleet (`--shard I/N`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use klpsym::{CheckOptions, Fleet, FleetItem, Options, Patch, Shard};
//!
//! let opts = Options::new();
//! let patch = Arc::new(Patch::read("livepatch-fix.ko", &opts)?);
//! let fleet = Fleet::new(&["/srv/kernels".into()], &opts.for_patch(&patch))?
//!     .shard("2/4".parse::<Shard>()?)
//!     .jobs(2);
//! for note in fleet.notes() {
//!     eprintln!("{}", note.text); // a file of the folder passed over, and why
//! }
//! for item in fleet.check(patch, CheckOptions::default()) {
//!     match item? {
//!         FleetItem::Checked(r) => println!("{}: {:?}", r.kernel, r.verdict()),
//!         FleetItem::Failed(f) => println!("{}: {}", f.kernel, f.error),
//!     }
//! }
//! # Ok::<(), klpsym::Error>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use crate::check::{pick_release, BuiltFor, CheckOptions, KernelCheck, Patch};
use crate::error::{Error, ErrorKind, Result};
use crate::kernel::{Kernel, Note};
use crate::options::Options;
use crate::run::{KernelFailure, Outcome};
use crate::sources::expand_dirs;

/// The sources of one kernel, or of the few kernels one package set holds: a file alone, or
/// the packages of one version and architecture (an image with its `-dbg`, headers and
/// modules packages; a cloud flavour of the same version joins them and opens as a kernel of
/// its own). A source that yields no kernel at all (a folder without kernel files, a
/// symbolic link to nothing) is a unit of its own with why, a failure row when checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelUnit {
    /// What to give [`crate::open_all`].
    pub sources: Vec<PathBuf>,
    /// Why nothing can be read from this source, when that is known without opening it.
    pub unreadable: Option<KernelFailure>,
}

impl KernelUnit {
    /// The unit's first source, for messages and progress.
    pub fn label(&self) -> String {
        match self.sources.as_slice() {
            [one] => one.display().to_string(),
            [first, rest @ ..] => format!("{} (+{} packages)", first.display(), rest.len()),
            [] => String::new(),
        }
    }
}

/// The kernels `sources` name (files, folders of them), without opening any: each file that
/// is not a package is a unit of its own; packages are grouped by the version and
/// architecture their file names give (Debian `NAME_VERSION_ARCH.deb`, RPM
/// `NAME-VERSION-RELEASE.ARCH.rpm`), a package named otherwise alone. In order of first
/// appearance (a folder's files in name order). What a folder holds besides kernel parts
/// (source and documentation packages, notes, checksums) is passed over, each with a note.
pub fn kernel_units(sources: &[PathBuf]) -> Result<(Vec<KernelUnit>, Vec<Note>)> {
    let x = expand_dirs(sources);
    let mut units: Vec<(Option<String>, KernelUnit)> = Vec::new();
    for s in x.sources {
        let p = match s {
            Ok(p) => p,
            Err((p, e)) => {
                let unreadable = Some(KernelFailure::new(p.display().to_string(), &e));
                units.push((
                    None,
                    KernelUnit {
                        sources: vec![p],
                        unreadable,
                    },
                ));
                continue;
            }
        };
        let key = klpsym_io::is_package(&p).then(|| package_key(&p)).flatten();
        match key
            .as_ref()
            .and_then(|k| units.iter_mut().find(|(u, _)| u.as_ref() == Some(k)))
        {
            Some((_, u)) => u.sources.push(p),
            None => units.push((
                key,
                KernelUnit {
                    sources: vec![p],
                    unreadable: None,
                },
            )),
        }
    }
    Ok((units.into_iter().map(|(_, u)| u).collect(), x.notes))
}

/// The version and architecture a package's file name gives, with its folder: packages of
/// one build lie side by side.
fn package_key(p: &Path) -> Option<String> {
    let name = p.file_name()?.to_str()?;
    let dir = p
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let key = if let Some(stem) = name.strip_suffix(".deb") {
        // linux-image-6.1.0-57-amd64_6.1.192-3_amd64
        let mut f = stem.split('_');
        let (_, version, arch) = (f.next()?, f.next()?, f.next()?);
        format!("deb {version} {arch}")
    } else if let Some(stem) = name.strip_suffix(".rpm") {
        // kernel-core-6.1.0-1.x86_64
        let (nvr, arch) = stem.rsplit_once('.')?;
        let mut f = nvr.rsplitn(3, '-');
        let (release, version, _) = (f.next()?, f.next()?, f.next()?);
        format!("rpm {version}-{release} {arch}")
    } else {
        return None;
    };
    Some(format!("{dir}\0{key}"))
}

/// One part of a fleet split `count` ways (`I/N`, 1-based): the units whose index in
/// [`kernel_units`]' order is `index - 1` modulo `count`. Every unit is in exactly one shard,
/// and the split depends only on the order of the sources, so machines that list the same
/// folder share it without talking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which part, from 1.
    pub index: usize,
    /// How many parts.
    pub count: usize,
}

impl Shard {
    /// The whole fleet (`1/1`).
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// The units of this shard, in their order.
    pub fn take(&self, units: Vec<KernelUnit>) -> Vec<KernelUnit> {
        units
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, u)| u)
            .collect()
    }
}

impl std::str::FromStr for Shard {
    type Err = Error;

    fn from_str(s: &str) -> Result<Shard> {
        let bad = || {
            Error::usage(format!(
                "shard '{s}': expected I/N with 1 <= I <= N (e.g. 2/4: the second of four parts)"
            ))
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// A fleet of kernels to check a patch on: its units (a shard of them), opened `jobs` at a
/// time, each checked and freed before the next. The kernel the patch was built for is found
/// once among all of them (every shard's), as a matrix finds it, and held for the run.
#[derive(Debug, Clone)]
pub struct Fleet {
    units: Vec<KernelUnit>,
    /// Every unit, whatever the shard: where the built-for kernel is looked for.
    all: Vec<KernelUnit>,
    notes: Vec<Note>,
    opts: Options,
    jobs: usize,
}

/// One kernel of a fleet: its check, or why it could not be opened or checked.
#[derive(Debug)]
pub enum FleetItem {
    /// The kernel's answer.
    Checked(Box<KernelCheck>),
    /// The kernel could not be opened or checked (the others still are).
    Failed(KernelFailure),
}

impl FleetItem {
    /// What this kernel does to the fleet's run: a failure [`Outcome::Failed`], a check its
    /// [`KernelCheck::outcome`] (`strict`: as [`CheckOptions::strict`]).
    pub fn outcome(&self, strict: bool) -> Outcome {
        match self {
            FleetItem::Checked(r) => r.outcome(strict),
            FleetItem::Failed(_) => Outcome::Failed,
        }
    }
}

impl Fleet {
    /// The fleet `sources` name (files, folders, packages), each kernel to be opened with
    /// `opts` ([`Options::for_patch`] reads a package's modules of the patch's objects with
    /// its kernel).
    pub fn new(sources: &[PathBuf], opts: &Options) -> Result<Fleet> {
        if sources.is_empty() {
            return Err(Error::usage(
                "a fleet needs kernel sources (files, folders)",
            ));
        }
        let (units, notes) = kernel_units(sources)?;
        Ok(Fleet {
            all: units.clone(),
            units,
            notes,
            opts: opts.clone(),
            jobs: 1,
        })
    }

    /// Only the units of `shard`.
    pub fn shard(mut self, shard: Shard) -> Fleet {
        self.units = shard.take(self.units);
        self
    }

    /// Checks this many kernels at once (memory: that many kernels); at least 1.
    pub fn jobs(mut self, jobs: usize) -> Fleet {
        self.jobs = jobs.max(1);
        self
    }

    /// The units, in order.
    pub fn units(&self) -> &[KernelUnit] {
        &self.units
    }

    /// What was passed over while listing the sources (files of a folder that are not
    /// kernel parts).
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Checks `patch` on every kernel of the fleet: an item per kernel, in the order kernels
    /// finish (one job: the fleet's order). At most `jobs` kernels are held at once (and the
    /// kernel the patch was built for, found first: see [`Fleet::built_for`]), and a
    /// finished answer waits for its reader before the next kernel of that job opens. An
    /// error that concerns every kernel (a cancellation, a built-for kernel that cannot be
    /// opened) ends the iteration.
    pub fn check(self, patch: Arc<Patch>, copts: CheckOptions) -> FleetChecks {
        let jobs = self.jobs.min(self.units.len()).max(1);
        let (tx, rx) = sync_channel::<Result<FleetItem>>(jobs);
        // Found before the first kernel is checked: every answer compares with the same one.
        let (built, first, units) = match self.find_built_for(&patch, &copts) {
            Ok(b) => (b, None, self.units),
            Err(e) => (BuiltFor::opened(None, None), Some(Err(e)), Vec::new()),
        };
        let shared = Arc::new(Shared {
            units,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            opts: self.opts,
            copts,
            patch,
            built,
        });
        let workers = (0..jobs)
            .map(|_| {
                let (s, tx) = (Arc::clone(&shared), tx.clone());
                std::thread::spawn(move || s.work(&tx))
            })
            .collect();
        FleetChecks {
            first,
            rx: Some(rx),
            shared,
            workers,
        }
    }

    /// The kernel `patch` was built for, as [`crate::check`] finds it among the kernels of a
    /// matrix: the one [`CheckOptions::built_for`] names, else the first kernel of the whole
    /// fleet (every shard's units) whose release the patch's vermagic names. A unit of
    /// packages tells its release from the first paths of its packages; a unit of other files
    /// is opened to tell it (and freed when it is not that release). `None` when no kernel of
    /// the fleet is that release.
    pub fn built_for(&self, patch: &Patch, copts: &CheckOptions) -> Result<Option<Kernel>> {
        if let Some(p) = &copts.built_for {
            return crate::check::open_built_for(p, &self.opts).map(Some);
        }
        let Some(release) = patch.built_for_release() else {
            return Ok(None);
        };
        let mut rs = self.opts.resched();
        let load = self.opts.load_options();
        for unit in self.all.iter().filter(|u| u.unreadable.is_none()) {
            let packages = unit.sources.iter().all(|p| klpsym_io::is_package(p));
            if packages {
                let mut releases = Vec::new();
                for p in &unit.sources {
                    match klpsym_io::package_release(p, &load, &mut rs) {
                        Ok(r) => releases.push(r),
                        Err(klpsym_io::LoadError::Cancelled) => return Err(Error::cancelled()),
                        // Unreadable: its own failure when it is checked.
                        Err(_) => {}
                    }
                }
                if pick_release(&release, releases).is_none() {
                    continue;
                }
            }
            let opened = match crate::open::open_all(&unit.sources, &self.opts) {
                Ok(o) => o,
                Err(e) if e.is_cancelled() || e.kind() == ErrorKind::Usage => return Err(e),
                Err(_) => continue,
            };
            let mut kernels: Vec<Kernel> =
                opened.into_iter().filter_map(|o| o.kernel.ok()).collect();
            match pick_release(&release, kernels.iter().map(Kernel::release)) {
                Some(i) => {
                    let k = kernels.swap_remove(i);
                    for other in kernels {
                        other.free(&mut rs)?;
                    }
                    return Ok(Some(k));
                }
                None => {
                    for other in kernels {
                        other.free(&mut rs)?;
                    }
                }
            }
        }
        Ok(None)
    }

    /// [`Fleet::built_for`], as the check needs it.
    fn find_built_for(&self, patch: &Patch, copts: &CheckOptions) -> Result<BuiltFor> {
        if copts.built_for.is_some() {
            return BuiltFor::named(patch, copts, &self.opts);
        }
        let k = self.built_for(patch, copts)?;
        Ok(BuiltFor::opened(k, patch.built_for_release()))
    }
}

/// What the workers of [`Fleet::check`] share.
#[derive(Debug)]
struct Shared {
    units: Vec<KernelUnit>,
    next: AtomicUsize,
    stop: AtomicBool,
    opts: Options,
    copts: CheckOptions,
    patch: Arc<Patch>,
    /// The kernel the patch was built for, found once for the whole fleet.
    built: BuiltFor,
}

type Sender = std::sync::mpsc::SyncSender<Result<FleetItem>>;

impl Shared {
    /// Takes units until none is left (or the reader is gone): each opened, checked, sent,
    /// freed.
    fn work(&self, tx: &Sender) {
        while !self.stop.load(Ordering::Relaxed) {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(unit) = self.units.get(n) else { break };
            if let Err(e) = self.unit(unit, tx) {
                // A cancellation or a usage mistake: everybody's; the reader sees it once.
                self.stop.store(true, Ordering::Relaxed);
                let _ = tx.send(Err(e));
                break;
            }
        }
    }

    fn unit(&self, unit: &KernelUnit, tx: &Sender) -> Result<()> {
        let send = |item: FleetItem| -> Result<()> {
            tx.send(Ok(item))
                .map_err(|_| Error::new(ErrorKind::Cancelled, "the reader is gone"))
        };
        if let Some(f) = &unit.unreadable {
            return send(FleetItem::Failed(f.clone()));
        }
        let opened = match crate::open::open_all(&unit.sources, &self.opts) {
            Ok(o) => o,
            Err(e) if e.is_cancelled() || e.kind() == ErrorKind::Usage => return Err(e),
            Err(e) => return send(FleetItem::Failed(KernelFailure::new(unit.label(), &e))),
        };
        let mut kernels = Vec::new();
        for o in opened {
            match o.kernel {
                Ok(k) => kernels.push(k),
                Err(e) => send(FleetItem::Failed(KernelFailure::new(
                    o.source.display().to_string(),
                    &e,
                )))?,
            }
        }
        if kernels.is_empty() {
            return Ok(());
        }
        let refs: Vec<&crate::Kernel> = kernels.iter().collect();
        let run = crate::check::check_with(&self.patch, &refs, &self.copts, &self.built)?;
        drop(refs);
        for f in run.failed {
            send(FleetItem::Failed(f))?;
        }
        for r in run.results {
            send(FleetItem::Checked(Box::new(r)))?;
        }
        // Freed before the next unit opens: memory is one unit's (per job).
        let mut rs = self.opts.resched();
        for k in kernels {
            k.free(&mut rs)?;
        }
        Ok(())
    }
}

/// The items of [`Fleet::check`]. Dropping it stops the fleet after the kernels being
/// checked.
#[derive(Debug)]
pub struct FleetChecks {
    /// An error that came before any kernel (the built-for kernel could not be opened).
    first: Option<Result<FleetItem>>,
    rx: Option<Receiver<Result<FleetItem>>>,
    shared: Arc<Shared>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl Iterator for FleetChecks {
    type Item = Result<FleetItem>;

    fn next(&mut self) -> Option<Result<FleetItem>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        match self.rx.as_ref()?.recv() {
            Ok(item) => Some(item),
            // Every worker is done.
            Err(_) => {
                for w in self.workers.drain(..) {
                    let _ = w.join();
                }
                self.free_built_for();
                None
            }
        }
    }
}

impl FleetChecks {
    /// Frees the built-for kernel with reschedule points once no worker holds it.
    fn free_built_for(&mut self) {
        if let Some(s) = Arc::get_mut(&mut self.shared) {
            let built = std::mem::replace(&mut s.built, BuiltFor::opened(None, None));
            let _ = built.free(&mut s.opts.resched());
        }
    }
}

impl Drop for FleetChecks {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // A worker's next send fails: it stops after the kernel in hand.
        drop(self.rx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.free_built_for();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_of_one_build_are_one_unit_and_shards_split_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let deb = |n: &str| {
            let p = dir.path().join(n);
            // The first bytes of an ar archive: a package by its content.
            std::fs::write(&p, b"!<arch>\ndebian-binary   ").unwrap();
            p
        };
        let img = deb("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb");
        let dbg = deb("linux-image-6.1.0-57-amd64-dbg_6.1.192-3_amd64.deb");
        let other = deb("linux-image-6.1.0-58-amd64_6.1.193-1_amd64.deb");
        let arm = deb("linux-image-6.1.0-57-arm64_6.1.192-3_arm64.deb");
        let src = deb("linux-source-6.1_6.1.192-3_all.deb");
        let text = dir.path().join("kallsyms.txt");
        std::fs::write(&text, "ffffffff81000000 T _text\n").unwrap();
        std::fs::write(dir.path().join("NOTES.txt"), "where these came from\n").unwrap();
        let (units, notes) = kernel_units(&[dir.path().to_path_buf()]).unwrap();
        let sets: Vec<Vec<PathBuf>> = units.iter().map(|u| u.sources.clone()).collect();
        assert_eq!(
            sets,
            vec![
                vec![text.clone()],
                vec![dbg.clone(), img.clone()],
                vec![arm.clone()],
                vec![other.clone()],
            ]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes.iter().any(|n| n.text.contains("NOTES.txt")));
        assert!(notes
            .iter()
            .any(|n| n.text.contains(&src.display().to_string())));
        let a: Shard = "1/2".parse().unwrap();
        let b: Shard = "2/2".parse().unwrap();
        let (sa, sb) = (a.take(units.clone()), b.take(units.clone()));
        assert_eq!(sa.len() + sb.len(), units.len());
        assert!(sa.iter().all(|u| !sb.contains(u)));
        assert_eq!(Shard::ALL.take(units.clone()), units);
        for bad in ["0/2", "3/2", "1/0", "x", "1/", "/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    /// Regression (#45): a folder without kernel parts failed the whole list, and a link in a
    /// folder that leads nowhere vanished. Each is now a unit of its own that says why, in
    /// its place among the others.
    #[test]
    fn a_source_that_yields_no_kernel_is_a_unit_that_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        std::fs::write(empty.join("README"), "nothing here\n").unwrap();
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        let text = full.join("kallsyms.txt");
        std::fs::write(&text, "ffffffff81000000 T _text\n").unwrap();
        let link = full.join("vmlinuz-lost");
        std::os::unix::fs::symlink(full.join("gone"), &link).unwrap();
        let (units, notes) = kernel_units(&[empty.clone(), full.clone()]).unwrap();
        assert_eq!(units.len(), 3, "{units:?}");
        let why = |u: &KernelUnit| u.unreadable.as_ref().map(|f| f.error.clone());
        assert_eq!(units[0].sources, vec![empty.clone()]);
        assert!(why(&units[0])
            .unwrap()
            .contains("holds no kernel source files"));
        assert_eq!(units[1].sources, vec![text]);
        assert_eq!(why(&units[1]), None);
        assert_eq!(units[2].sources, vec![link]);
        assert!(
            why(&units[2]).unwrap().contains("symbolic link"),
            "{units:?}"
        );
        assert!(notes.iter().any(|n| n.text.contains("README")), "{notes:?}");
    }
}
