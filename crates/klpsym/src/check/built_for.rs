//! The kernel a patch was built for: named by the caller, or found among the kernels given
//! by the release the patch's vermagic names, once for a run (a matrix of opened kernels, or a
//! fleet that opens them one at a time: one rule, [`pick_release`]).

use std::path::Path;
use std::sync::Arc;

use klpsym_core::Resched;

use super::{CheckOptions, Patch};
use crate::binding::BuiltForWay;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// The kernel a patch was built for, found once for a run: the one named
/// ([`CheckOptions::built_for`]), else the first of the kernels given whose release the
/// patch's vermagic names ([`pick_release`], for a matrix and a fleet alike).
#[derive(Debug)]
pub(crate) struct BuiltFor {
    found: Found,
    /// The release the patch's vermagic names.
    pub(super) release: Option<String>,
    /// Why the proof is not one, when the named kernel is another release than the patch's.
    pub(super) mismatch: Option<String>,
    /// Named, or found by the vermagic's release.
    pub(super) way: BuiltForWay,
}

/// Where the built-for kernel is.
#[derive(Debug)]
enum Found {
    /// Nowhere among the kernels given.
    Nowhere,
    /// Opened for the run (named, or a fleet's kernel opened to be compared with).
    Opened(Arc<Kernel>),
    /// The kernel at this index of the kernels checked.
    Among(usize),
}

/// The index of the first of `releases` (each kernel's, in the order given) that is
/// `release`: where the kernel a patch was built for is among kernels given, by the release
/// its vermagic names. A matrix asks it of its opened kernels, a fleet of its units'
/// packages (then of the kernels it opens): one rule.
pub(crate) fn pick_release<I>(release: &str, releases: I) -> Option<usize>
where
    I: IntoIterator<Item = Option<String>>,
{
    releases
        .into_iter()
        .position(|r| r.as_deref() == Some(release))
}

impl BuiltFor {
    /// The built-for kernel of a run over `kernels`, all opened: named, or among them.
    pub(super) fn among(
        patch: &Patch,
        kernels: &[&Kernel],
        copts: &CheckOptions,
        opts: &crate::Options,
    ) -> Result<BuiltFor> {
        if copts.built_for.is_some() {
            return BuiltFor::named(patch, copts, opts);
        }
        let release = patch.built_for_release();
        let found = release
            .as_deref()
            .and_then(|r| pick_release(r, kernels.iter().map(|k| k.release())))
            .map_or(Found::Nowhere, Found::Among);
        Ok(BuiltFor {
            found,
            release,
            mismatch: None,
            way: BuiltForWay::Vermagic,
        })
    }

    /// The built-for kernel [`CheckOptions::built_for`] names, opened.
    pub(crate) fn named(
        patch: &Patch,
        copts: &CheckOptions,
        opts: &crate::Options,
    ) -> Result<BuiltFor> {
        let release = patch.built_for_release();
        let Some(p) = &copts.built_for else {
            return Ok(BuiltFor::opened(None, release));
        };
        let k = open_built_for(p, opts)?;
        let mismatch = release.as_ref().and_then(|r| {
            k.release().filter(|kr| kr != r).map(|kr| {
                format!(
                    "the built-for kernel {} is release {kr}, but the patch's vermagic names {r}: its bindings were compared with a build the patch was not made against",
                    k.path().display()
                )
            })
        });
        Ok(BuiltFor {
            found: Found::Opened(Arc::new(k)),
            release,
            mismatch,
            way: BuiltForWay::Given,
        })
    }

    /// A built-for kernel a fleet opened among its kernels by the vermagic's release (or
    /// found nowhere: `None`).
    pub(crate) fn opened(kernel: Option<Kernel>, release: Option<String>) -> BuiltFor {
        BuiltFor {
            found: kernel.map_or(Found::Nowhere, |k| Found::Opened(Arc::new(k))),
            release,
            mismatch: None,
            way: BuiltForWay::Vermagic,
        }
    }

    pub(super) fn kernel<'a>(&'a self, kernels: &[&'a Kernel]) -> Option<&'a Kernel> {
        match &self.found {
            Found::Nowhere => None,
            Found::Opened(k) => Some(k.as_ref()),
            Found::Among(i) => kernels.get(*i).copied(),
        }
    }

    /// Frees an opened built-for kernel with reschedule points.
    pub(crate) fn free(self, rs: &mut Resched) -> Result<()> {
        if let Found::Opened(k) = self.found {
            if let Ok(k) = Arc::try_unwrap(k) {
                k.free(rs)?;
            }
        }
        Ok(())
    }
}

/// Opens the built-for kernel: one kernel (a folder or several packages must form exactly one),
/// with its debug package read (source files give definitions their identity).
pub(crate) fn open_built_for(path: &Path, opts: &crate::Options) -> Result<Kernel> {
    // Its own kernel: the checked kernels' debug vmlinux, loaded modules and placement are
    // theirs, not the built-for build's.
    let opts = crate::Options {
        progress: None,
        debug_vmlinux: None,
        loaded: None,
        place_from: None,
        modules: Vec::new(),
        // Its version is its own (its banner's), not the version stated for the others.
        kernel_version: None,
        ..opts.clone()
    };
    let mut opened = crate::open_all(&[path.to_path_buf()], &opts).map_err(|e| {
        e.context("built-for kernel")
            .about(crate::error::Input::BuiltFor)
    })?;
    if opened.len() != 1 {
        return Err(Error::usage(format!(
            "built-for kernel {}: names {} kernels; give the one the patch was built for",
            path.display(),
            opened.len()
        ))
        .about(crate::error::Input::BuiltFor));
    }
    opened.remove(0).kernel.map_err(|e| {
        e.context("built-for kernel")
            .about(crate::error::Input::BuiltFor)
    })
}
