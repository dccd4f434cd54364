//! A livepatch module read once, with what a check needs before opening kernels.

use std::path::{Path, PathBuf};

use klpsym_core::{bulk, Resched};
use klpsym_livepatch::{LivepatchModule, StructLayouts};

use crate::error::{Error, Result};
use crate::options::Options;

/// A livepatch module read from a file (or bytes), with what a caller needs before opening
/// the kernels it will be checked against.
#[derive(Debug)]
pub struct Patch {
    pub(crate) path: PathBuf,
    pub(crate) bytes: Vec<u8>,
    objects: Vec<String>,
    vermagic: Option<String>,
}

impl Patch {
    /// Reads and parses the module at `path`. An unreadable or malformed file is an error
    /// naming it. (It is parsed again against each kernel, with that kernel's struct layouts.)
    pub fn read(path: impl AsRef<Path>, opts: &Options) -> Result<Patch> {
        let path = path.as_ref();
        // A folder is not a patch (the message for a kernel source's folder would point at
        // --modules).
        if path.is_dir() {
            return Err(Error::usage(format!(
                "patch {}: is a directory; the patch is one module file (.ko, .ko.xz, .ko.zst or .ko.gz)",
                path.display()
            )).about(crate::error::Input::Patch));
        }
        let mut rs = opts.resched();
        let bytes = read_module(path, opts.max_input_size, &mut rs).map_err(|e| {
            Error::from(e)
                .context("patch")
                .about(crate::error::Input::Patch)
        })?;
        Patch::from_bytes(path, bytes, &mut rs)
    }

    /// A patch from bytes already read; `path` names it in messages.
    pub fn from_bytes(path: impl AsRef<Path>, bytes: Vec<u8>, rs: &mut Resched) -> Result<Patch> {
        let path = path.as_ref();
        let m = parse(path, &bytes, &StructLayouts::fallback(6, 1), rs)?;
        let objects = objects_of(&m);
        let vermagic = m.modinfo("vermagic").map(str::to_string);
        m.drop_with_points(rs)?;
        Ok(Patch {
            path: path.to_path_buf(),
            bytes,
            objects,
            vermagic,
        })
    }

    /// Its vermagic (`6.1.0-57-amd64 SMP preempt mod_unload modversions `), when it has one.
    pub fn vermagic(&self) -> Option<&str> {
        self.vermagic.as_deref()
    }

    /// The release its vermagic names (`6.1.0-57-amd64`): the kernel it was built for.
    pub fn built_for_release(&self) -> Option<String> {
        self.vermagic
            .as_deref()
            .and_then(|v| v.split_whitespace().next())
            .map(str::to_string)
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The objects it patches (`vmlinux`, module names), in its `klp_object` order, as the
    /// common struct layouts read them.
    pub fn objects(&self) -> &[String] {
        &self.objects
    }

    /// True when checking it needs the target's modules (a package's modules are then read):
    /// it patches a module, or its objects could not be read.
    pub fn needs_modules(&self) -> bool {
        self.objects.is_empty() || self.objects.iter().any(|o| o != "vmlinux")
    }

    /// The modules a check of this patch reads from a package
    /// ([`Options::for_patch`]):
    /// its objects but vmlinux; `None` (every module) for a module that is not a livepatch,
    /// whose references any module may export.
    pub fn module_objects(&self) -> Option<Vec<String>> {
        (!self.objects.is_empty()).then(|| {
            self.objects
                .iter()
                .filter(|o| *o != "vmlinux")
                .cloned()
                .collect()
        })
    }
}

impl Options {
    /// These options for opening the kernels `patch` will be checked against: a package's
    /// modules of the patch's objects are read with it (and cached with it), so the check
    /// does not read the package again. Without it a check reads them itself.
    pub fn for_patch(mut self, patch: &Patch) -> Options {
        self.package_module_names = patch
            .needs_modules()
            .then(|| patch.module_objects())
            .flatten();
        if patch.needs_modules() && self.package_module_names.is_none() {
            // A module that is not a livepatch: any module may export what it refers to.
            self.package_module_names = Some(Vec::new());
        }
        self
    }
}

/// The module at `path` parsed with `layouts`, or the error naming it.
pub(crate) fn parse<'d>(
    path: &Path,
    bytes: &'d [u8],
    layouts: &StructLayouts,
    rs: &mut Resched,
) -> Result<LivepatchModule<'d>> {
    LivepatchModule::parse_with(bytes, layouts, rs).map_err(|e| {
        if let klpsym_livepatch::ParseError::Cancelled = e {
            return Error::cancelled();
        }
        let hint = if path.is_dir() {
            " (the patch is one module file; a module tree is the target's modules)"
        } else {
            ""
        };
        Error::bad_input(format!("patch {}: {e}{hint}", path.display()))
            .about(crate::error::Input::Patch)
    })
}

/// The objects of a parsed patch, by name.
pub(crate) fn objects_of(m: &LivepatchModule<'_>) -> Vec<String> {
    match &m.patch {
        Ok(p) => p
            .objects
            .iter()
            .map(|o| o.object_name().to_string())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A module file's ELF bytes: a `.ko`, or a `.ko.xz`/`.ko.zst`/`.ko.gz` decompressed (known by
/// its magic, not its name) as modprobe or the kernel (CONFIG_MODULE_DECOMPRESS) does before
/// the module loader reads it. At most `limit` bytes either way.
pub(crate) fn read_module(
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> std::result::Result<Vec<u8>, klpsym_io::LoadError> {
    let raw = klpsym_io::read_bounded(path, limit, rs)?;
    let plain = match klpsym_io::decompressed(&raw, path, limit, rs)? {
        std::borrow::Cow::Owned(v) => Some(v),
        std::borrow::Cow::Borrowed(_) => None,
    };
    match plain {
        Some(v) => {
            bulk::free_with_points(raw, rs)?;
            Ok(v)
        }
        None => Ok(raw),
    }
}
