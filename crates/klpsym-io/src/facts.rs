//! What a target kernel's module loader checks a module against, found where the kernel's
//! files keep it: its release, its configuration (`config-<release>` beside the image,
//! /boot, /proc/config.gz), the exported symbols' CRCs and namespaces (Module.symvers, a
//! vmlinux's `__crc_*` symbols, an image's `__kcrctab`), and, for the running kernel, /proc and
//! /sys.

use std::io::Read;
use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;

use crate::error::LoadError;
use crate::kernel::{read_bounded, LoadedKernel, DEFAULT_SOURCE};

/// The running kernel's release (`uname -r`), from /proc/sys/kernel/osrelease.
pub fn live_release() -> Option<String> {
    let s = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// True when `path` is the running kernel's /proc/kallsyms.
pub fn is_live(path: &Path) -> bool {
    path == Path::new(DEFAULT_SOURCE)
}

/// The release of a loaded kernel (`6.1.0-57-amd64`), from its banner.
pub fn release_of(k: &LoadedKernel) -> Option<String> {
    let v = k.facts.version.as_deref()?;
    klpsym_image::banner_release(v).map(str::to_string)
}

/// A kernel's build configuration (`CONFIG_X=y` lines).
///
/// Kept as its text and the positions of its option lines, not as a map of copied strings:
/// a Debian config has about 9,000 options, and one allocation per key and value made reading
/// it a tenth of a warm `check`. A few dozen options are ever asked, each a scan of the index.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(from = "ConfigText", into = "ConfigText")]
pub struct KernelConfig {
    /// Where it was read.
    pub path: PathBuf,
    text: String,
    options: Vec<ConfigLine>,
}

/// One option line of a [`KernelConfig`]'s text: the key's byte range, and the value's (`None`
/// for `# CONFIG_X is not set`, which reads as `n`).
#[derive(Debug, Clone, Copy)]
struct ConfigLine {
    key: (u32, u32),
    value: Option<(u32, u32)>,
}

/// How a [`KernelConfig`] is stored (in a cache entry): its path and text; the index is
/// rebuilt when read back.
#[derive(serde::Serialize, serde::Deserialize)]
struct ConfigText {
    path: PathBuf,
    text: String,
}

impl From<KernelConfig> for ConfigText {
    fn from(c: KernelConfig) -> ConfigText {
        ConfigText {
            path: c.path,
            text: c.text,
        }
    }
}

impl From<ConfigText> for KernelConfig {
    fn from(c: ConfigText) -> KernelConfig {
        // The text was a configuration when it was stored (and the entry is hash-checked);
        // a line that no longer parses just ends the index.
        let options = index_config(&c.text, &mut Resched::none()).unwrap_or_default();
        KernelConfig {
            path: c.path,
            text: c.text,
            options,
        }
    }
}

/// The option lines of a configuration's text; `Err` names the first line that is not one
/// (with its 1-based number), or says the reschedule point cancelled.
fn index_config(text: &str, resched: &mut Resched) -> Result<Vec<ConfigLine>, ConfigError> {
    let base = text.as_ptr() as usize;
    let span = |s: &str| ((s.as_ptr() as usize - base) as u32, s.len() as u32);
    let mut options = Vec::new();
    for (i, line) in text.lines().enumerate() {
        resched.tick().map_err(ConfigError::Cancelled)?;
        if let Some((k, v)) = line.split_once('=') {
            if k.starts_with("CONFIG_") {
                options.push(ConfigLine {
                    key: span(k),
                    value: Some(span(v)),
                });
            }
        } else if let Some(rest) = line.strip_prefix("# ") {
            if let Some(k) = rest
                .strip_suffix(" is not set")
                .filter(|k| k.starts_with("CONFIG_"))
            {
                options.push(ConfigLine {
                    key: span(k),
                    value: None,
                });
            }
        } else if !line.is_empty() && !line.starts_with('#') {
            return Err(ConfigError::Line(i + 1));
        }
    }
    Ok(options)
}

enum ConfigError {
    Line(usize),
    Cancelled(klpsym_core::resched::Cancelled),
}

impl KernelConfig {
    /// Parses a .config (plain text, or gzip as /proc/config.gz is).
    pub fn read(path: &Path, resched: &mut Resched) -> Result<KernelConfig, LoadError> {
        let raw = read_bounded(path, 64 << 20, resched)?;
        KernelConfig::parse(&raw, path, resched)
    }

    /// Parses a .config's bytes; `path` names it (a file, or `PACKAGE:MEMBER`).
    pub fn parse(
        raw: &[u8],
        path: &Path,
        resched: &mut Resched,
    ) -> Result<KernelConfig, LoadError> {
        let raw = decompressed(raw, path, 64 << 20, resched)?;
        // A config is ASCII: the plain check is a fast pass over it, the lossy decode a slow
        // one (a tenth of the parse here) kept for the odd byte that is not UTF-8.
        let text = match std::str::from_utf8(&raw) {
            Ok(t) => t.to_owned(),
            Err(_) => String::from_utf8_lossy(&raw).into_owned(),
        };
        let options = match index_config(&text, resched) {
            Ok(o) => o,
            Err(ConfigError::Cancelled(c)) => {
                return Err(LoadError::from(klpsym_core::BuildError::from(c)))
            }
            Err(ConfigError::Line(n)) => {
                return Err(LoadError::Unrecognized {
                    path: path.to_path_buf(),
                    what: format!("line {n}: not a kernel configuration line (CONFIG_X=value)"),
                })
            }
        };
        if options.is_empty() {
            return Err(LoadError::Unrecognized {
                path: path.to_path_buf(),
                what: "holds no CONFIG_ option: not a kernel configuration".into(),
            });
        }
        Ok(KernelConfig {
            path: path.to_path_buf(),
            text,
            options,
        })
    }

    /// The value of `option` as the last line setting it says (`n` for `is not set`).
    fn lookup(&self, option: &str) -> Option<&str> {
        let at = |(off, len): (u32, u32)| &self.text[off as usize..(off + len) as usize];
        let line = self
            .options
            .iter()
            .rev()
            .find(|l| l.key.1 as usize == option.len() && at(l.key) == option)?;
        Some(line.value.map_or("n", at))
    }

    /// `Some(true)` for `=y`/`=m`, `Some(false)` for `is not set` or absent from a config
    /// that lists options (kconfig writes every visible one; an invisible one is off).
    pub fn enabled(&self, option: &str) -> bool {
        matches!(self.lookup(option), Some("y" | "m"))
    }

    /// `VERMAGIC_STRING` (include/linux/vermagic.h) from a kernel's release and this
    /// configuration: `UTS_RELEASE " "`, then `SMP `, the preemption token (`preempt ` for
    /// CONFIG_PREEMPT in 5.10, CONFIG_PREEMPT_BUILD since 5.13; `preempt_rt ` for PREEMPT_RT,
    /// tested first since 6.13), `mod_unload `, `modversions `, and `aarch64` on arm64 (MODULE_ARCH_VERMAGIC, last and
    /// without a space).
    /// `None` with a randomized struct layout (its token carries a seed hash the config does
    /// not hold).
    pub fn vermagic(&self, release: &str) -> Option<String> {
        let c = self;
        let randstruct = [
            "CONFIG_RANDSTRUCT_FULL",
            "CONFIG_RANDSTRUCT_PERFORMANCE",
            "CONFIG_GCC_PLUGIN_RANDSTRUCT",
        ];
        if randstruct.iter().any(|o| c.enabled(o)) {
            return None;
        }
        let mut v = format!("{release} ");
        let version = {
            let mut it = release.split(|ch: char| !ch.is_ascii_digit());
            let major: u32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            let minor: u32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            (major, minor)
        };
        if c.enabled("CONFIG_SMP") {
            v.push_str("SMP ");
        }
        // Which of the two wins when both are set changed in 6.13 (RT is tested first since).
        let preempt = c.enabled("CONFIG_PREEMPT_BUILD") || c.enabled("CONFIG_PREEMPT");
        let rt = c.enabled("CONFIG_PREEMPT_RT");
        if rt && (version >= (6, 13) || !preempt) {
            v.push_str("preempt_rt ");
        } else if preempt {
            v.push_str("preempt ");
        }
        if c.enabled("CONFIG_MODULE_UNLOAD") {
            v.push_str("mod_unload ");
        }
        if c.enabled("CONFIG_MODVERSIONS") {
            v.push_str("modversions ");
        }
        if c.enabled("CONFIG_ARM64") {
            v.push_str("aarch64");
        }
        Some(v)
    }

    /// The raw value of `option`.
    pub fn value(&self, option: &str) -> Option<&str> {
        self.lookup(option)
    }
}

/// Where the configuration of `k` is, when it can be found: `config-<release>` beside a kernel
/// image (Debian's /boot and, since 7.x, /usr/lib/modules/<abi>/config), and for the running
/// kernel /boot/config-$(uname -r) or /proc/config.gz.
pub fn find_config(k: &LoadedKernel) -> Option<PathBuf> {
    let release = release_of(k);
    let mut cands: Vec<PathBuf> = Vec::new();
    if is_live(&k.path) {
        if let Some(r) = &release {
            cands.push(PathBuf::from(format!("/boot/config-{r}")));
            cands.push(PathBuf::from(format!("/lib/modules/{r}/config")));
        }
        cands.push(PathBuf::from("/proc/config.gz"));
    } else if let (Some(dir), Some(r)) = (k.path.parent(), &release) {
        cands.push(dir.join(format!("config-{r}")));
        cands.push(dir.join("config"));
        if let Some(up) = dir.parent() {
            // /usr/lib/modules/<abi>/vmlinuz → the same folder; /boot/vmlinuz → ../boot
            cands.push(up.join("boot").join(format!("config-{r}")));
        }
    }
    cands.into_iter().find(|p| p.is_file())
}

/// `raw` itself, or its decompressed bytes (at most `limit`) when it starts with gzip's or
/// XZ's magic (/proc/config.gz; RPM's symvers.gz or symvers.xz), read in steps.
pub(crate) fn decompressed<'a>(
    raw: &'a [u8],
    path: &Path,
    limit: u64,
    rs: &mut Resched,
) -> Result<std::borrow::Cow<'a, [u8]>, LoadError> {
    let Some(c) = klpsym_image::sniff_compression(raw) else {
        return Ok(std::borrow::Cow::Borrowed(raw));
    };
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut d = klpsym_image::StreamDecoder::new(Some(c), raw, limit, rs).map_err(io)?;
    let mut v = Vec::new();
    d.read_to_end(&mut v).map_err(io)?;
    Ok(std::borrow::Cow::Owned(v))
}

/// The Module.symvers of a module tree's kernel: `DIR/build/Module.symvers` (kbuild's and
/// Debian's layout: `build` points at the headers).
pub fn find_symvers(modules_dir: &Path) -> Option<PathBuf> {
    let p = modules_dir.join("build").join("Module.symvers");
    p.is_file().then_some(p)
}

/// What decides whether the running kernel shows this process symbol addresses in
/// /proc/kallsyms: `kernel.kptr_restrict`, `kernel.perf_event_paranoid`, and CAP_SYSLOG in the
/// process's effective set (`None` where it cannot be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressVisibility {
    /// `/proc/sys/kernel/kptr_restrict`.
    pub kptr_restrict: Option<i64>,
    /// `/proc/sys/kernel/perf_event_paranoid`.
    pub perf_event_paranoid: Option<i64>,
    /// CAP_SYSLOG (34) in `CapEff` of /proc/self/status.
    pub cap_syslog: Option<bool>,
}

impl AddressVisibility {
    /// Reads the three from /proc.
    pub fn read() -> AddressVisibility {
        let sysctl = |name: &str| -> Option<i64> {
            std::fs::read_to_string(format!("/proc/sys/{name}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let cap_syslog = || -> Option<bool> {
            let status = std::fs::read_to_string("/proc/self/status").ok()?;
            let hex = status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim();
            let caps = u64::from_str_radix(hex, 16).ok()?;
            Some(caps & (1 << 34) != 0)
        };
        AddressVisibility {
            kptr_restrict: sysctl("kernel/kptr_restrict"),
            perf_event_paranoid: sysctl("kernel/perf_event_paranoid"),
            cap_syslog: cap_syslog(),
        }
    }
}

/// For the running kernel: `/sys/module/module/parameters/sig_enforce` (Y when module
/// signatures are enforced, by CONFIG_MODULE_SIG_FORCE or `module.sig_enforce=1`).
pub fn live_sig_enforce() -> Option<bool> {
    let s = std::fs::read_to_string("/sys/module/module/parameters/sig_enforce").ok()?;
    match s.trim() {
        "Y" | "1" => Some(true),
        "N" | "0" => Some(false),
        _ => None,
    }
}

/// BTF as users have it: `/sys/kernel/btf/vmlinux` (raw BTF), a vmlinux ELF (its `.BTF`
/// section), or a kernel image (decompressed; its `.BTF` section, or found by its header when
/// the image has no section headers, as an arm64 Image).
pub fn read_btf(
    path: &Path,
    opts: &crate::kernel::LoadOptions,
    resched: &mut Resched,
) -> Result<Vec<u8>, LoadError> {
    let raw = read_bounded(path, opts.max_input_size, resched)?;
    // A package: its image (or debug vmlinux) holds the BTF.
    let raw = crate::package::kernel_file_of(path, raw, opts, resched)?;
    if raw.starts_with(&[0x9f, 0xeb]) || raw.starts_with(&[0xeb, 0x9f]) {
        return Ok(raw);
    }
    let not_found = |what: &str| {
        LoadError::Unrecognized {
        path: path.to_path_buf(),
        what: format!("no BTF found ({what}); expected /sys/kernel/btf/vmlinux, a vmlinux or a kernel image built with CONFIG_DEBUG_INFO_BTF"),
    }
    };
    if let Some(b) = btf_in(&raw) {
        return Ok(b.to_vec());
    }
    if matches!(
        crate::detect::detect(&raw),
        crate::detect::Detected::Compressed(_) | crate::detect::Detected::Image
    ) {
        let limit = usize::try_from(opts.max_decompressed_size).unwrap_or(usize::MAX);
        let d = klpsym_image::decompress_image_with_resched(&raw, limit, resched)
            .map_err(|source| crate::kernel::image_error(path, source))?;
        if let Some(b) = btf_in(&d.data) {
            return Ok(b.to_vec());
        }
        return Err(not_found("the decompressed image holds none"));
    }
    Err(not_found(
        "neither raw BTF, nor an ELF with .BTF, nor a kernel image",
    ))
}

/// The `.BTF` section of an ELF, else a BTF blob found by its header (magic 0xeB9F little
/// endian, version 1, 24-byte header) whose sections fit the data.
fn btf_in(data: &[u8]) -> Option<&[u8]> {
    use object::{Object, ObjectSection};
    if let Ok(f) = object::File::parse(data) {
        if let Some(s) = f.section_by_name(".BTF") {
            return s.data().ok().filter(|d| !d.is_empty());
        }
    }
    const HEAD: [u8; 8] = [0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
    let u32_at = |d: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
    };
    let mut from = 0;
    while let Some(i) = data
        .get(from..)?
        .windows(HEAD.len())
        .position(|w| w == HEAD)
    {
        let at = from + i;
        from = at + 1;
        let (Some(toff), Some(tlen), Some(soff), Some(slen)) = (
            u32_at(data, at + 8),
            u32_at(data, at + 12),
            u32_at(data, at + 16),
            u32_at(data, at + 20),
        ) else {
            continue;
        };
        let end = [toff as u64 + tlen as u64, soff as u64 + slen as u64]
            .into_iter()
            .max()
            .unwrap_or(0)
            + 24;
        if toff == 0 && tlen > 0 && slen > 0 && (at as u64 + end) <= data.len() as u64 {
            return data.get(at..at + end as usize);
        }
    }
    None
}

/// The addresses the kernel gave a loaded module's sections: a `/sys/module/<name>/sections`
/// folder (or a copy of it), one file per section named like the section and holding its
/// address in hex (`0xffffffffc0a01000`). Sorted by name.
pub fn read_section_addresses(
    dir: &Path,
    resched: &mut Resched,
) -> Result<Vec<(String, u64)>, LoadError> {
    let io = |path: &Path, source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|s| io(dir, s))? {
        resched
            .tick()
            .map_err(|c| LoadError::from(klpsym_core::BuildError::from(c)))?;
        let e = e.map_err(|s| io(dir, s))?;
        let path = e.path();
        if !e.file_type().map_err(|s| io(&path, s))?.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).map_err(|s| io(&path, s))?;
        let t = text.trim();
        let addr = u64::from_str_radix(t.trim_start_matches("0x"), 16).map_err(|_| {
            LoadError::Unrecognized {
                path: path.clone(),
                what: format!(
                    "'{t}' is not a section address (expected hex such as 0xffffffffc0a01000)"
                ),
            }
        })?;
        out.push((name, addr));
    }
    if out.is_empty() {
        return Err(LoadError::Unrecognized {
            path: dir.to_path_buf(),
            what: "no section files: expected a /sys/module/<name>/sections folder (readable by root only)".into(),
        });
    }
    if out.iter().all(|(_, a)| *a == 0) {
        return Err(LoadError::Unrecognized {
            path: dir.to_path_buf(),
            what: "every section address is 0: the kernel hides them (kptr_restrict, or not read as root)".into(),
        });
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KernelConfig, LoadError> {
        KernelConfig::parse(
            text.as_bytes(),
            Path::new("config-test"),
            &mut Resched::none(),
        )
    }

    #[test]
    fn options_read_as_kconfig_wrote_them() {
        let text = "#\n# Automatically generated file; DO NOT EDIT.\n#\nCONFIG_SMP=y\n\
                    CONFIG_X=m\n# CONFIG_PREEMPT is not set\nCONFIG_NAME=\"a=b\"\n\
                    # CONFIG_NOT_AN_OPTION_LINE\nCONFIG_X=y\n\nNOT_CONFIG=1\n";
        let c = parse(text).unwrap();
        assert!(c.enabled("CONFIG_SMP"));
        assert_eq!(c.value("CONFIG_PREEMPT"), Some("n"));
        assert!(!c.enabled("CONFIG_PREEMPT"));
        // The last line setting an option wins, as kconfig reads it.
        assert_eq!(c.value("CONFIG_X"), Some("y"));
        assert_eq!(c.value("CONFIG_NAME"), Some("\"a=b\""));
        assert_eq!(c.value("CONFIG_SM"), None);
        assert_eq!(c.value("NOT_CONFIG"), None);
        assert_eq!(c.value("CONFIG_NOT_AN_OPTION_LINE"), None);
        // Through a cache entry's JSON and back: the same answers.
        let back: KernelConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        for o in [
            "CONFIG_SMP",
            "CONFIG_X",
            "CONFIG_PREEMPT",
            "CONFIG_NAME",
            "CONFIG_Q",
        ] {
            assert_eq!(back.value(o), c.value(o), "{o}");
        }
        assert_eq!(back.path, c.path);
    }

    #[test]
    fn a_byte_that_is_not_utf8_is_read_lossily() {
        let c = KernelConfig::parse(
            b"CONFIG_A=\"x\xffy\"\nCONFIG_B=y\n",
            Path::new("config-test"),
            &mut Resched::none(),
        )
        .unwrap();
        assert_eq!(c.value("CONFIG_A"), Some("\"x\u{fffd}y\""));
        assert!(c.enabled("CONFIG_B"));
    }

    #[test]
    fn a_line_that_is_no_option_is_named() {
        let e = parse("CONFIG_A=y\n\nsomething else\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        let e = parse("# only comments\n").unwrap_err().to_string();
        assert!(e.contains("no CONFIG_ option"), "{e}");
    }
}
