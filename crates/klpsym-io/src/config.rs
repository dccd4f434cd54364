//! A kernel's configuration file (`.config`, `config-RELEASE`, `/proc/config.gz`), read and
//! decompressed, then parsed (`klpsym_sources::kconfig`).

use std::path::Path;

use klpsym_core::resched::Resched;
use klpsym_sources::{ConfigError, KernelConfig};

use crate::error::LoadError;
use crate::read::{decompressed, read_bounded};

/// Reads a .config (plain text, or gzip as /proc/config.gz is).
pub fn read_config(path: &Path, resched: &mut Resched) -> Result<KernelConfig, LoadError> {
    let raw = read_bounded(path, 64 << 20, resched)?;
    parse_config(&raw, path, resched)
}

/// Parses a .config's bytes (plain or gzip/XZ-compressed); `path` names it (a file, or
/// `PACKAGE:MEMBER`).
pub fn parse_config(
    raw: &[u8],
    path: &Path,
    resched: &mut Resched,
) -> Result<KernelConfig, LoadError> {
    let raw = decompressed(raw, path, 64 << 20, resched)?;
    KernelConfig::parse(&raw, path, resched).map_err(|e| match e {
        ConfigError::Cancelled(_) => LoadError::Cancelled,
        e => LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: e.to_string(),
        },
    })
}
