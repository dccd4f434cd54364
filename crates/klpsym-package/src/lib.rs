//! Distribution kernel packages to the kernel files they hold, read from the package's bytes
//! as downloaded, never unpacked to disk.
//!
//! - Debian/Ubuntu `.deb`: an `ar` archive whose `data.tar` (xz, zstd, gzip, bzip2 or none)
//!   holds the files, and whose `control.tar` names the package.
//! - RPM: a lead, a signature header and a main header (name, version, release, arch), then a
//!   cpio (newc) payload compressed with xz, zstd, gzip or bzip2.
//!
//! The data is streamed from a reader ([`read_package_from`]: a file, read a buffer at a time)
//! or from bytes ([`read_package`]): every member is decompressed in bounded steps with a
//! reschedule point each (see [`klpsym_image::StreamDecoder`]), only the members asked for are
//! kept, and reading stops as soon as everything asked for was found (a Debian image package
//! lists /boot before its modules; a -dbg package its vmlinux before the debug modules). A
//! member too big to hold (a `-dbg` package's 400-600 MB vmlinux) goes to a [`Spill`] the
//! caller gives (a temporary file), never to the heap.
//!
//! What a member is comes from its path, as the distributions lay kernels out:
//! `boot/vmlinuz-REL` (Debian to 6.x, RPM), `usr/lib/modules/REL/vmlinuz` (Debian 7.x,
//! Fedora's `lib/modules/REL/vmlinuz`), `boot/config-REL` or `.../modules/REL/config`,
//! `System.map` likewise, `usr/lib/debug/boot/vmlinux-REL` (Debian -dbg, Ubuntu -dbgsym) or
//! `usr/lib/debug/lib/modules/REL/vmlinux` (RPM debuginfo), modules under
//! `(usr/)lib/modules/REL/` (not under `usr/lib/debug`), and `Module.symvers` or
//! `symvers*.gz`.

mod deb;
mod end;
mod input;
mod rpm;

use input::Input;

use klpsym_image::{Compression, StreamDecoder};
use klpsym_resched::resched::{Cancelled, Resched};

/// The two package formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageFormat {
    /// Debian/Ubuntu `.deb`.
    Deb,
    /// RPM.
    Rpm,
}

impl std::fmt::Display for PackageFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PackageFormat::Deb => "Debian package",
            PackageFormat::Rpm => "RPM package",
        })
    }
}

/// Tells a package from its first bytes.
pub fn detect(bytes: &[u8]) -> Option<PackageFormat> {
    if bytes.starts_with(b"!<arch>\ndebian-binary") {
        Some(PackageFormat::Deb)
    } else if bytes.starts_with(&[0xed, 0xab, 0xee, 0xdb]) {
        Some(PackageFormat::Rpm)
    } else {
        None
    }
}

/// What a member of a kernel package is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberKind {
    /// The kernel image (vmlinuz, Image).
    Image,
    /// The build's configuration.
    Config,
    /// System.map.
    SystemMap,
    /// A vmlinux with its symbol table and debug info (debug packages).
    Vmlinux,
    /// A kernel module (`.ko`, possibly compressed).
    Module,
    /// Module.symvers (or a distribution's gzip-compressed symvers).
    Symvers,
    /// A module's debug file (`usr/lib/debug/lib/modules/REL/…/x.ko`, RPM's `x.ko.debug`):
    /// DWARF for `file:line`, never a module to load.
    DebugModule,
}

/// Which members to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Image, config and System.map.
    pub image: bool,
    /// The debug vmlinux.
    pub vmlinux: bool,
    /// Every module.
    pub modules: bool,
    /// Module.symvers.
    pub symvers: bool,
    /// Modules' debug files (gigabytes in a debug package: [`Spill::keeps`] picks them).
    pub debug_modules: bool,
    /// Only the release the package's paths name: reading stops at the first path naming
    /// one, nothing is kept, and the package is not read to its end ([`first_release`]).
    pub release_only: bool,
}

impl Want {
    /// Everything.
    pub fn all() -> Want {
        Want {
            image: true,
            vmlinux: true,
            modules: true,
            symvers: true,
            debug_modules: false,
            release_only: false,
        }
    }

    fn keeps(&self, k: MemberKind) -> bool {
        match k {
            MemberKind::Image | MemberKind::Config | MemberKind::SystemMap => self.image,
            MemberKind::Vmlinux => self.vmlinux,
            MemberKind::Module => self.modules,
            MemberKind::Symvers => self.symvers,
            MemberKind::DebugModule => self.debug_modules,
        }
    }

    /// True when what was found so far is all there is to find: no open-ended kind (modules,
    /// symvers) is asked for, and the kernel asked for was found: the image with its config
    /// and System.map, or the debug vmlinux (asked for both, a package holds one or the other).
    fn satisfied(&self, found: &[Member]) -> bool {
        let has = |k| found.iter().any(|m| m.kind == k);
        let image = self.image
            && has(MemberKind::Image)
            && has(MemberKind::Config)
            && has(MemberKind::SystemMap);
        let vmlinux = self.vmlinux && has(MemberKind::Vmlinux);
        !self.modules && !self.symvers && !self.debug_modules && (image || vmlinux)
    }

    /// What to look for in a package named `name`: a debug package (`-dbg`, `-dbgsym`,
    /// `-debuginfo`) holds debug copies of the modules, never modules to load or symvers.
    pub fn for_package(self, name: Option<&str>) -> Want {
        let debug = name.is_some_and(|n| {
            n.ends_with("-dbg") || n.ends_with("-dbgsym") || n.contains("-debuginfo")
        });
        if debug {
            Want {
                modules: false,
                symvers: false,
                ..self
            }
        } else {
            self
        }
    }
}

/// One kept member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its path in the package, without a leading `./` or `/`.
    pub path: String,
    /// What it is.
    pub kind: MemberKind,
    /// The kernel release its path names (`6.1.0-57-amd64`), when it names one.
    pub release: Option<String>,
    /// Its bytes, as stored (a `.ko.xz` stays compressed); empty when [`Member::spilled`].
    pub data: Vec<u8>,
    /// True when its bytes went to the caller's [`Spill`] instead of `data`.
    pub spilled: bool,
}

/// Where the bytes of a big member go instead of the heap: the caller's sink (a temporary
/// file it maps afterwards). Members the sink declines are kept in memory.
pub trait Spill {
    /// A writer for member `path` of `kind` and `size` bytes, or `None` to keep it in memory.
    fn spill(
        &mut self,
        path: &str,
        kind: MemberKind,
        size: u64,
    ) -> std::io::Result<Option<&mut dyn std::io::Write>>;

    /// Whether member `path` of `kind`, which the [`Want`] asks for, is read at all (a
    /// debug package's modules: those named); every one by default.
    fn keeps(&mut self, path: &str, kind: MemberKind) -> bool {
        let _ = (path, kind);
        true
    }
}

/// Keeps every member in memory.
#[derive(Debug, Default)]
pub struct NoSpill;

impl Spill for NoSpill {
    fn spill(
        &mut self,
        _: &str,
        _: MemberKind,
        _: u64,
    ) -> std::io::Result<Option<&mut dyn std::io::Write>> {
        Ok(None)
    }
}

/// A package read: its identity and the members kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The format.
    pub format: PackageFormat,
    /// Package name (`linux-image-6.1.0-57-amd64`, `kernel-core`), when the metadata says.
    pub name: Option<String>,
    /// Version (`6.1.192-3`; RPM: `VERSION-RELEASE`), when the metadata says.
    pub version: Option<String>,
    /// Architecture (`amd64`, `x86_64`), when the metadata says.
    pub arch: Option<String>,
    /// The members kept, in archive order.
    pub members: Vec<Member>,
    /// Every kernel release named by a member path of a kind klpsym knows (kept or not), in
    /// order of first appearance: what groups the packages of one kernel.
    pub releases: Vec<String>,
    /// True when decoding stopped before the end (everything asked for was found; what
    /// follows was still read through to the package's end and its end checked).
    pub stopped_early: bool,
}

impl Package {
    /// The first kept member of `kind`.
    pub fn first(&self, kind: MemberKind) -> Option<&Member> {
        self.members.iter().find(|m| m.kind == kind)
    }

    /// The kernel release of the package: the first one its paths name.
    pub fn release(&self) -> Option<&str> {
        self.releases.first().map(String::as_str)
    }
}

/// A package that cannot be read, with where.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// A structural problem: which archive layer and member, and what.
    #[error("{format}: {place}: {what}")]
    Malformed {
        /// The package format.
        format: PackageFormat,
        /// Where: `ar member data.tar.xz`, `data.tar.xz: member ./boot/vmlinuz-...`, `header`.
        place: String,
        /// What is wrong.
        what: String,
    },
    /// The operation was cancelled at a reschedule point.
    #[error("operation cancelled")]
    Cancelled(#[from] Cancelled),
}

/// How much larger than the member limit a whole archive stream may decompress to: a
/// package's data can hold thousands of members (a -dbg package's is several GB), each
/// bounded by the limit itself.
pub const STREAM_FACTOR: u64 = 16;

/// Reads `bytes` (a whole package), keeping the members `want` asks for: no member larger
/// than `limit` bytes, no archive stream decompressing to more than [`STREAM_FACTOR`] times
/// that.
pub fn read_package(
    bytes: &[u8],
    want: Want,
    limit: u64,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    if detect(bytes).is_none() {
        return Err(not_a_package());
    }
    read_input(&mut &bytes[..], want, limit, &mut NoSpill, resched)
}

/// [`read_package`] from a reader, a buffer at a time (the package is never held whole), big
/// members through `spill`. What follows the members asked for is read through (see
/// [`read_package_file`] for a file, which passes over it).
pub fn read_package_from(
    r: &mut dyn std::io::Read,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    read_input(&mut input::Stream(r), want, limit, spill, resched)
}

/// [`read_package_from`] a package file: where the end of what follows the members asked
/// for is found in its last bytes (an XZ stream's), the bytes before them are passed over,
/// not read (a `-dbg` package's debug modules, a gigabyte).
pub fn read_package_file(
    r: &mut std::io::BufReader<std::fs::File>,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    read_input(r, want, limit, spill, resched)
}

fn read_input(
    r: &mut dyn Input,
    want: Want,
    limit: u64,
    spill: &mut dyn Spill,
    resched: &mut Resched,
) -> Result<Package, PackageError> {
    let mut head = [0u8; 4];
    r.read_exact(&mut head).map_err(|_| not_a_package())?;
    let mut r = input::Headed {
        head: &head[..],
        rest: r,
    };
    match &head {
        b"!<ar" => deb::read(&mut r, want, limit, spill, resched),
        [0xed, 0xab, 0xee, 0xdb] => rpm::read(&mut r, want, limit, spill, resched),
        _ => Err(not_a_package()),
    }
}

/// The first kernel release the member paths of the package `r` streams name
/// (`6.1.0-57-amd64`), read from the start of its file list only: what groups a package
/// with its kernel's other packages, without reading the package. Not a check of the package
/// (it is not read to its end).
pub fn first_release(
    r: &mut dyn std::io::Read,
    limit: u64,
    resched: &mut Resched,
) -> Result<Option<String>, PackageError> {
    let want = Want {
        release_only: true,
        ..Want::default()
    };
    let p = read_package_from(r, want, limit, &mut NoSpill, resched)?;
    Ok(p.releases.into_iter().next())
}

fn not_a_package() -> PackageError {
    PackageError::Malformed {
        format: PackageFormat::Deb,
        place: "start".into(),
        what: "neither a Debian package (ar archive starting with debian-binary) nor an RPM (lead magic ed ab ee db)".into(),
    }
}

/// What a member path is, and the release it names.
pub fn classify(path: &str) -> Option<(MemberKind, Option<String>)> {
    let p = path.trim_start_matches("./").trim_start_matches('/');
    let rel = |s: &str| Some(s.to_string()).filter(|r| !r.is_empty() && !r.contains('/'));
    // The debug vmlinux of -dbg / -dbgsym / debuginfo packages.
    if let Some(r) = p.strip_prefix("usr/lib/debug/boot/vmlinux-") {
        return Some((MemberKind::Vmlinux, rel(r)));
    }
    if let Some(rest) = p.strip_prefix("usr/lib/debug/lib/modules/") {
        if let Some(r) = rest.strip_suffix("/vmlinux") {
            return Some((MemberKind::Vmlinux, rel(r)));
        }
    }
    if let Some(rest) = p.strip_prefix("usr/lib/debug/lib/modules/") {
        let (r, file) = rest.split_once('/')?;
        return (file.ends_with(".ko") || file.ends_with(".ko.debug"))
            .then(|| (MemberKind::DebugModule, rel(r)));
    }
    if p.starts_with("usr/lib/debug/") {
        return None;
    }
    // A headers package's Module.symvers (Debian: usr/src/linux-headers-REL/Module.symvers).
    if let Some(rest) = p.strip_prefix("usr/src/linux-headers-") {
        if let Some(r) = rest.strip_suffix("/Module.symvers") {
            return Some((MemberKind::Symvers, rel(r)));
        }
    }
    for (prefix, kind) in [
        ("boot/vmlinuz-", MemberKind::Image),
        ("boot/vmlinux-", MemberKind::Image),
        ("boot/Image-", MemberKind::Image),
        ("boot/config-", MemberKind::Config),
        ("boot/System.map-", MemberKind::SystemMap),
    ] {
        if let Some(r) = p.strip_prefix(prefix) {
            return Some((kind, rel(r)));
        }
    }
    let rest = p
        .strip_prefix("usr/lib/modules/")
        .or_else(|| p.strip_prefix("lib/modules/"))?;
    let (r, file) = rest.split_once('/')?;
    let release = rel(r);
    let kind = match file {
        "vmlinuz" | "Image" | "vmlinux" => MemberKind::Image,
        "config" => MemberKind::Config,
        "System.map" => MemberKind::SystemMap,
        "Module.symvers" | "build/Module.symvers" => MemberKind::Symvers,
        f if f.starts_with("symvers")
            && (f.ends_with(".gz") || f.ends_with(".xz"))
            && !f.contains('/') =>
        {
            MemberKind::Symvers
        }
        f if [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
            .iter()
            .any(|s| f.ends_with(s)) =>
        {
            MemberKind::Module
        }
        _ => return None,
    };
    Some((kind, release))
}

/// Reads entries of an uncompressed tar or cpio stream into `found`: shared bookkeeping.
struct Collector {
    want: Want,
    members: Vec<Member>,
    releases: Vec<String>,
}

impl Collector {
    fn new(want: Want) -> Collector {
        Collector {
            want,
            members: Vec::new(),
            releases: Vec::new(),
        }
    }

    /// The member's kind when it is to be kept (its release is noted either way).
    fn wants(&mut self, path: &str) -> Option<(MemberKind, Option<String>)> {
        let (kind, release) = classify(path)?;
        // Module paths name the release too: a package of modules alone (Fedora's
        // kernel-modules, 7.x's linux-modules-*) belongs with its kernel's image.
        if let Some(r) = &release {
            if !self.releases.contains(r) {
                self.releases.push(r.clone());
            }
        }
        self.want.keeps(kind).then_some((kind, release))
    }

    /// Takes member `path` (`size` bytes from `r`): to the spill when it takes it, else into
    /// memory (at most `limit` bytes).
    #[allow(clippy::too_many_arguments)]
    fn take(
        &mut self,
        path: &str,
        kind: MemberKind,
        release: Option<String>,
        r: &mut dyn std::io::Read,
        size: u64,
        limit: u64,
        spill: &mut dyn Spill,
    ) -> std::io::Result<()> {
        let too_big = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("member of {size} bytes is over the limit of {limit}"),
            )
        };
        let (data, spilled) = match spill.spill(path, kind, size)? {
            Some(w) => {
                if size > limit {
                    return Err(too_big());
                }
                let n = std::io::copy(&mut std::io::Read::take(r, size), w)?;
                if n < size {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("member ends after {n} of its {size} bytes"),
                    ));
                }
                w.flush()?;
                (Vec::new(), true)
            }
            None => (read_body(r, size, limit)?, false),
        };
        self.members.push(Member {
            path: path
                .trim_start_matches("./")
                .trim_start_matches('/')
                .to_string(),
            kind,
            release,
            data,
            spilled,
        });
        Ok(())
    }

    fn done(&self) -> bool {
        if self.want.release_only {
            return !self.releases.is_empty();
        }
        self.want.satisfied(&self.members)
    }
}

/// A compressed stream read as it goes, as a decompressing reader (told by its first bytes),
/// with its compression.
fn decoder_of<'a, 'r>(
    format: PackageFormat,
    place: &str,
    input: &'a mut dyn std::io::Read,
    limit: u64,
    resched: &'r mut Resched,
) -> Result<(StreamDecoder<'a, 'r>, Option<Compression>), PackageError> {
    use std::io::BufRead;
    let mut input = std::io::BufReader::with_capacity(64 << 10, input);
    let head = input
        .fill_buf()
        .map_err(|e| io_error(format, place.to_string(), e))?;
    let compression = klpsym_image::sniff_compression(head);
    let d = StreamDecoder::from_reader(compression, Box::new(input), limit, resched)
        .map_err(|e| io_error(format, place.to_string(), e))?;
    Ok((d, compression))
}

/// Reads what is left of a decoded stream (after its archive's end) to the stream's end, so
/// that the decoder meets its end marker: what follows an archive's end is its padding, zero
/// bytes; anything else is an error naming `place`.
fn decode_to_end(
    format: PackageFormat,
    place: &str,
    dec: &mut dyn std::io::Read,
) -> Result<(), PackageError> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match dec.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) if buf[..n].iter().all(|&b| b == 0) => {}
            Ok(_) => {
                return Err(malformed(
                    format,
                    place,
                    "data after the archive's end marker",
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(format, place.to_string(), e)),
        }
    }
}

/// A structural error of `format` at `place`.
fn malformed(
    format: PackageFormat,
    place: impl Into<String>,
    what: impl Into<String>,
) -> PackageError {
    PackageError::Malformed {
        format,
        place: place.into(),
        what: what.into(),
    }
}

/// Maps an I/O error of a streamed layer to the package error (or the cancellation).
fn io_error(format: PackageFormat, place: String, e: std::io::Error) -> PackageError {
    if klpsym_image::is_cancelled(&e) {
        return PackageError::Cancelled(Cancelled);
    }
    malformed(format, place, e.to_string())
}

/// Reads a whole member body of `size` bytes from `r` in steps (a reschedule point per step
/// comes from the decoder underneath).
fn read_body(r: &mut dyn std::io::Read, size: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    if size > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("member of {size} bytes is over the limit of {limit}"),
        ));
    }
    // The header's size is a claim: grow past 64 MiB only as bytes arrive.
    let mut data = Vec::with_capacity((size as usize).min(64 << 20));
    std::io::Read::read_to_end(&mut std::io::Read::take(r, size), &mut data)?;
    if (data.len() as u64) < size {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("member ends after {} of its {size} bytes", data.len()),
        ));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_every_layout_are_classified() {
        let c = |p| classify(p).map(|(k, r)| (k, r.unwrap_or_default()));
        let r = "6.1.0-57-amd64".to_string();
        assert_eq!(
            c("./boot/vmlinuz-6.1.0-57-amd64"),
            Some((MemberKind::Image, r.clone()))
        );
        assert_eq!(
            c("./boot/config-6.1.0-57-amd64"),
            Some((MemberKind::Config, r.clone()))
        );
        assert_eq!(
            c("./boot/System.map-6.1.0-57-amd64"),
            Some((MemberKind::SystemMap, r.clone()))
        );
        assert_eq!(
            c("./usr/lib/modules/7.0.1-amd64/vmlinuz"),
            Some((MemberKind::Image, "7.0.1-amd64".into()))
        );
        assert_eq!(
            c("/lib/modules/6.12.0-55.el10.x86_64/vmlinuz"),
            Some((MemberKind::Image, "6.12.0-55.el10.x86_64".into()))
        );
        assert_eq!(
            c("./usr/lib/debug/boot/vmlinux-6.1.0-57-amd64"),
            Some((MemberKind::Vmlinux, r.clone()))
        );
        assert_eq!(
            c("/usr/lib/debug/lib/modules/6.12.0-55.el10.x86_64/vmlinux"),
            Some((MemberKind::Vmlinux, "6.12.0-55.el10.x86_64".into()))
        );
        assert_eq!(
            c("./lib/modules/6.1.0-57-amd64/kernel/fs/ext4/ext4.ko"),
            Some((MemberKind::Module, r.clone()))
        );
        assert_eq!(
            c("./usr/lib/modules/7.0.1-amd64/kernel/fs/ext4/ext4.ko.xz"),
            Some((MemberKind::Module, "7.0.1-amd64".into()))
        );
        assert_eq!(
            c("/lib/modules/6.12.0-55.el10.x86_64/symvers.gz"),
            Some((MemberKind::Symvers, "6.12.0-55.el10.x86_64".into()))
        );
        // Debug modules are not modules to load; other files are nothing.
        assert_eq!(
            c("./usr/lib/debug/lib/modules/6.1.0-57-amd64/kernel/fs/ext4/ext4.ko"),
            Some((MemberKind::DebugModule, r.clone()))
        );
        assert_eq!(
            c("/usr/lib/debug/lib/modules/6.12.0-55.el10.x86_64/kernel/fs/fat/fat.ko.debug"),
            Some((MemberKind::DebugModule, "6.12.0-55.el10.x86_64".into()))
        );
        assert_eq!(
            c("./usr/lib/debug/lib/modules/6.1.0-57-amd64/modules.builtin"),
            None
        );
        assert_eq!(c("./lib/modules/6.1.0-57-amd64/modules.dep"), None);
        assert_eq!(
            c("/lib/modules/6.12.0-55.el10.x86_64/symvers.xz"),
            Some((MemberKind::Symvers, "6.12.0-55.el10.x86_64".into()))
        );
        assert_eq!(
            c("./usr/src/linux-headers-6.1.0-57-amd64/Module.symvers"),
            Some((MemberKind::Symvers, r.clone()))
        );
        assert_eq!(c("./usr/share/doc/linux-image/changelog.gz"), None);
    }

    #[test]
    fn garbage_is_neither_format() {
        assert_eq!(detect(b"\x7fELF"), None);
        let e = read_package(b"hello", Want::all(), 1 << 20, &mut Resched::none()).unwrap_err();
        assert!(e.to_string().contains("neither a Debian package"), "{e}");
    }
}
