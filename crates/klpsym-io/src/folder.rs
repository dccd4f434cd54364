//! What the files of a folder given as a kernel source are: kernel parts (symbol sources,
//! kernel packages), or things a folder of kernels also holds (source and documentation
//! packages, checksums, notes), passed over with a word.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::detect::{detect, Detected};

/// What a file of a folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderEntry {
    /// A kernel package (`.deb`, `.rpm`) that may hold a kernel part.
    Package,
    /// A symbol source of its own (a kallsyms or System.map, a vmlinux, an image, a module).
    Source,
    /// Not a kernel part: passed over, with why.
    PassedOver(String),
    /// Nothing can be read from it (a symbolic link to a file that does not exist, an entry
    /// that cannot be looked at): a failure of its own, with why, never left out in silence.
    Unreadable(String),
}

/// Debian and RPM packages of a kernel's source tree that hold no kernel part: passed over
/// by name, without reading them (`linux-source-7.2` is 164 MB).
const NOT_KERNEL_PARTS: &[&str] = &[
    "linux-source",
    "linux-doc",
    "linux-kbuild",
    "linux-libc-dev",
    "linux-perf",
    "linux-cpupower",
    "linux-bpf-dev",
    "linux-support",
    "bpftool",
    "hyperv-daemons",
    "usbip",
    "kernel-doc",
    "kernel-devel",
    "kernel-tools",
    "kernel-headers",
];

/// The package name a file name gives: Debian `NAME_VERSION_ARCH.deb`, RPM
/// `NAME-VERSION-RELEASE.ARCH.rpm`.
pub fn package_name_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if let Some(stem) = name.strip_suffix(".deb") {
        return stem.split('_').next().map(str::to_string);
    }
    let stem = name.strip_suffix(".rpm")?;
    let (nvr, _arch) = stem.rsplit_once('.')?;
    let mut f = nvr.rsplitn(3, '-');
    let (_release, _version, name) = (f.next()?, f.next()?, f.next()?);
    Some(name.to_string())
}

/// What `path` (a regular file found in a folder) is, told from its name and first bytes.
pub fn classify(path: &Path) -> FolderEntry {
    let mut head = Vec::with_capacity(4096);
    if let Err(e) = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head)) {
        // Unreadable: a failed row of its own says why.
        let _ = e;
        return FolderEntry::Source;
    }
    if klpsym_package::detect(&head).is_some() {
        return match package_name_of(path) {
            Some(n) if is_not_kernel_part(&n) => FolderEntry::PassedOver(format!(
                "package {n} holds no kernel part (sources, documentation or tools)"
            )),
            _ => FolderEntry::Package,
        };
    }
    match detect(&head) {
        Detected::Text if looks_like_symbols(&head) => FolderEntry::Source,
        Detected::Text => FolderEntry::PassedOver(
            "text that is not a symbol table (its first line is not 'ADDRESS TYPE NAME')".into(),
        ),
        Detected::Image if !has_image_magic(&head) => FolderEntry::PassedOver(
            "neither a package, an ELF object, a kernel image nor a compressed file".into(),
        ),
        _ => FolderEntry::Source,
    }
}

fn is_not_kernel_part(name: &str) -> bool {
    NOT_KERNEL_PARTS.iter().any(|p| name.starts_with(p))
        || (name.starts_with("linux-headers-") && name.ends_with("-common"))
        || name.starts_with("linux-headers-") && name.contains("-common-")
}

/// A kernel image's own magic (bzImage's `HdrS`, arm64 `Image`, EFI zboot `MZ`).
fn has_image_magic(head: &[u8]) -> bool {
    head.starts_with(b"MZ")
        || head.get(0x38..0x3c) == Some(b"ARM\x64")
        || head.get(0x202..0x206) == Some(b"HdrS")
}

/// True when the first non-empty line reads `ADDRESS TYPE NAME` (/proc/kallsyms, System.map).
fn looks_like_symbols(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let Some(line) = text.lines().find(|l| !l.trim().is_empty()) else {
        return false;
    };
    let mut f = line.split_whitespace();
    let (Some(addr), Some(kind), Some(_name)) = (f.next(), f.next(), f.next()) else {
        return false;
    };
    !addr.is_empty()
        && addr.len() <= 16
        && addr.bytes().all(|c| c.is_ascii_hexdigit())
        && kind.len() == 1
        && kind.bytes().all(|c| c.is_ascii_alphabetic())
}

/// The entries of folder `dir`, sorted by name, each with what it is: its files (symbolic
/// links followed) classified, a link that leads nowhere [`FolderEntry::Unreadable`], a
/// folder in it passed over (folders are not searched).
pub fn scan(dir: &Path) -> std::io::Result<Vec<(PathBuf, FolderEntry)>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    Ok(entries
        .into_iter()
        .map(|f| {
            let c = match std::fs::metadata(&f) {
                Ok(m) if m.is_file() => classify(&f),
                Ok(m) if m.is_dir() => FolderEntry::PassedOver(
                    "a folder: the folders inside a folder of kernels are not searched".into(),
                ),
                Ok(_) => FolderEntry::PassedOver("not a regular file".into()),
                Err(e) => FolderEntry::Unreadable(match std::fs::read_link(&f) {
                    Ok(to) => format!(
                        "a symbolic link to {}, which cannot be read: {e}",
                        to.display()
                    ),
                    Err(_) => e.to_string(),
                }),
            };
            (f, c)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_kernels_keeps_kernel_parts_and_passes_over_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let put = |n: &str, b: &[u8]| {
            let p = dir.path().join(n);
            std::fs::write(&p, b).unwrap();
            p
        };
        let deb = b"!<arch>\ndebian-binary   ";
        let img = put("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb", deb);
        let src = put("linux-source-7.2_7.2.13-1_all.deb", deb);
        let common = put("linux-headers-6.1.0-57-common_6.1.192-3_all.deb", deb);
        let hdr = put("linux-headers-6.1.0-57-amd64_6.1.192-3_amd64.deb", deb);
        let notes = put("NOTES.txt", b"kernels for the lab\n");
        let ks = put("kallsyms", b"ffffffff81000000 T _text\n");
        let bin = put("picture.bin", &[0x89, b'P', b'N', b'G', 0, 1, 2, 0xff]);
        // Regression (#45): a link to nothing vanished without a word.
        let dangling = dir
            .path()
            .join("linux-image-6.1.0-58-amd64_6.1.193-1_amd64.deb");
        std::os::unix::fs::symlink(dir.path().join("gone.deb"), &dangling).unwrap();
        let sub = dir.path().join("older");
        std::fs::create_dir(&sub).unwrap();
        let got: std::collections::HashMap<PathBuf, FolderEntry> =
            scan(dir.path()).unwrap().into_iter().collect();
        assert_eq!(got[&img], FolderEntry::Package);
        assert_eq!(got[&hdr], FolderEntry::Package);
        assert_eq!(got[&ks], FolderEntry::Source);
        match &got[&dangling] {
            FolderEntry::Unreadable(why) => {
                assert!(
                    why.contains("symbolic link") && why.contains("gone.deb"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        for p in [&src, &common, &notes, &bin, &sub] {
            assert!(
                matches!(got[p], FolderEntry::PassedOver(_)),
                "{p:?}: {:?}",
                got[p]
            );
        }
    }

    #[test]
    fn package_names_come_from_file_names() {
        let n = |s: &str| package_name_of(Path::new(s));
        assert_eq!(
            n("linux-image-6.1.0-57-amd64-dbg_6.1.192-3_amd64.deb").as_deref(),
            Some("linux-image-6.1.0-57-amd64-dbg")
        );
        assert_eq!(
            n("kernel-core-6.12.0-55.el10.x86_64.rpm").as_deref(),
            Some("kernel-core")
        );
        assert_eq!(n("vmlinuz"), None);
    }
}
