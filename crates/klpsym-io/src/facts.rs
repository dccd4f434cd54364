//! What a target kernel's module loader checks a module against, found where the kernel's
//! files keep it: its release, its configuration (`config-<release>` beside the image,
//! /boot, /proc/config.gz), the exported symbols' CRCs and namespaces (Module.symvers, a
//! vmlinux's `__crc_*` symbols, an image's `__kcrctab`), and, for the running kernel, /proc and
//! /sys.

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;

use crate::error::LoadError;
use crate::loaded::{is_live, LoadedKernel};
use crate::read::read_bounded;

/// The running kernel's release (`uname -r`), from /proc/sys/kernel/osrelease.
pub fn live_release() -> Option<String> {
    let s = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// The release of a loaded kernel (`6.1.0-57-amd64`), from its banner.
pub fn release_of(k: &LoadedKernel) -> Option<String> {
    let v = k.facts.version.as_deref()?;
    klpsym_image::banner_release(v).map(str::to_string)
}

/// Where the configuration of `k` is, when it can be found: `config-<release>` beside a kernel
/// image (Debian's /boot and, since 7.x, `/usr/lib/modules/<abi>/config`), and for the running
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
    opts: &crate::options::LoadOptions,
    resched: &mut Resched,
) -> Result<Vec<u8>, LoadError> {
    // A package: its image (or debug vmlinux) holds the BTF.
    let held = if crate::detect::is_package(path) {
        crate::package::kernel_file_of(path, opts, resched)?
    } else {
        std::sync::Arc::new(read_bounded(path, opts.max_input_size, resched)?)
    };
    let raw: &[u8] = (*held).as_ref();
    if raw.starts_with(&[0x9f, 0xeb]) || raw.starts_with(&[0xeb, 0x9f]) {
        return Ok(raw.to_vec());
    }
    let not_found = |what: &str| {
        LoadError::Unrecognized {
        path: path.to_path_buf(),
        what: format!("no BTF found ({what}); expected /sys/kernel/btf/vmlinux, a vmlinux or a kernel image built with CONFIG_DEBUG_INFO_BTF"),
    }
    };
    let cancelled = |_| LoadError::Cancelled;
    if let Some(b) = klpsym_elf::btf::find_btf_with(raw, resched).map_err(cancelled)? {
        return Ok(b.to_vec());
    }
    if matches!(
        crate::detect::detect(raw),
        crate::detect::Detected::Compressed(_) | crate::detect::Detected::Image
    ) {
        let limit = usize::try_from(opts.max_decompressed_size).unwrap_or(usize::MAX);
        let d = klpsym_image::decompress_image_with(raw, limit, resched)
            .map_err(|source| crate::error::image_error(path, source))?;
        if let Some(b) = klpsym_elf::btf::find_btf_with(&d.data, resched).map_err(cancelled)? {
            return Ok(b.to_vec());
        }
        return Err(not_found("the decompressed image holds none"));
    }
    Err(not_found(
        "neither raw BTF, nor an ELF with .BTF, nor a kernel image",
    ))
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
