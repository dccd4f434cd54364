//! A kernel's build configuration (`.config`, `config-RELEASE`, `/proc/config.gz` once
//! decompressed): which options are set, and the `VERMAGIC_STRING` they make. No I/O: the I/O
//! layer reads and decompresses the file.

use std::path::{Path, PathBuf};

use klpsym_core::resched::{Cancelled, Resched};

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

/// Why bytes are not a kernel configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A line that is neither an option, a comment nor empty (1-based).
    #[error("line {0}: not a kernel configuration line (CONFIG_X=value)")]
    Line(usize),
    /// No option at all.
    #[error("holds no CONFIG_ option: not a kernel configuration")]
    NoOption,
    /// A reschedule point said stop.
    #[error("cancelled")]
    Cancelled(#[from] Cancelled),
}

impl KernelConfig {
    /// Parses a .config's text (decompressed already); `path` names it in reports (a file,
    /// or `PACKAGE:MEMBER`).
    pub fn parse(
        raw: &[u8],
        path: &Path,
        resched: &mut Resched,
    ) -> Result<KernelConfig, ConfigError> {
        // A config is ASCII: the plain check is a fast pass over it, checked and copied in
        // steps (a distribution's config is 250-300 KB: in one go, 0.4-0.6 ms between two
        // points, `klpsym-bench resched`, 2026-12-07); the lossy decode a slow one kept for
        // the odd byte that is not UTF-8.
        let mut text = String::with_capacity(raw.len());
        let mut at = 0;
        while at < raw.len() {
            let end = (at + (16 << 10)).min(raw.len());
            match std::str::from_utf8(&raw[at..end]) {
                Ok(t) => {
                    text.push_str(t);
                    at = end;
                }
                // A character cut by the step's end: the next step starts at it.
                Err(e) if e.error_len().is_none() && end < raw.len() && e.valid_up_to() > 0 => {
                    let t = std::str::from_utf8(&raw[at..at + e.valid_up_to()]).unwrap_or_default();
                    text.push_str(t);
                    at += e.valid_up_to();
                }
                Err(_) => {
                    text = String::from_utf8_lossy(raw).into_owned();
                    break;
                }
            }
            resched.tick_step().map_err(ConfigError::Cancelled)?;
        }
        let options = index_config(&text, resched)?;
        if options.is_empty() {
            return Err(ConfigError::NoOption);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KernelConfig, ConfigError> {
        KernelConfig::parse(
            text.as_bytes(),
            Path::new("config-test"),
            &mut Resched::none(),
        )
    }

    /// The text is checked and copied in 16 KiB steps: a character cut by a step's end, and a
    /// byte that is not UTF-8 (read lossily, as before), keep every option.
    #[test]
    fn a_long_config_reads_whole_across_its_steps() {
        // "é" (2 bytes) at 16,382, 16,383 (cut by the first step's end) and 16,384.
        let head = |n: usize| format!("CONFIG_A=y\n{}\nCONFIG_NAME=\"", "#".repeat(n));
        for n in 16357..16360 {
            let mut t = head(n);
            assert!((16382..16385).contains(&t.len()));
            t.push_str("\u{e9}t\u{e9}\"\n");
            t.push_str(&"# more\n".repeat(5000));
            t.push_str("CONFIG_LAST=m\n");
            let c = parse(&t).unwrap();
            assert_eq!(c.value("CONFIG_NAME"), Some("\"\u{e9}t\u{e9}\""));
            assert_eq!(c.value("CONFIG_LAST"), Some("m"));
            assert_eq!(c.value("CONFIG_A"), Some("y"));
        }
        let text = head(16358);
        let mut raw = text.into_bytes();
        raw.extend_from_slice(b"x\"\nCONFIG_BAD=\"\xff\"\nCONFIG_LAST=m\n");
        let c = KernelConfig::parse(&raw, Path::new("c"), &mut Resched::none()).unwrap();
        assert_eq!(c.value("CONFIG_BAD"), Some("\"\u{fffd}\""));
        assert_eq!(c.value("CONFIG_LAST"), Some("m"));
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
