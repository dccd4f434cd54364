//! The kernel version an answer depends on, with its stable sublevel: stated by the caller
//! ([`crate::Options::kernel_version`]), or read from wherever it appears — an image's banner,
//! a package's file name, a pasted oops's own `CPU: … Not tainted RELEASE #N …` line. When
//! nothing tells it, an answer that depends on it says which rule it assumed
//! ([`crate::Kernel::version_assumed`]).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::{Error, Input};

/// A kernel version: `major.minor` and, when known, the stable sublevel (`6.1.192`). The
/// sublevel matters where a stable series took a change ("module/kallsyms: fix nextval for
/// data symbol lookup" is in 6.12.117 and later, not in 6.12.95).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelVersion {
    /// The major version (`6`).
    pub major: u32,
    /// The minor version (`1`).
    pub minor: u32,
    /// The stable sublevel (`192`), when known.
    pub sublevel: Option<u32>,
}

impl KernelVersion {
    /// `major.minor[.sublevel]`.
    pub fn new(major: u32, minor: u32, sublevel: Option<u32>) -> KernelVersion {
        KernelVersion {
            major,
            minor,
            sublevel,
        }
    }

    /// `(major, minor)`.
    pub fn series(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// The version a `/proc/version`-style banner tells (`Linux version 6.1.0-57-amd64 (…)
    /// #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-…)`): the release's series, and the stable
    /// sublevel the banner gives (the release's own, else the last `major.minor.N` after it,
    /// as distributions print the upstream version). `None` when the banner names no release.
    pub fn from_banner(banner: &str) -> Option<KernelVersion> {
        let release = klpsym_image::banner_release(banner)?;
        let rules = klpsym_livepatch::KernelRules::from_release(release)?;
        // The banner's rule wants the `Linux version ` form.
        let b = if banner.starts_with("Linux version ") {
            std::borrow::Cow::Borrowed(banner)
        } else {
            std::borrow::Cow::Owned(format!("Linux version {banner}"))
        };
        let rules = rules.with_banner(&b);
        Some(KernelVersion::new(
            rules.version.0,
            rules.version.1,
            rules.sublevel,
        ))
    }

    /// The version an oops's or a warning's own header line tells: `CPU: 0 PID: 1 Comm: x Not
    /// tainted 6.1.0-57-amd64 #1 Debian 6.1.192-3` (`dump_stack_print_info()`: the release,
    /// then `init_utsname()->version`, which distributions end with the upstream version), or
    /// `… Tainted: G      D W  6.1.0-57-amd64 #1 …`. `None` for any other line.
    pub fn from_oops_line(line: &str) -> Option<KernelVersion> {
        let at = line.find("CPU: ")?;
        let line = &line[at..];
        if !line.contains(" PID: ") || !line.contains(" Comm: ") {
            return None;
        }
        // What follows the taint: `Not tainted RELEASE …` or `Tainted: FLAGS RELEASE …`
        // (the flags are letters and spaces; the release starts with a digit).
        let rest = if let Some(i) = line.find("Not tainted ") {
            &line[i + "Not tainted ".len()..]
        } else {
            let i = line.find("Tainted: ")?;
            let after = &line[i + "Tainted: ".len()..];
            let d = after.find(|c: char| c.is_ascii_digit())?;
            &after[d..]
        };
        let rest = rest.trim_start();
        rest.starts_with(|c: char| c.is_ascii_digit())
            .then(|| KernelVersion::from_banner(&format!("Linux version {rest}")))?
    }

    /// The version a distribution package's file name tells:
    /// `linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb` (Debian: the release in the name,
    /// the upstream version in the package version), `kernel-core-6.12.0-55.9.1.el10.x86_64.rpm`.
    /// `None` for a name that is no kernel package's.
    pub fn from_package_name(name: &str) -> Option<KernelVersion> {
        let stem = name
            .strip_suffix(".deb")
            .or_else(|| name.strip_suffix(".rpm"))
            .or_else(|| name.strip_suffix(".ddeb"))?;
        if !(stem.starts_with("linux-") || stem.starts_with("kernel")) {
            return None;
        }
        // The release is the first `N.N` after the package's base name.
        let start = stem.find(|c: char| c.is_ascii_digit())?;
        let (release, rest) = match stem[start..].split_once('_') {
            Some((r, rest)) => (r, rest.replace('_', " ")),
            None => (&stem[start..], String::new()),
        };
        // Ubuntu's `6.8.0-45.45` names no upstream sublevel: 0 there tells nothing.
        KernelVersion::from_banner(&format!("Linux version {release} {rest}")).map(|mut v| {
            v.sublevel = v.sublevel.filter(|&s| s > 0);
            v
        })
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(s) = self.sublevel {
            write!(f, ".{s}")?;
        }
        Ok(())
    }
}

impl Serialize for KernelVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `6.1`, `6.1.192` or `v6.1.192` (what a caller states; a release such as `6.1.0-57-amd64`
/// names no stable sublevel and is refused, so that it is never taken for `6.1.0`).
impl FromStr for KernelVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<KernelVersion, Error> {
        let bad = || {
            Error::usage(format!(
                "kernel version '{s}': expected X.Y or X.Y.Z with the stable sublevel (for example 6.1.192)"
            ))
            .about(Input::KernelVersion)
        };
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let parts: Vec<&str> = t.split('.').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(bad());
        }
        let num = |p: &str| -> Option<u32> {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        let major = num(parts[0]).ok_or_else(bad)?;
        let minor = num(parts[1]).ok_or_else(bad)?;
        let sublevel = match parts.get(2) {
            Some(p) => Some(num(p).ok_or_else(bad)?),
            None => None,
        };
        Ok(KernelVersion::new(major, minor, sublevel))
    }
}

/// Where a kernel's version was read from ([`crate::Kernel::kernel_version`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum VersionSource {
    /// The caller stated it ([`crate::Options::kernel_version`]).
    Stated,
    /// The source's banner (an image's, a vmlinux's, `/proc/version`).
    Banner,
    /// The package's file name.
    PackageName,
    /// A pasted trace's own header line ([`crate::Kernel::hear_trace`]).
    Trace {
        /// Its line number (from 1).
        line: usize,
    },
    /// Nothing told it.
    Unknown,
}

impl VersionSource {
    /// Where, in words (`the banner`, `standard input line 3`).
    pub fn describe(&self) -> String {
        match self {
            VersionSource::Stated => "stated".to_string(),
            VersionSource::Banner => "the banner".to_string(),
            VersionSource::PackageName => "the package's name".to_string(),
            VersionSource::Trace { line } => format!("the trace's line {line}"),
            VersionSource::Unknown => "nothing".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stated_version_keeps_its_sublevel_and_refuses_a_release() {
        let v: KernelVersion = "6.1.192".parse().unwrap();
        assert_eq!(v, KernelVersion::new(6, 1, Some(192)));
        assert_eq!(v.to_string(), "6.1.192");
        let v: KernelVersion = "v7.2".parse().unwrap();
        assert_eq!(v, KernelVersion::new(7, 2, None));
        assert_eq!(v.to_string(), "7.2");
        for bad in ["6", "6.1.0-57-amd64", "6.x", "", "6.1.2.3", "6..1"] {
            let e = bad.parse::<KernelVersion>().unwrap_err();
            assert_eq!(e.input(), Some(Input::KernelVersion), "{bad}");
            assert!(e.to_string().contains("X.Y.Z"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_oops_header_tells_the_release_and_the_upstream_sublevel() {
        let debian =
            "[    2.345678] CPU: 0 PID: 1 Comm: x Not tainted 6.1.0-57-amd64 #1 Debian 6.1.192-3";
        assert_eq!(
            KernelVersion::from_oops_line(debian),
            Some(KernelVersion::new(6, 1, Some(192)))
        );
        let tainted = "CPU: 3 PID: 812 Comm: insmod Tainted: G      D W  OE      6.12.0-rc1+ #4";
        assert_eq!(
            KernelVersion::from_oops_line(tainted),
            Some(KernelVersion::new(6, 12, None))
        );
        let upstream = "CPU: 1 UID: 0 PID: 77 Comm: sh Not tainted 7.2.13 #1 PREEMPT(voluntary)";
        assert_eq!(
            KernelVersion::from_oops_line(upstream),
            Some(KernelVersion::new(7, 2, Some(13)))
        );
        for other in [
            "Call Trace:",
            "Hardware name: QEMU Standard PC (i440FX + PIIX, 1996)",
            "CPU: 0 is up",
            "Modules linked in: dummy(OE) crc7",
        ] {
            assert_eq!(KernelVersion::from_oops_line(other), None, "{other}");
        }
    }

    #[test]
    fn a_package_name_tells_the_release_and_the_upstream_version() {
        assert_eq!(
            KernelVersion::from_package_name("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"),
            Some(KernelVersion::new(6, 1, Some(192)))
        );
        assert_eq!(
            KernelVersion::from_package_name(
                "linux-image-6.12.38+deb13-amd64-dbg_6.12.38-1_amd64.deb"
            ),
            Some(KernelVersion::new(6, 12, Some(38)))
        );
        assert_eq!(
            KernelVersion::from_package_name("vmlinuz-6.1.0-57-amd64"),
            None
        );
        assert_eq!(
            KernelVersion::from_package_name("hello_1.0_amd64.deb"),
            None
        );
    }

    #[test]
    fn a_banner_without_an_upstream_version_has_no_sublevel() {
        let b = "Linux version 6.12.0-rc1+ (u@h) (gcc 14) #4 SMP";
        assert_eq!(
            KernelVersion::from_banner(b),
            Some(KernelVersion::new(6, 12, None))
        );
    }
}
