//! Kernels from distribution packages, read in place (see `klpsym_package`): the packages of
//! one kernel release form one kernel, the image giving the table, a debug package the source
//! files and lines, the config, Module.symvers and modules what the module loader checks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use klpsym_core::resched::Resched;
use klpsym_package::{MemberKind, Package, Want};

use crate::cache::Lookup;
use crate::config::parse_config;
use crate::decode::{from_binary, from_bytes};
use crate::detect::is_package;
use crate::error::LoadError;
use crate::file_stamp::{Proof, Stamp};
use crate::loaded::{ElfBytes, LoadedKernel, PackageParts};
use crate::modules::ModuleTree;
use crate::options::LoadOptions;
use crate::parts_cache::Adds;
use crate::symvers::parse_symvers;

/// The buffer between a package's file and its decoder, and between the decoder and a spilled
/// member's file: one `read(2)` or `write(2)` each time it runs dry or fills, all of it copied
/// by the kernel in that call. 1 MiB took 0.6-3 ms a call here (`klpsym-bench resched`);
/// 64 KiB stays well inside the bound, for 16 times the calls (a few milliseconds over a
/// gigabyte-sized -dbg package).
const IO_BUF: usize = 64 << 10;
/// The write buffer of a member spilled to a temporary file.
const SPILL_BUF: usize = 16 << 10;

fn want(opts: &LoadOptions) -> Want {
    Want {
        image: true,
        vmlinux: true,
        modules: opts.package_modules,
        symvers: opts.package_modules,
        debug_modules: false,
        release_only: false,
    }
}

/// A package read from its file as it streams, with its debug vmlinux (when it holds one
/// and it was asked for) in a private temporary file, mapped: neither the package nor the
/// vmlinux is ever held in the heap (a Debian `-dbg` package is 0.8-1.2 GB, its vmlinux
/// 430-630 MB).
pub(crate) struct Read {
    pub(crate) package: Package,
    pub(crate) vmlinux: Option<klpsym_core::Backing>,
}

impl std::fmt::Debug for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Read")
            .field("package", &self.package.name)
            .field(
                "vmlinux",
                &self.vmlinux.as_ref().map(|b| (**b).as_ref().len()),
            )
            .finish()
    }
}

/// Spills the debug vmlinux to a private temporary file (unlinked: gone with the process).
struct TempSpill<'c> {
    file: Option<std::io::BufWriter<std::fs::File>>,
    cache: Option<&'c crate::Cache>,
}

impl klpsym_package::Spill for TempSpill<'_> {
    fn spill(
        &mut self,
        _path: &str,
        kind: MemberKind,
        _size: u64,
    ) -> std::io::Result<Option<&mut dyn std::io::Write>> {
        if kind != MemberKind::Vmlinux || self.file.is_some() {
            return Ok(None);
        }
        let f = crate::entry::private_temp_file(self.cache)?;
        // 16 KiB a write: each write takes that many fresh page-cache pages inside one
        // stretch (64 KiB writes were stretches of 0.3-0.65 ms on the folder's -dbg package,
        // `klpsym-bench resched`, the pages counted as the thread's block output).
        let w = self
            .file
            .insert(std::io::BufWriter::with_capacity(SPILL_BUF, f));
        Ok(Some(w))
    }
}

/// Reads only the debug files of the modules `names` name (`_` and `-` alike).
struct NamedDebugModules<'a> {
    names: &'a [String],
}

impl klpsym_package::Spill for NamedDebugModules<'_> {
    fn spill(
        &mut self,
        _: &str,
        _: MemberKind,
        _: u64,
    ) -> std::io::Result<Option<&mut dyn std::io::Write>> {
        Ok(None)
    }

    fn keeps(&mut self, path: &str, kind: MemberKind) -> bool {
        let n = klpsym_core::normalize_module_name(path.trim_end_matches(".debug"));
        kind == MemberKind::DebugModule
            && self
                .names
                .iter()
                .any(|w| klpsym_core::normalize_module_name(w) == n)
    }
}

/// The debug files of the modules `names` in the debug package at `path`
/// (`usr/lib/debug/lib/modules/REL/…/NAME.ko`): (module name as asked, member path, bytes).
/// Streamed through once; a name it does not hold is left out.
pub fn debug_modules_of(
    path: &Path,
    names: &[String],
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Vec<(String, String, Vec<u8>)>, LoadError> {
    let f = std::fs::File::open(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = std::io::BufReader::with_capacity(IO_BUF, f);
    let want = Want {
        debug_modules: true,
        ..Want::default()
    };
    let mut spill = NamedDebugModules { names };
    let package =
        klpsym_package::read_package_file(&mut r, want, opts.max_decompressed_size, &mut spill, rs)
            .map_err(|source| LoadError::Package {
                path: path.to_path_buf(),
                source,
            })?;
    let mut out = Vec::new();
    for m in package.members {
        let n = klpsym_core::normalize_module_name(m.path.trim_end_matches(".debug"));
        if let Some(w) = names
            .iter()
            .find(|w| klpsym_core::normalize_module_name(w) == n)
        {
            if !out
                .iter()
                .any(|(o, _, _): &(String, String, Vec<u8>)| o == w)
            {
                out.push((w.clone(), m.path, m.data));
            }
        }
    }
    Ok(out)
}

/// The kernel release the package at `path` names first (`6.1.0-57-amd64`), read from the
/// start of its file list: which kernel a package belongs to, without reading it. Not a check
/// of the package: opening it reads it to its end.
pub fn package_release(
    path: &Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Option<String>, LoadError> {
    let f = std::fs::File::open(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = std::io::BufReader::with_capacity(64 << 10, f);
    klpsym_package::first_release(&mut r, opts.max_decompressed_size, rs).map_err(|source| {
        LoadError::Package {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Reads the package at `path` for `want`: streamed from the file (never refused for its size:
/// every member is bounded by the decompressed size limit instead).
pub(crate) fn read_file(
    path: &Path,
    want: Want,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Read, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io_err)?;
    rs.tick_step()?;
    let mut r = std::io::BufReader::with_capacity(IO_BUF, f);
    rs.set_phase("package: stream the members out");
    let mut spill = TempSpill {
        file: None,
        cache: opts.cache.as_ref(),
    };
    let package =
        klpsym_package::read_package_file(&mut r, want, opts.max_decompressed_size, &mut spill, rs)
            .map_err(|source| LoadError::Package {
                path: path.to_path_buf(),
                source,
            })?;
    let vmlinux = match spill.file {
        Some(w) => {
            let f = w.into_inner().map_err(|e| io_err(e.into_error()))?;
            Some(crate::entry::map_private(&f).map_err(io_err)?)
        }
        None => None,
    };
    Ok(Read { package, vmlinux })
}

/// [`read_file`] and the file's identity, hashed from the file meanwhile by another thread
/// (and recorded with the stamp the file had before). `None` for the identity when the file
/// changed while it was read.
fn read_with_identity(
    path: &Path,
    cache: &crate::Cache,
    meta: &std::fs::Metadata,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<(Option<u128>, Read), LoadError> {
    let proof = Proof::begin(meta);
    let mut hashing = rs.sibling();
    let (id, read) = std::thread::scope(|s| {
        let id = std::thread::Builder::new()
            .spawn_scoped(s, || {
                crate::entry::prove_identity(path, u64::MAX, &mut hashing)
            })
            .ok();
        let read = rs
            .tick_step()
            .map_err(LoadError::from)
            .and_then(|()| read_file(path, want(opts), opts, rs));
        let id = match id {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => crate::entry::prove_identity(path, u64::MAX, rs),
        };
        (id, read)
    });
    let (id, read) = (id?, read?);
    if let Some(id) = id {
        crate::stamp::record(cache, path, &proof, id, rs);
    }
    Ok((id, read))
}

/// One kernel of packages given together, by the first package of its release, or the error
/// of a package that could not be read.
pub type PackageKernel = (PathBuf, Result<LoadedKernel, LoadError>);

/// One package given: a part of a kernel from the cache, or the package read now.
enum Part {
    /// A cached kernel part: an image package's kernel, or a -dbg package's vmlinux.
    Cached(Box<LoadedKernel>),
    /// What a package holding no kernel adds, from its entry.
    CachedAdds(Box<Adds>),
    /// Read now, with what proves it for the cache.
    Read {
        read: Box<Read>,
        identity: Option<(std::fs::Metadata, u128)>,
    },
}

impl Part {
    fn release(&self) -> Option<String> {
        match self {
            Part::Cached(k) => k.package.as_ref().and_then(|p| p.release.clone()),
            Part::CachedAdds(a) => a.release.clone(),
            Part::Read { read, .. } => read.package.release().map(str::to_string),
        }
    }
}

/// Packages given together: grouped by the kernel release they name (packages naming none
/// join the first group), one kernel per release, in the order of first appearance.
///
/// Each package is read, and cached, on its own: an image package's kernel and a -dbg
/// package's vmlinux (with its declaration lines) are each an entry of their own, and what
/// other packages of the release add (config, Module.symvers, modules) joins the kernel
/// without reading a cached part again. A package that cannot be read (damaged, not a kernel
/// package) is an error for its path alone, and the kernels of the others still load. Only a
/// cancellation is everybody's error.
pub fn load_packages(
    paths: &[PathBuf],
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Vec<PackageKernel>, LoadError> {
    let cancelled = |e: &LoadError| matches!(e, LoadError::Cancelled);
    // A kernel with all its package's modules is not cached; with the few a check names it is.
    let cache = opts
        .cache
        .as_ref()
        .filter(|_| !opts.package_modules || opts.package_module_names.is_some());
    let mut parts: Vec<(PathBuf, Part)> = Vec::new();
    let mut out: Vec<PackageKernel> = Vec::new();
    for p in paths {
        // Each package's start (a stat, the cache's lookup: its stamp record and entry
        // opened, a helper thread started) is a few system calls a step, a point between.
        rs.tick_step()?;
        let meta = std::fs::metadata(p).ok();
        // The package's identity when the cache proved it on the way to a miss.
        let mut known = None;
        if let Some(c) = cache {
            rs.tick_step()?;
            match c.lookup(p, opts, rs) {
                Ok(Lookup::Hit(k)) => {
                    parts.push((p.clone(), Part::Cached(k)));
                    continue;
                }
                Ok(Lookup::Miss(id)) => known = id,
                Err(e) if cancelled(&e) => return Err(e),
                // A cache entry that cannot be read is read anew from the package.
                Err(_) => {}
            }
            if let Some(id) = known {
                if let Some(adds) = crate::parts_cache::get(c, id, opts, rs)? {
                    parts.push((p.clone(), Part::CachedAdds(Box::new(adds))));
                    continue;
                }
            }
        }
        rs.tick_step()?;
        let read = match (cache, known, &meta) {
            (Some(_), Some(id), _) => read_file(p, want(opts), opts, rs).map(|r| (Some(id), r)),
            (Some(c), None, Some(m)) => read_with_identity(p, c, m, opts, rs),
            _ => read_file(p, want(opts), opts, rs).map(|r| (None, r)),
        };
        match read {
            Ok((id, read)) => {
                // Changed since it was proven: read, never cached under that identity.
                let same = meta.as_ref().map(Stamp::of) == Stamp::now(p);
                let identity = meta.filter(|_| same).zip(id);
                let read = Box::new(read);
                parts.push((p.clone(), Part::Read { read, identity }));
            }
            Err(e) if cancelled(&e) => return Err(e),
            Err(e) => out.push((p.clone(), Err(e))),
        }
    }
    for group in by_release(parts) {
        let first = group.first().map(|(p, _)| p.clone()).unwrap_or_default();
        match assemble(group, cache, opts, rs) {
            Err(LoadError::Cancelled) => return Err(LoadError::Cancelled),
            k => out.push((first, k)),
        }
    }
    // In the order the packages were given.
    out.sort_by_key(|(p, _)| paths.iter().position(|x| x == p));
    Ok(out)
}

/// The parts of one release, each with its package.
type Group = Vec<(PathBuf, Part)>;

/// Parts grouped by release, in order of first appearance; a part naming none joins the
/// first group.
fn by_release(parts: Group) -> Vec<Group> {
    let mut groups: Vec<(Option<String>, Group)> = Vec::new();
    for (path, part) in parts {
        let r = part.release();
        match groups
            .iter_mut()
            .find(|(g, _)| r.is_none() || g.is_none() || *g == r)
        {
            Some((g, v)) => {
                if g.is_none() {
                    *g = r;
                }
                v.push((path, part));
            }
            None => groups.push((r, vec![(path, part)])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

fn label(pkg: &Path, member: &str) -> PathBuf {
    PathBuf::from(format!("{}:{member}", pkg.display()))
}

/// `package NAME VERSION (ARCH): PATH`, as a kernel's notes name the packages it came from.
fn described(path: &Path, pkg: &Package) -> String {
    format!(
        "package {} {}{}: {}",
        pkg.name.as_deref().unwrap_or("(unnamed)"),
        pkg.version.as_deref().unwrap_or("(no version)"),
        pkg.arch
            .as_deref()
            .map_or(String::new(), |a| format!(" ({a})")),
        path.display()
    )
}

/// The kernel one package holds by itself (its image, else its debug vmlinux, with its own
/// config, System.map, Module.symvers and modules), cached as that package's entry; `None`
/// when it holds neither.
fn package_kernel(
    path: &Path,
    read: &mut Read,
    identity: Option<&(std::fs::Metadata, u128)>,
    cache: Option<&crate::Cache>,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Option<LoadedKernel>, LoadError> {
    let pkg = &mut read.package;
    let take = |pkg: &mut Package, kind| {
        let i = pkg.members.iter().position(|m| m.kind == kind)?;
        Some(pkg.members.remove(i))
    };
    let mut k = if let Some(m) = take(pkg, MemberKind::Image) {
        rs.set_phase("package: the image");
        from_bytes(&label(path, &m.path), m.data, Duration::ZERO, opts, rs)?
    } else if let Some(m) = take(pkg, MemberKind::Vmlinux) {
        // Kept for the declaration lines (see `PackageParts::elf`): mapped, or in memory.
        let elf: klpsym_core::Backing = match (m.spilled, read.vmlinux.take()) {
            (true, Some(b)) => b,
            _ => std::sync::Arc::new(m.data),
        };
        rs.set_phase("package: the debug vmlinux");
        let mut k = from_binary(&label(path, &m.path), (*elf).as_ref(), opts, rs)?;
        k.elf = Some(ElfBytes(elf));
        k
    } else {
        return Ok(None);
    };
    k.facts
        .notes
        .push(format!("read from {}", k.path.display()));
    // The package names the kernel; the member is in the notes.
    k.path = path.to_path_buf();
    let mut parts = PackageParts {
        packages: vec![path.to_path_buf()],
        release: pkg.release().map(str::to_string),
        ..PackageParts::default()
    };
    rs.set_phase("package: config, Module.symvers, modules");
    add_parts(&mut parts, path, pkg, opts, rs)?;
    k.package = Some(parts);
    k.facts.notes.push(described(path, pkg));
    if let (Some(c), Some((meta, h))) = (cache, identity) {
        let _ = c.put(path, meta, *h, &k, opts, rs);
    }
    Ok(Some(k))
}

/// What a package adds to a kernel besides its image: config, Module.symvers, modules (those
/// named, when names are given).
fn add_parts(
    parts: &mut PackageParts,
    path: &Path,
    pkg: &mut Package,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<(), LoadError> {
    let adds = adds_of(path, pkg, opts, rs)?;
    merge(parts, path, adds);
    Ok(())
}

/// What the package at `path` adds, taken from its members: its first config and
/// Module.symvers, parsed, and its modules when the options read them (those named, when
/// names are given).
fn adds_of(
    path: &Path,
    pkg: &mut Package,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Adds, LoadError> {
    let mut adds = Adds {
        release: pkg.release().map(str::to_string),
        described: described(path, pkg),
        ..Adds::default()
    };
    for m in std::mem::take(&mut pkg.members) {
        match m.kind {
            MemberKind::Config if adds.config.is_none() => {
                adds.config = Some(parse_config(&m.data, &label(path, &m.path), rs)?);
            }
            MemberKind::Symvers if adds.symvers.is_none() => {
                adds.symvers = Some(parse_symvers(&m.data, &label(path, &m.path), rs)?);
            }
            MemberKind::Module if opts.package_modules => {
                let named = opts.package_module_names.as_ref().is_none_or(|names| {
                    let n = klpsym_core::normalize_module_name(&m.path);
                    names
                        .iter()
                        .any(|w| klpsym_core::normalize_module_name(w) == n)
                });
                if named {
                    adds.modules.push((m.path, m.data));
                }
            }
            _ => {}
        }
    }
    Ok(adds)
}

/// Joins what the package at `path` adds to a kernel's parts: a config or Module.symvers
/// the kernel has not got yet, and every module.
fn merge(parts: &mut PackageParts, path: &Path, adds: Adds) {
    if parts.config.is_none() {
        parts.config = adds.config;
    }
    if parts.symvers.is_none() {
        parts.symvers = adds.symvers;
    }
    if !adds.modules.is_empty() {
        let tree = parts
            .modules
            .get_or_insert_with(|| ModuleTree::from_members(path, Vec::new()));
        for (member, data) in adds.modules {
            tree.add_member(path, member, data);
        }
    }
}

/// The kernel of one release's packages: its image (cached, or from a package read now), its
/// debug vmlinux joined to it, and what the other packages add.
fn assemble(
    group: Group,
    cache: Option<&crate::Cache>,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let packages: Vec<PathBuf> = group.iter().map(|(p, _)| p.clone()).collect();
    let release = group.iter().find_map(|(_, p)| p.release());
    let mut image: Option<LoadedKernel> = None;
    let mut debug: Option<LoadedKernel> = None;
    let mut extra: Vec<(PathBuf, Adds)> = Vec::new();
    for (path, part) in group {
        let k = match part {
            Part::Cached(k) => *k,
            Part::CachedAdds(adds) => {
                extra.push((path, *adds));
                continue;
            }
            Part::Read { mut read, identity } => {
                match package_kernel(&path, &mut read, identity.as_ref(), cache, opts, rs)? {
                    Some(k) => k,
                    None => {
                        let adds = adds_of(&path, &mut read.package, opts, rs)?;
                        if let (Some(c), Some((meta, id))) = (cache, &identity) {
                            let _ = crate::parts_cache::put(c, &path, meta, *id, &adds, opts, rs);
                        }
                        extra.push((path, adds));
                        continue;
                    }
                }
            }
        };
        let slot = if k.kind == crate::loaded::SourceKind::VmlinuxElf {
            &mut debug
        } else {
            &mut image
        };
        if slot.is_none() {
            *slot = Some(k);
        }
    }
    let mut k = match (image, debug) {
        (Some(mut k), d) => {
            k.debug = d.map(Box::new);
            k
        }
        (None, Some(d)) => d,
        (None, None) => {
            let list: Vec<String> = packages.iter().map(|p| p.display().to_string()).collect();
            return Err(LoadError::Unrecognized {
                path: packages[0].clone(),
                what: format!(
                    "no kernel image (boot/vmlinuz-*, usr/lib/modules/*/vmlinuz) or debug vmlinux (usr/lib/debug/...) in {}{}",
                    list.join(", "),
                    release.as_deref().map_or(String::new(), |r| format!(" (release {r})"))
                ),
            });
        }
    };
    let mut parts = k.package.take().unwrap_or_default();
    for (path, adds) in extra {
        k.facts.notes.push(adds.described.clone());
        merge(&mut parts, &path, adds);
    }
    if let Some(d) = &k.debug {
        k.facts.notes.extend(
            d.facts
                .notes
                .iter()
                .filter(|n| n.starts_with("package "))
                .cloned(),
        );
    }
    parts.packages = packages;
    parts.release = parts.release.or(release);
    k.package = Some(parts);
    Ok(k)
}

/// The ELF to read debug info from at `path`: the file mapped, or the debug vmlinux of a
/// package (streamed out of it into a private temporary file, mapped).
pub(crate) fn elf_of(
    path: &Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<ElfBytes, LoadError> {
    if !is_package(path) {
        return crate::read::in_place(path, opts, rs).map(|f| ElfBytes(f.bytes));
    }
    let want = Want {
        vmlinux: true,
        ..Want::default()
    };
    let mut r = read_file(path, want, opts, rs)?;
    let m = r
        .package
        .members
        .into_iter()
        .find(|m| m.kind == MemberKind::Vmlinux)
        .ok_or_else(|| LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "no debug vmlinux in the package".into(),
        })?;
    Ok(ElfBytes(match (m.spilled, r.vmlinux.take()) {
        (true, Some(b)) => b,
        _ => std::sync::Arc::new(m.data),
    }))
}

/// The kernel file of the package at `path`: its image, else its debug vmlinux (mapped).
pub(crate) fn kernel_file_of(
    path: &Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<klpsym_core::Backing, LoadError> {
    let want = Want {
        image: true,
        vmlinux: true,
        ..Want::default()
    };
    let mut r = read_file(path, want, opts, rs)?;
    let mut members = r.package.members;
    let pick = |kind| members.iter().position(|m| m.kind == kind);
    match pick(MemberKind::Image).or_else(|| pick(MemberKind::Vmlinux)) {
        Some(i) => {
            let m = members.swap_remove(i);
            Ok(match (m.spilled, r.vmlinux.take()) {
                (true, Some(b)) => b,
                _ => std::sync::Arc::new(m.data),
            })
        }
        None => Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "no kernel image or vmlinux in the package".into(),
        }),
    }
}

impl ModuleTree {
    /// `--modules`: a folder of modules (scanned), or a package holding them (.deb, .rpm: its
    /// modules read in place).
    pub fn open(
        path: &Path,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<ModuleTree, LoadError> {
        if path.is_dir() {
            // /proc and /sys are never cached: they change under any stamp.
            let cacheable = !(path.starts_with("/proc") || path.starts_with("/sys"));
            return match &opts.cache {
                Some(c) if cacheable => crate::tree_cache::open(c, path, rs),
                _ => ModuleTree::scan_with(path, rs),
            };
        }
        if !is_package(path) {
            // Reports why it is not a folder.
            return ModuleTree::scan_with(path, rs);
        }
        let want = Want {
            modules: true,
            ..Want::default()
        };
        let p = read_file(path, want, opts, rs)?.package;
        Ok(ModuleTree::from_members(
            path,
            p.members
                .into_iter()
                .filter(|m| m.kind == MemberKind::Module)
                .map(|m| (m.path, m.data)),
        ))
    }
}
