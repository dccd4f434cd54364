//! Many kernels, one at a time: the kernels a list of sources names, told apart without
//! opening them, and split into shards, so that a caller opens, uses and frees one kernel
//! before the next (memory bounded by one kernel, whatever the fleet's size) and many
//! machines can share a fleet (`--shard I/N`).
//!
//! ```no_run
//! use klpsym::{kernel_units, Options, Shard};
//!
//! let shard: Shard = "2/4".parse()?;
//! for unit in shard.take(kernel_units(&["/srv/kernels".into()])?) {
//!     for opened in klpsym::open_all(&unit.sources, &Options::default())? {
//!         // ... use opened.kernel, then let it go before the next unit
//!     }
//! }
//! # Ok::<(), klpsym::Error>(())
//! ```

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The sources of one kernel, or of the few kernels one package set holds: a file alone, or
/// the packages of one version and architecture (an image with its `-dbg`, headers and
/// modules packages; a cloud flavour of the same version joins them and opens as a kernel of
/// its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelUnit {
    /// What to give [`crate::open_all`].
    pub sources: Vec<PathBuf>,
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
/// appearance (a folder's files in name order).
pub fn kernel_units(sources: &[PathBuf]) -> Result<Vec<KernelUnit>> {
    let paths = crate::open::expand_dirs(sources)?;
    let mut units: Vec<(Option<String>, KernelUnit)> = Vec::new();
    for p in paths {
        let key = klpsym_io::is_package(&p).then(|| package_key(&p)).flatten();
        match key
            .as_ref()
            .and_then(|k| units.iter_mut().find(|(u, _)| u.as_ref() == Some(k)))
        {
            Some((_, u)) => u.sources.push(p),
            None => units.push((key, KernelUnit { sources: vec![p] })),
        }
    }
    Ok(units.into_iter().map(|(_, u)| u).collect())
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
        let text = dir.path().join("kallsyms.txt");
        std::fs::write(&text, "ffffffff81000000 T _text\n").unwrap();
        let units = kernel_units(&[dir.path().to_path_buf()]).unwrap();
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
}
