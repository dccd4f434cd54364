//! Kernels from distribution packages, read in place (see `klpsym_package`): the packages of
//! one kernel release form one kernel, the image giving the table, a debug package the source
//! files and lines, the config, Module.symvers and modules what the module loader checks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use klpsym_core::resched::Resched;
use klpsym_package::{read_package, MemberKind, Package, Want};

use crate::config::parse_config;
use crate::decode::{from_binary, from_bytes};
use crate::error::LoadError;
use crate::loaded::{LoadedKernel, PackageParts};
use crate::modules::ModuleTree;
use crate::options::LoadOptions;
use crate::read::read_bounded;
use crate::symvers::parse_symvers;

/// True when `path` is a .deb or an RPM (by its first bytes).
pub fn is_package(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 24];
    std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .is_ok_and(|n| klpsym_package::detect(&head[..n]).is_some())
}

fn want(opts: &LoadOptions) -> Want {
    Want {
        image: true,
        vmlinux: true,
        modules: opts.package_modules,
        symvers: opts.package_modules,
    }
}

fn read(
    path: &Path,
    bytes: &[u8],
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Package, LoadError> {
    read_package(bytes, want(opts), opts.max_decompressed_size, rs).map_err(|source| {
        LoadError::Package {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// One package as `--kernel`: the kernel it holds.
pub(crate) fn load_one(
    path: &Path,
    bytes: &[u8],
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let p = read(path, bytes, opts, rs)?;
    let mut ks = kernels_of(vec![(path.to_path_buf(), p)], opts, rs)?;
    ks.remove(0).1
}

/// One kernel of packages given together, by the first package of its release, or the error
/// of a package that could not be read.
pub type PackageKernel = (PathBuf, Result<LoadedKernel, LoadError>);

/// Packages given together: grouped by the kernel release their paths name (packages naming
/// none join the first group), one kernel per release, in the order of first appearance.
///
/// Each kernel comes back with its own result: a package that cannot be read (over a limit,
/// damaged, not a kernel package) is an error for its path alone, and the kernels of the
/// others still load. Debug packages are passed over unread when `opts.debug_packages` is
/// false. Only a cancellation is everybody's error.
pub fn load_packages(
    paths: &[PathBuf],
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Vec<PackageKernel>, LoadError> {
    let cancelled = |e: &LoadError| matches!(e, LoadError::Cancelled);
    // Cached kernels first (image packages read without their modules): each stands alone
    // unless a package read below names the same release, which then joins it anew.
    // A kernel with all its package's modules is not cached; with the few a check names it is.
    let cache = opts
        .cache
        .as_ref()
        .filter(|_| !opts.package_modules || opts.package_module_names.is_some());
    let mut hits: Vec<(PathBuf, LoadedKernel)> = Vec::new();
    let mut read_all = Vec::new();
    let mut hashes = Vec::new();
    let mut out: Vec<PackageKernel> = Vec::new();
    // A package's bytes read, with its identity (see [`crate::input_identity`]).
    let read_one = |p: &Path, rs: &mut Resched| -> Result<(u128, Package), LoadError> {
        let bytes = read_bounded(p, opts.max_input_size, rs)?;
        let h = crate::input_identity(&bytes, rs).map_err(klpsym_core::BuildError::from)?;
        Ok((h, read(p, &bytes, opts, rs)?))
    };
    // Debug packages are passed over only beside others (a debug package alone is the kernel).
    let is_debug = crate::options::is_debug_package;
    let skip_debug = !opts.debug_packages && paths.iter().any(|p| !is_debug(p));
    for p in paths {
        if skip_debug && is_debug(p) {
            continue;
        }
        match cache.map(|c| c.get(p, opts, rs)).transpose() {
            Ok(Some(Some(k))) => {
                hits.push((p.clone(), k));
                continue;
            }
            Ok(_) => {}
            Err(e) if cancelled(&e) => return Err(e),
            // A cache entry that cannot be read is read anew from the package.
            Err(_) => {}
        }
        let meta = std::fs::metadata(p).ok();
        match read_one(p, rs) {
            Ok((h, pkg)) => {
                hashes.push((p.clone(), meta, h));
                read_all.push((p.clone(), pkg));
            }
            Err(e) if cancelled(&e) => return Err(e),
            Err(e) => out.push((p.clone(), Err(e))),
        }
    }
    let release_of_hit = |k: &LoadedKernel| k.package.as_ref().and_then(|p| p.release.clone());
    // A cached -dbg package's vmlinux (a package kernel read from an ELF) is the debug part of
    // the image of its release, whether that image was cached too or is read now.
    let is_debug_part =
        |k: &LoadedKernel| k.kind == crate::loaded::SourceKind::VmlinuxElf && k.package.is_some();
    let image_read = |r: &str| {
        read_all.iter().any(|(_, pkg): &(PathBuf, Package)| {
            pkg.release() == Some(r) && pkg.members.iter().any(|m| m.kind == MemberKind::Image)
        })
    };
    let (candidates, mut rest): (Vec<_>, Vec<_>) =
        hits.into_iter().partition(|(_, k)| is_debug_part(k));
    let mut debug_hits = Vec::new();
    for (p, k) in candidates {
        let r = release_of_hit(&k).unwrap_or_default();
        let image_hit = rest.iter().any(|(_, o): &(PathBuf, LoadedKernel)| {
            !is_debug_part(o) && release_of_hit(o).as_deref() == Some(r.as_str())
        });
        if !r.is_empty() && (image_read(&r) || image_hit) {
            debug_hits.push((p, k));
        } else {
            rest.push((p, k));
        }
    }
    for (p, k) in rest {
        let r = release_of_hit(&k);
        // Another package of its release read now (an image's headers, say) makes one
        // kernel with it: the cached one is read anew to join it.
        if r.is_some()
            && read_all
                .iter()
                .any(|(_, pkg)| pkg.release() == r.as_deref())
        {
            let meta = std::fs::metadata(&p).ok();
            match read_one(&p, rs) {
                Ok((h, pkg)) => {
                    // Its identity too: the kernel it joins may be kept part by part.
                    hashes.push((p.clone(), meta, h));
                    read_all.push((p.clone(), pkg));
                }
                Err(e) if cancelled(&e) => return Err(e),
                // The cached kernel still stands on its own.
                Err(_) => out.push((p.clone(), Ok(k))),
            }
        } else {
            out.push((p.clone(), Ok(k)));
        }
    }
    for (first, mut k) in kernels_of(read_all, opts, rs)? {
        if let (Ok(k), Some(c)) = (&mut k, cache) {
            keep(c, k, &hashes, opts, rs);
        }
        out.push((first, k));
    }
    // Each cached debug part joins the image of its release.
    for (p, d) in debug_hits {
        let r = release_of_hit(&d);
        let image = out.iter_mut().find_map(|(_, k)| {
            k.as_mut().ok().filter(|k| {
                k.debug.is_none()
                    && k.kind == crate::loaded::SourceKind::KernelImage
                    && k.package.as_ref().is_some_and(|pp| pp.release == r)
            })
        });
        match image {
            Some(k) => {
                if let Some(pp) = k.package.as_mut() {
                    pp.packages.push(p.clone());
                }
                k.facts.notes.extend(
                    d.facts
                        .notes
                        .iter()
                        .filter(|n| n.starts_with("package "))
                        .cloned(),
                );
                k.debug = Some(Box::new(d));
            }
            None => out.push((p, Ok(d))),
        }
    }
    // In the order the packages were given (hits were set aside first).
    out.sort_by_key(|(p, _)| paths.iter().position(|x| x == p));
    Ok(out)
}

/// Keeps what a kernel made of packages read now can give the next run: the kernel when it
/// is one package; for an image with its -dbg package (and nothing else), each part under its
/// own package, the debug part with its declaration lines. Failing to keep is not an error.
fn keep(
    c: &crate::Cache,
    k: &mut LoadedKernel,
    hashes: &[(PathBuf, Option<std::fs::Metadata>, u128)],
    opts: &LoadOptions,
    rs: &mut Resched,
) {
    let hash_of = |p: &Path| {
        hashes
            .iter()
            .find(|(q, _, _)| q == p)
            .and_then(|(_, m, h)| Some((m.as_ref()?, *h)))
    };
    let packages = k
        .package
        .as_ref()
        .map_or(Vec::new(), |p| p.packages.clone());
    match &packages[..] {
        [only] if k.debug.is_none() => {
            if let Some((meta, h)) = hash_of(only) {
                let _ = c.put(only, meta, h, k, opts, rs);
            }
        }
        // In either order (a cached image read anew to join comes after).
        [a, b]
            if k.debug
                .as_ref()
                .is_some_and(|d| d.path == *a || d.path == *b) =>
        {
            let dbg_is_a = k.debug.as_ref().is_some_and(|d| d.path == *a);
            let (image, dbg) = if dbg_is_a { (b, a) } else { (a, b) };
            if let Some((im, ih)) = hash_of(image) {
                let d = k.debug.take();
                if let Some(pp) = k.package.as_mut() {
                    pp.packages = vec![image.clone()];
                }
                let _ = c.put(image, im, ih, k, opts, rs);
                if let Some(pp) = k.package.as_mut() {
                    pp.packages = packages.clone();
                }
                k.debug = d;
            }
            // The release joins it to its image when both come from the cache.
            let release = k.package.as_ref().and_then(|p| p.release.clone());
            if let (Some((dm, dh)), Some(d)) = (hash_of(dbg), k.debug.as_deref_mut()) {
                if let Some(dp) = d.package.as_mut() {
                    dp.release = dp.release.take().or(release);
                }
                let _ = c.put(dbg, dm, dh, d, opts, rs);
            }
        }
        _ => {}
    }
}

fn label(pkg: &Path, member: &str) -> PathBuf {
    PathBuf::from(format!("{}:{member}", pkg.display()))
}

/// The packages of one kernel release, each with its path.
type Group = Vec<(PathBuf, Package)>;

/// The kernels of `packages`, one per release, each with the first package of its group.
fn kernels_of(
    packages: Vec<(PathBuf, Package)>,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Vec<PackageKernel>, LoadError> {
    let mut groups: Vec<(Option<String>, Group)> = Vec::new();
    for (path, p) in packages {
        let r = p.release().map(str::to_string);
        match groups
            .iter_mut()
            .find(|(g, _)| r.is_none() || g.is_none() || *g == r)
        {
            Some((g, v)) => {
                if g.is_none() {
                    *g = r;
                }
                v.push((path, p));
            }
            None => groups.push((r, vec![(path, p)])),
        }
    }
    let mut out = Vec::new();
    for (release, group) in groups {
        let first = group.first().map(|(p, _)| p.clone()).unwrap_or_default();
        match kernel_of(release, group, opts, rs) {
            Err(LoadError::Cancelled) => return Err(LoadError::Cancelled),
            k => out.push((first, k)),
        }
    }
    Ok(out)
}

fn kernel_of(
    release: Option<String>,
    mut group: Group,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let packages: Vec<PathBuf> = group.iter().map(|(p, _)| p.clone()).collect();
    let described: Vec<String> = group
        .iter()
        .map(|(p, pkg)| {
            format!(
                "package {} {}{}: {}",
                pkg.name.as_deref().unwrap_or("(unnamed)"),
                pkg.version.as_deref().unwrap_or("(no version)"),
                pkg.arch
                    .as_deref()
                    .map_or(String::new(), |a| format!(" ({a})")),
                p.display()
            )
        })
        .collect();
    let take = |group: &mut Group, kind| {
        group.iter_mut().find_map(|(p, pkg)| {
            let i = pkg.members.iter().position(|m| m.kind == kind)?;
            Some((p.clone(), pkg.members.remove(i)))
        })
    };
    let image = take(&mut group, MemberKind::Image);
    let vmlinux = take(&mut group, MemberKind::Vmlinux);
    let load_member = |pkg: &Path, m: klpsym_package::Member, rs: &mut Resched| {
        let name = label(pkg, &m.path);
        let mut k = if m.kind == MemberKind::Vmlinux {
            // Kept for the declaration lines (see `PackageParts::elf`).
            let mut k = from_binary(&name, &m.data, opts, rs)?;
            k.package = Some(PackageParts {
                packages: vec![pkg.to_path_buf()],
                elf: Some(std::sync::Arc::new(m.data)),
                ..PackageParts::default()
            });
            k
        } else {
            from_bytes(&name, m.data, Duration::ZERO, opts, rs)?
        };
        // The package names the kernel; the member is in the notes.
        k.facts
            .notes
            .push(format!("read from {}:{}", pkg.display(), m.path));
        k.path = pkg.to_path_buf();
        Ok::<_, LoadError>(k)
    };
    let mut k = match (image, vmlinux) {
        (Some((ip, im)), v) => {
            let mut k = load_member(&ip, im, rs)?;
            if let Some((vp, vm)) = v {
                k.debug = Some(Box::new(load_member(&vp, vm, rs)?));
            }
            k
        }
        (None, Some((vp, vm))) => load_member(&vp, vm, rs)?,
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
    k.facts.notes.extend(described);
    let mut parts = PackageParts {
        elf: k.package.take().and_then(|p| p.elf),
        packages,
        release,
        ..PackageParts::default()
    };
    if let Some((p, m)) = take(&mut group, MemberKind::Config) {
        parts.config = Some(parse_config(&m.data, &label(&p, &m.path), rs)?);
    }
    if let Some((p, m)) = take(&mut group, MemberKind::Symvers) {
        parts.symvers = Some(parse_symvers(&m.data, &label(&p, &m.path), rs)?);
    }
    if opts.package_modules {
        let mut mods = Vec::new();
        let mut root = None;
        for (p, pkg) in &mut group {
            for m in std::mem::take(&mut pkg.members) {
                let named = |path: &str| {
                    opts.package_module_names.as_ref().is_none_or(|names| {
                        let n = klpsym_core::normalize_module_name(path);
                        names
                            .iter()
                            .any(|w| klpsym_core::normalize_module_name(w) == n)
                    })
                };
                if m.kind == MemberKind::Module && named(&m.path) {
                    root.get_or_insert_with(|| p.clone());
                    mods.push((m.path, m.data));
                }
            }
        }
        if let Some(root) = root {
            parts.modules = Some(ModuleTree::from_members(&root, mods));
        }
    }
    k.package = Some(parts);
    Ok(k)
}

/// The ELF to read debug info from: `bytes` itself, or the debug vmlinux of a package.
pub(crate) fn elf_of(
    path: &Path,
    bytes: Vec<u8>,
    limit: u64,
    rs: &mut Resched,
) -> Result<Vec<u8>, LoadError> {
    if klpsym_package::detect(&bytes).is_none() {
        return Ok(bytes);
    }
    let want = Want {
        vmlinux: true,
        ..Want::default()
    };
    let p = read_package(&bytes, want, limit, rs).map_err(|source| LoadError::Package {
        path: path.to_path_buf(),
        source,
    })?;
    p.members
        .into_iter()
        .find(|m| m.kind == MemberKind::Vmlinux)
        .map(|m| m.data)
        .ok_or_else(|| LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "no debug vmlinux in the package".into(),
        })
}

/// `bytes` itself, or, for a package, its kernel image (else its debug vmlinux).
pub(crate) fn kernel_file_of(
    path: &Path,
    bytes: Vec<u8>,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Vec<u8>, LoadError> {
    if klpsym_package::detect(&bytes).is_none() {
        return Ok(bytes);
    }
    let p = read(
        path,
        &bytes,
        &LoadOptions {
            package_modules: false,
            ..opts.clone()
        },
        rs,
    )?;
    let mut members = p.members;
    let pick = |kind| members.iter().position(|m| m.kind == kind);
    match pick(MemberKind::Image).or_else(|| pick(MemberKind::Vmlinux)) {
        Some(i) => Ok(members.swap_remove(i).data),
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
        let bytes = read_bounded(path, opts.max_input_size, rs)?;
        let want = Want {
            modules: true,
            ..Want::default()
        };
        let p = read_package(&bytes, want, opts.max_decompressed_size, rs).map_err(|source| {
            LoadError::Package {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(ModuleTree::from_members(
            path,
            p.members
                .into_iter()
                .filter(|m| m.kind == MemberKind::Module)
                .map(|m| (m.path, m.data)),
        ))
    }
}
