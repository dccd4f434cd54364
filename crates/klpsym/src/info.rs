//! What a source holds ([`Kernel::info`]) and its table back in `/proc/kallsyms` format
//! ([`Kernel::write_kallsyms`]).

use std::io::Write;

use serde::Serialize;

use klpsym_core::{write_kallsyms, KallsymsWriter, ObjectKind, Resched};
use klpsym_io::SourceKind;

use crate::error::{Error, ErrorKind, Result};
use crate::kernel::Kernel;
use crate::run::Answer;

/// What one source holds.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct KernelInfo {
    /// The source.
    pub kernel: String,
    /// What kind of source it is (JSON: `kallsyms`, `system_map`, `vmlinux_elf`,
    /// `kernel_image`, `module`).
    #[serde(serialize_with = "source_kind")]
    pub kind: SourceKind,
    /// Bytes read.
    pub bytes: u64,
    /// Symbols in the table.
    pub symbols: usize,
    /// Distinct names.
    pub distinct_names: usize,
    /// True when every address is zero.
    pub addresses_hidden: bool,
    /// The lowest address.
    #[serde(serialize_with = "klpsym_core::hex_serde::addr_opt")]
    pub lowest_address: Option<u64>,
    /// The highest address.
    #[serde(serialize_with = "klpsym_core::hex_serde::addr_opt")]
    pub highest_address: Option<u64>,
    /// The release (`6.1.0-57-amd64`), the same form for every kind of source.
    pub version: Option<String>,
    /// The whole `Linux version ...` banner, when the source has one.
    pub banner: Option<String>,
    /// The module loader's vermagic, when the source has it (image, vmlinux, module).
    pub vermagic: Option<String>,
    /// The GNU build id (hex), when the source has it (image, vmlinux).
    pub build_id: Option<String>,
    /// The architecture.
    pub arch: Option<String>,
    /// Container and compression.
    pub format: Option<String>,
    /// Named facts: configuration, table locations, layout era.
    pub facts: std::collections::BTreeMap<String, String>,
    /// Anything assumed or uncertain.
    pub notes: Vec<String>,
    /// Every object with its symbol count.
    pub objects: Vec<ObjectSummary>,
    /// Time spent reading.
    pub read_ms: f64,
    /// Time spent decompressing, parsing, decoding.
    pub parse_ms: f64,
    /// The cache entry the table was read from (null: decoded from the source).
    pub cache_entry: Option<String>,
    /// Time spent building indexes.
    pub index_ms: f64,
}

/// One object of a table.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ObjectSummary {
    /// Its name.
    pub name: String,
    /// vmlinux, module, pseudo-object.
    pub kind: ObjectKind,
    /// Its symbols.
    pub symbols: u32,
    /// True when it is unplaced: a module read from its `.ko`, its addresses offsets in its
    /// sections.
    pub unplaced: bool,
    /// `unplaced`'s older JSON name, kept for readers of older output (deprecated).
    #[serde(rename = "relative")]
    relative_deprecated: bool,
}

impl Kernel {
    /// What this source holds: kind, version, build id, architecture, counts, timings.
    pub fn info(&self) -> KernelInfo {
        let k = &self.inner;
        let t = &k.table;
        let distinct = t.distinct_names();
        let (lo, hi) = if t.addresses_hidden() || t.is_empty() {
            (None, None)
        } else {
            (
                t.iter().map(|s| s.addr).min(),
                t.iter().map(|s| s.addr).max(),
            )
        };
        KernelInfo {
            kernel: k.path.display().to_string(),
            kind: k.kind,
            bytes: k.bytes,
            symbols: t.len(),
            distinct_names: distinct,
            addresses_hidden: t.addresses_hidden(),
            lowest_address: lo,
            highest_address: hi,
            version: self.release(),
            banner: k
                .facts
                .version
                .clone()
                .filter(|v| v.starts_with("Linux version ")),
            vermagic: k.facts.vermagic.clone(),
            build_id: k.facts.build_id.clone(),
            arch: k.facts.arch.clone(),
            format: k.facts.format.clone(),
            facts: k.facts.facts.iter().cloned().collect(),
            notes: k.facts.notes.clone(),
            objects: t
                .objects()
                .iter()
                .map(|o| ObjectSummary {
                    name: o.name.clone(),
                    kind: o.kind,
                    symbols: o.symbol_count,
                    unplaced: o.unplaced,
                    relative_deprecated: o.unplaced,
                })
                .collect(),
            read_ms: k.read_time.as_secs_f64() * 1e3,
            cache_entry: k.cached.as_ref().map(|p| p.display().to_string()),
            parse_ms: k.parse_time.as_secs_f64() * 1e3,
            index_ms: k.index_time.as_secs_f64() * 1e3,
        }
    }

    /// The objects among `object` (or all, when `None`) whose addresses are section offsets
    /// (modules read from their `.ko`, not placed).
    pub fn unplaced_objects(&self, object: Option<&str>) -> Result<Vec<String>> {
        let t = &self.inner.table;
        let filter = object.map(|o| self.dump_object(o)).transpose()?;
        Ok(t.objects()
            .iter()
            .filter(|o| o.unplaced && filter.is_none_or(|f| t.object_by_name(&o.name) == Some(f)))
            .map(|o| o.name.clone())
            .collect())
    }

    fn dump_object(&self, o: &str) -> Result<klpsym_core::ObjectId> {
        let name = klpsym_core::normalize_module_name(o);
        self.inner.table.object_by_name(&name).ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("no object named '{name}' in {}", self.inner.path.display()),
            )
        })
    }

    /// Writes the table (or one object's part) in `/proc/kallsyms` format; byte-identical to
    /// the input when that was `/proc/kallsyms`.
    pub fn write_kallsyms(&self, object: Option<&str>, out: &mut dyn Write) -> Result<()> {
        let t = &self.inner.table;
        match object.map(|o| self.dump_object(o)).transpose()? {
            None => write_kallsyms(t, &mut WriteRef(out), &mut Resched::none())?,
            Some(oid) => {
                let w = KallsymsWriter::new(t);
                let mut buf = Vec::with_capacity(1 << 16);
                for s in t.iter().filter(|s| s.object == oid) {
                    w.line(s.id.0, &mut buf);
                }
                out.write_all(&buf)?;
            }
        }
        Ok(())
    }
}

struct WriteRef<'a>(&'a mut dyn Write);

impl Write for WriteRef<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn source_kind<S: serde::Serializer>(k: &SourceKind, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(k.as_str())
}

/// What a source holds never says no.
impl Answer for KernelInfo {
    fn says_no(&self) -> bool {
        false
    }
}
