//! Module trees (`--modules DIR`), which modules count as loaded (`--loaded`), and composing a
//! kernel's table from vmlinux plus its loaded modules.
//!
//! /proc/kallsyms lists vmlinux, then the loaded modules newest first (the order of
//! /proc/modules), then pseudo-objects. A composed table keeps that order: `--loaded a,b,c`
//! names the modules in the order /proc/kallsyms would list them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_core::{normalize_module_name, ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};

use crate::detect::{detect, Detected};
use crate::error::LoadError;
use crate::error::{elf_error, image_error};
use crate::options::LoadOptions;
use crate::read::read_bounded;

/// Every module file under a directory (or in a package), by the name the kernel gives it.
#[derive(Debug, Clone, Default)]
pub struct ModuleTree {
    /// The directory scanned (for a package: the package).
    pub root: PathBuf,
    pub(crate) by_name: BTreeMap<String, ModuleFile>,
    /// Names found more than once (the first path, in sorted order, wins).
    pub duplicates: Vec<String>,
    /// The cache entry the listing was read from, when it was (see `klpsym cache`).
    pub listing: Option<PathBuf>,
}

const MODULE_SUFFIXES: &[&str] = &[".ko", ".ko.xz", ".ko.zst", ".ko.gz"];

/// Where a module's bytes are: a file, or a member of a package already read into memory.
#[derive(Debug, Clone)]
pub enum ModuleFile {
    /// A file on disk.
    Path(PathBuf),
    /// A package member: `PACKAGE:PATH` names it.
    Member {
        /// The name shown: `linux-image-...deb:lib/modules/.../ext4.ko`.
        label: PathBuf,
        /// Its bytes as stored (possibly compressed).
        data: std::sync::Arc<Vec<u8>>,
    },
}

impl ModuleFile {
    /// The path or `PACKAGE:MEMBER` label, for messages.
    pub fn label(&self) -> &Path {
        match self {
            ModuleFile::Path(p) => p,
            ModuleFile::Member { label, .. } => label,
        }
    }

    /// Reads (for a file), decompresses and parses the module.
    pub fn load(
        &self,
        opts: &LoadOptions,
        resched: &mut Resched,
    ) -> Result<klpsym_elf::ModuleSymbols, LoadError> {
        match self {
            ModuleFile::Path(p) => load_module_file(p, opts, resched),
            ModuleFile::Member { label, data } => module_from_bytes(label, data, opts, resched),
        }
    }
}
/// A directory of a walked tree as the file system described it just before it was read:
/// adding, removing or renaming an entry in it changes its mtime and ctime (and replacing it
/// changes its inode), so a tree whose every directory still has its stamp lists the same
/// files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirStamp {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mtime: (i64, i64),
    pub(crate) ctime: (i64, i64),
}

impl DirStamp {
    /// The stamp of a directory's `stat`, or `None` when it is not a directory.
    #[allow(clippy::unnecessary_cast)] // the field types differ between architectures
    pub(crate) fn of(st: &rustix::fs::Stat) -> Option<DirStamp> {
        rustix::fs::FileType::from_raw_mode(st.st_mode as _)
            .is_dir()
            .then_some(DirStamp {
                dev: st.st_dev as u64,
                ino: st.st_ino as u64,
                mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
                ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            })
    }
}

/// `stat` of a directory as a stamp (`follow`: through a symbolic link).
fn stamp_of(path: &Path, follow: bool) -> std::io::Result<DirStamp> {
    let st = if follow {
        rustix::fs::stat(path)
    } else {
        rustix::fs::lstat(path)
    }?;
    DirStamp::of(&st).ok_or_else(|| std::io::Error::other("not a directory"))
}

/// The module files under `dir`, sorted as paths sort; with `stamps`, also every directory
/// read (its path relative to `dir`, "" for `dir` itself) with its stamp, taken before it
/// was read.
pub(crate) fn walk(
    dir: &Path,
    resched: &mut Resched,
    mut stamps: Option<&mut Vec<(PathBuf, DirStamp)>>,
) -> Result<Vec<PathBuf>, LoadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    if let Some(s) = stamps.as_deref_mut() {
        // The root as read_dir will read it: through a symbolic link.
        s.push((PathBuf::new(), stamp_of(dir, true).map_err(io(dir))?));
    }
    let mut stack = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    // A directory is read 4 KiB of entries a `getdents64` call (about a hundred): libc's
    // `readdir` asks for 32 KiB, and the kernel fills it in one call (up to 350 µs for a big
    // directory here).
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4 << 10];
    while let Some(d) = stack.pop() {
        use rustix::fs::{FileType, Mode, OFlags};
        use std::os::unix::ffi::OsStrExt;
        let fd = rustix::fs::open(
            &d,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(&d)(e.into()))?;
        let mut entries = rustix::fs::RawDir::new(&fd, &mut buf);
        while let Some(e) = entries.next() {
            resched.tick()?;
            let e = e.map_err(|e| io(&d)(e.into()))?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let p = d.join(std::ffi::OsStr::from_bytes(name));
            let ft = match e.file_type() {
                FileType::Unknown => {
                    // The file system does not say (DT_UNKNOWN): as `std::fs::DirEntry` does.
                    let st = rustix::fs::lstat(&p).map_err(|e| io(&p)(e.into()))?;
                    FileType::from_raw_mode(st.st_mode)
                }
                t => t,
            };
            if ft == FileType::Directory {
                if let Some(s) = stamps.as_deref_mut() {
                    // Not followed: a directory entry, as file_type saw it.
                    let stamp = stamp_of(&p, false).map_err(io(&p))?;
                    s.push((p.strip_prefix(dir).unwrap_or(&p).to_path_buf(), stamp));
                }
                stack.push(p);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                if MODULE_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                    files.push(p);
                }
            }
        }
    }
    // Sorted as paths sort (component by component), by a key compared as plain bytes:
    // '/' made the lowest byte orders a component before any longer one it prefixes
    // (Path's own comparison, component-wise, took a fifth of a warm `check` here).
    // Keyed, sorted and unkeyed in steps (thousands of paths: a millisecond at once).
    let mut keyed: Vec<(Vec<u8>, PathBuf)> = Vec::with_capacity(files.len());
    for p in files {
        resched.tick()?;
        let key = p
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .map(|&b| if b == b'/' { 0 } else { b })
            .collect();
        keyed.push((key, p));
    }
    let keyed = klpsym_core::bulk::sort_owned_by_with_points(keyed, |a, b| a.0.cmp(&b.0), resched)?;
    let mut sorted = Vec::with_capacity(keyed.len());
    for (key, p) in keyed {
        resched.tick()?;
        drop(key);
        sorted.push(p);
    }
    Ok(sorted)
}

impl ModuleTree {
    /// One kernel's modules from several places at once (a package's or a module tree, and
    /// folders of out-of-tree modules): every module of each, by its kernel name; a name in
    /// several is the first place's (the others' recorded in [`ModuleTree::duplicates`]). The
    /// root is the first's.
    pub fn join(trees: &[&ModuleTree], resched: &mut Resched) -> Result<ModuleTree, LoadError> {
        let mut out = ModuleTree {
            root: trees.first().map(|t| t.root.clone()).unwrap_or_default(),
            ..ModuleTree::default()
        };
        for t in trees {
            out.duplicates.extend(t.duplicates.iter().cloned());
            for (name, file) in &t.by_name {
                resched.tick()?;
                match out.by_name.entry(name.clone()) {
                    std::collections::btree_map::Entry::Occupied(e) => {
                        out.duplicates.push(e.key().clone())
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        e.insert(file.clone());
                    }
                }
            }
        }
        Ok(out)
    }

    /// Walks `dir` (e.g. /lib/modules/VERSION) for `.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`.
    pub fn scan(dir: &Path) -> Result<ModuleTree, LoadError> {
        ModuleTree::scan_with(dir, &mut Resched::none())
    }

    /// Frees the tree in steps with reschedule points: a distribution's tree is thousands of
    /// paths (a quarter of a millisecond to drop at once here).
    pub fn free_with(self, resched: &mut Resched) -> Result<(), klpsym_core::Cancelled> {
        klpsym_core::bulk::free_each_with_points(self.by_name.into_iter(), resched)?;
        klpsym_core::bulk::free_with_points(self.duplicates, resched)
    }

    /// [`ModuleTree::scan`] with reschedule points.
    pub fn scan_with(dir: &Path, resched: &mut Resched) -> Result<ModuleTree, LoadError> {
        resched.set_phase("module tree: walk the folders");
        let files = walk(dir, resched, None)?;
        ModuleTree::from_sorted_paths(dir, files, resched)
    }

    /// The tree of `dir` whose module files are `files`, sorted as [`walk`] sorts them (the
    /// first path of a name wins).
    pub(crate) fn from_sorted_paths(
        dir: &Path,
        files: Vec<PathBuf>,
        resched: &mut Resched,
    ) -> Result<ModuleTree, LoadError> {
        let mut tree = ModuleTree {
            root: dir.to_path_buf(),
            ..ModuleTree::default()
        };
        for p in files {
            resched.tick()?;
            let name = normalize_module_name(&p.to_string_lossy());
            match tree.by_name.entry(name) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    tree.duplicates.push(e.key().clone())
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(ModuleFile::Path(p));
                }
            }
        }
        Ok(tree)
    }

    /// The modules of a package (members `(path, bytes)`), named `PACKAGE:PATH`.
    pub fn from_members(
        package: &Path,
        members: impl IntoIterator<Item = (String, Vec<u8>)>,
    ) -> ModuleTree {
        let mut tree = ModuleTree {
            root: package.to_path_buf(),
            ..ModuleTree::default()
        };
        let mut members: Vec<(String, Vec<u8>)> = members.into_iter().collect();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, data) in members {
            let name = normalize_module_name(&path);
            let file = ModuleFile::Member {
                label: PathBuf::from(format!("{}:{path}", package.display())),
                data: std::sync::Arc::new(data),
            };
            match tree.by_name.entry(name) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    tree.duplicates.push(e.key().clone())
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(file);
                }
            }
        }
        tree
    }

    /// Adds member `path` of `package` (read in archive order): of two modules of one name,
    /// the first path in sorted order wins, as [`ModuleTree::from_members`] decides.
    pub(crate) fn add_member(&mut self, package: &Path, path: String, data: Vec<u8>) {
        let name = normalize_module_name(&path);
        let label = PathBuf::from(format!("{}:{path}", package.display()));
        let file = ModuleFile::Member {
            label,
            data: std::sync::Arc::new(data),
        };
        match self.by_name.entry(name) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                self.duplicates.push(e.key().clone());
                if file.label() < e.get().label() {
                    e.insert(file);
                }
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(file);
            }
        }
    }

    /// Every module's file, in module-name order.
    pub fn files(&self) -> impl Iterator<Item = &ModuleFile> {
        self.by_name.values()
    }

    /// Number of modules found.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when the tree holds no module.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The package members it holds: (member path, bytes as stored), in name order; empty for
    /// a tree of files.
    pub(crate) fn members(&self) -> Vec<(&str, &[u8])> {
        let prefix = format!("{}:", self.root.display());
        self.by_name
            .values()
            .filter_map(|f| match f {
                ModuleFile::Member { label, data } => {
                    let l = label.to_str()?;
                    Some((
                        l.strip_prefix(prefix.as_str()).unwrap_or(l),
                        data.as_slice(),
                    ))
                }
                ModuleFile::Path(_) => None,
            })
            .collect()
    }

    /// The file of module `name` (any spelling).
    pub fn file(&self, name: &str) -> Option<&ModuleFile> {
        self.by_name.get(&normalize_module_name(name))
    }

    /// Reads, decompresses and parses module `name`.
    pub fn load(
        &self,
        name: &str,
        opts: &LoadOptions,
        resched: &mut Resched,
    ) -> Result<klpsym_elf::ModuleSymbols, LoadError> {
        let file = self.file(name).ok_or_else(|| {
            LoadError::Setup(format!(
                "module '{}' is not in {} ({} modules there)",
                normalize_module_name(name),
                self.root.display(),
                self.len()
            ))
        })?;
        file.load(opts, resched)
    }
}

/// Reads a `.ko` (compressed or not) and lists its kallsyms.
pub fn load_module_file(
    path: &Path,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<klpsym_elf::ModuleSymbols, LoadError> {
    resched.set_phase("module: read the file");
    let bytes = read_bounded(path, opts.max_input_size, resched)?;
    module_from_bytes(path, &bytes, opts, resched)
}

/// A module's bytes (a `.ko`, or compressed) to its kallsyms; `path` names it in errors.
fn module_from_bytes(
    path: &Path,
    bytes: &[u8],
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<klpsym_elf::ModuleSymbols, LoadError> {
    let limit = usize::try_from(opts.max_decompressed_size).unwrap_or(usize::MAX);
    let parse = |b: &[u8], resched: &mut Resched| {
        klpsym_elf::module_kallsyms_with(b, klpsym_elf::ModuleOptions::default(), resched)
            .map_err(|source| elf_error(path, source))
    };
    match detect(bytes) {
        Detected::ElfRelocatable => parse(bytes, resched),
        Detected::Compressed(_) => {
            let d = klpsym_image::decompress_image_with(bytes, limit, resched)
                .map_err(|source| image_error(path, source))?;
            parse(&d.data, resched)
        }
        other => Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: format!("expected a kernel module (ELF relocatable object), found {other:?}"),
        }),
    }
}

/// Which modules count as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedSpec {
    /// Names in /proc/kallsyms order (newest first).
    List(Vec<String>),
    /// The modules listed in a /proc/modules-format file, in its order.
    ProcModules(PathBuf),
}

impl LoadedSpec {
    /// The module names, in /proc/kallsyms order.
    pub fn names(&self) -> Result<Vec<String>, LoadError> {
        match self {
            LoadedSpec::List(v) => Ok(v.clone()),
            LoadedSpec::ProcModules(p) => {
                let bytes = read_bounded(p, 64 << 20, &mut Resched::none())?;
                let text = String::from_utf8(bytes).map_err(|e| LoadError::Unrecognized {
                    path: p.clone(),
                    what: format!("not text ({e}): expected /proc/modules format"),
                })?;
                let mut names = Vec::new();
                for (i, line) in text.lines().enumerate() {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let Some(&first) = fields.first() else {
                        continue;
                    };
                    let valid = fields.len() >= 3
                        && fields[1].bytes().all(|c| c.is_ascii_digit())
                        && first
                            .bytes()
                            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
                    if !valid {
                        return Err(LoadError::Unrecognized {
                            path: p.clone(),
                            what: format!("line {}: expected /proc/modules format (`name size refcount deps state address`)", i + 1),
                        });
                    }
                    names.push(normalize_module_name(first));
                }
                Ok(names)
            }
        }
    }
}

/// Where placed module addresses come from.
#[derive(Debug, Clone, Copy)]
pub enum Placement<'a> {
    /// No placement: offline modules keep section-relative addresses.
    None,
    /// A /proc/kallsyms (live or captured) that lists the modules: each is placed so that every
    /// one of its symbols lands exactly where the kernel shows it.
    Kallsyms(&'a SymbolTable),
}

/// Builds the table of a kernel made of `base` (its vmlinux and whatever objects it lists) plus
/// the modules `loaded` from `tree` that `base` does not already list.
pub fn compose(
    base: &SymbolTable,
    tree: Option<&ModuleTree>,
    loaded: &[String],
    placement: Placement<'_>,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<SymbolTable, LoadError> {
    Ok(compose_with_layouts(base, tree, loaded, placement, None, opts, resched)?.0)
}

/// What [`compose_with_layouts`] makes: the table, and where each placed module's memory is.
pub type Composed = (SymbolTable, Vec<(String, klpsym_elf::ModuleLayout)>);

/// [`compose`], and for each module placed from its `.ko`, its layout as the loader of a
/// kernel of `version` laid it out (`None`: not computed), for `%pS`.
pub fn compose_with_layouts(
    base: &SymbolTable,
    tree: Option<&ModuleTree>,
    loaded: &[String],
    placement: Placement<'_>,
    version: Option<(u32, u32)>,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<Composed, LoadError> {
    let mut layouts = Vec::new();
    let mut b = SymbolTableBuilder::with_capacity(base.len(), base.len() * 24);
    b.set_addr_width(base.addr_width());
    let push_object = |b: &mut SymbolTableBuilder,
                       oid_in: ObjectId,
                       resched: &mut Resched|
     -> Result<(), LoadError> {
        let info = base.object_info(oid_in);
        let oid = if info.kind == ObjectKind::Vmlinux {
            ObjectId::VMLINUX
        } else {
            b.object(&info.name, info.kind)
        };
        b.set_unplaced(oid, info.unplaced);
        for s in base.iter().filter(|s| s.object == oid_in) {
            resched.tick().map_err(klpsym_core::BuildError::from)?;
            b.push(oid, s.addr, s.kind as u8, s.name)?;
            if let Some(f) = base.file(s.id) {
                b.set_last_file(f);
            }
        }
        Ok(())
    };
    push_object(&mut b, ObjectId::VMLINUX, resched)?;
    for (i, info) in base.objects().iter().enumerate().skip(1) {
        if info.kind == ObjectKind::Module {
            push_object(&mut b, ObjectId(i as u32), resched)?;
        }
    }
    for name in loaded {
        if base.object_by_name(name).is_some() {
            continue;
        }
        let tree = tree.ok_or_else(|| {
            LoadError::Setup(format!(
                "module '{name}' is named as loaded, but no module tree says where its file is"
            ))
        })?;
        let m = tree.load(name, opts, resched)?;
        let addrs = match placement {
            Placement::None => None,
            Placement::Kallsyms(k) => {
                let oid = k.object_by_name(&m.name).ok_or_else(|| {
                    LoadError::Setup(format!(
                        "module '{}' is not listed in the placement source",
                        m.name
                    ))
                })?;
                let lines: Vec<(u64, u8, &str)> = k
                    .iter()
                    .filter(|s| s.object == oid)
                    .map(|s| (s.addr, s.kind as u8, s.name))
                    .collect();
                let path = tree
                    .file(name)
                    .map_or(Path::new(name), ModuleFile::label)
                    .to_path_buf();
                Some(
                    klpsym_elf::place_module(&m, &lines)
                        .map_err(|source| LoadError::Elf { path, source })?,
                )
            }
        };
        if let (Some(a), Some(v)) = (&addrs, version) {
            let bases = klpsym_elf::section_bases(&m, a);
            layouts.push((m.name.clone(), klpsym_elf::module_layout(&m, &bases, v)));
        }
        let oid = b.object(&m.name, ObjectKind::Module);
        b.set_unplaced(oid, addrs.is_none());
        for (i, e) in m.entries.iter().enumerate() {
            resched.tick().map_err(klpsym_core::BuildError::from)?;
            b.push(oid, addrs.as_ref().map_or(e.addr, |a| a[i]), e.kind, e.name)?;
            if let Some(f) = e.file {
                b.set_last_file(f);
            }
        }
        m.free_with_points(resched)
            .map_err(klpsym_core::BuildError::from)?;
    }
    for (i, info) in base.objects().iter().enumerate().skip(1) {
        if info.kind == ObjectKind::Pseudo {
            push_object(&mut b, ObjectId(i as u32), resched)?;
        }
    }
    Ok((b.build(), layouts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_spec_reads_proc_modules_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("modules");
        std::fs::write(&p, "8021q 40960 0 - Live 0xffffffffc0300000\ngarp 20480 1 8021q, Live 0xffffffffc0290000\n").unwrap();
        let spec = LoadedSpec::ProcModules(p.clone());
        assert_eq!(
            spec.names().unwrap(),
            vec!["8021q".to_string(), "garp".to_string()]
        );
        std::fs::write(&p, "ffffffff81000000 T _text\n").unwrap();
        assert!(spec.names().is_err());
    }

    #[test]
    fn the_first_path_in_path_order_wins_a_duplicate() {
        // Component by component "a" sorts before "a-b", though '-' is below '/' as a byte.
        let dir = tempfile::tempdir().unwrap();
        for d in ["a-b", "a", "a/z"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in [
            "a-b/x.ko",
            "a/z/x.ko.xz",
            "a/x.ko.zst",
            "a/z/y.ko",
            "a-b/y.ko",
        ] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let t = ModuleTree::scan(dir.path()).unwrap();
        let at = |name: &str| {
            t.file(name)
                .unwrap()
                .label()
                .strip_prefix(dir.path())
                .unwrap()
                .to_owned()
        };
        assert_eq!(at("x"), Path::new("a/x.ko.zst"));
        assert_eq!(at("y"), Path::new("a/z/y.ko"));
        assert_eq!(t.duplicates, ["x", "x", "y"]);
    }

    #[test]
    fn scan_finds_modules_by_kernel_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernel/lib")).unwrap();
        std::fs::write(dir.path().join("kernel/lib/crc-itu-t.ko"), b"x").unwrap();
        std::fs::write(dir.path().join("kernel/lib/zz.ko.xz"), b"x").unwrap();
        std::fs::write(dir.path().join("kernel/lib/readme.txt"), b"x").unwrap();
        let t = ModuleTree::scan(dir.path()).unwrap();
        assert_eq!(t.len(), 2);
        assert!(t.file("crc_itu_t").is_some());
        assert!(t.file("zz").is_some());
        let e = t
            .load("nope", &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("module 'nope' is not in"), "{e}");
    }

    #[test]
    fn joined_trees_offer_every_module_the_first_place_winning_a_name() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("dummy.ko"), b"x").unwrap();
        std::fs::write(a.path().join("crc7.ko"), b"x").unwrap();
        // An out-of-tree folder: its own module, and one of the package's names again.
        std::fs::write(b.path().join("oot-drv.ko"), b"x").unwrap();
        std::fs::write(b.path().join("dummy.ko.xz"), b"x").unwrap();
        let (ta, tb) = (
            ModuleTree::scan(a.path()).unwrap(),
            ModuleTree::scan(b.path()).unwrap(),
        );
        let t = ModuleTree::join(&[&ta, &tb], &mut Resched::none()).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.root, a.path());
        assert!(t.file("oot_drv").unwrap().label().starts_with(b.path()));
        assert!(t.file("dummy").unwrap().label().starts_with(a.path()));
        assert_eq!(t.duplicates, ["dummy"]);
    }
}
