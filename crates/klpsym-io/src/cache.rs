//! The index cache: decoded tables of kernel images, vmlinux ELFs and packages, kept so a
//! repeat run reads a few megabytes instead of decompressing and decoding again. One cache
//! serves every front end: the command, the Python extension and any library program read
//! each other's entries.
//!
//! An entry is named by the input's identity ([`crate::input_identity`]: the xxh3-128 hash of
//! its bytes, or for an ELF with a GNU build id, a vmlinux, that build id and its length), the
//! cache's format ([`CACHE_FORMAT`]) and the options that change what decoding produces;
//! never by the program that wrote it. Two copies of one package share one entry. The
//! identity comes from the input's stamp record ([`crate::stamp`]) when the input has kept
//! the stamp it was proven with, long enough after its last change; otherwise the input is
//! hashed (two threads, 1 MiB chunks) and the record written again.
//! The entry holds the table in fixed-width records ([`SymbolTable::encode`]), the facts as
//! JSON, and ends with the xxh3-128 of everything before it: a truncated, corrupt or
//! other-format entry is ignored and rebuilt, never trusted. Entries are written to a
//! temporary file and renamed, so concurrent runs never see half an entry; they are read
//! through a read-only memory map (entries are never written in place, only replaced). A hit
//! sets the entry's mtime (at most once an hour): the cache is pruned least recently used
//! first ([`Cache::max_bytes`], `cache_list.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::SymbolTable;

use crate::cache_dir::Cache;
use crate::entry::{hash_in_steps, map_entry, split, take_str, u32_at, u64_at, CACHE_FORMAT};
use crate::error::LoadError;
use crate::file_stamp::{Proof, Stamp};
use crate::loaded::{LoadedKernel, PackageParts, SourceFacts, SourceKind};
use crate::options::LoadOptions;

pub(crate) const MAGIC: &[u8; 8] = b"KLPSYMC\0";

/// One entry as `klpsym cache` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntryInfo {
    /// The entry file.
    pub file: PathBuf,
    /// Its size in bytes on disk, with what belongs to it: a kernel's debug sections
    /// (`ENTRY.dwarf`) and its inputs' stamp records.
    pub bytes: u64,
    /// Of which the debug sections kept beside a `-dbg` kernel's entry.
    pub debug_bytes: u64,
    /// The input it was made from (as first named).
    pub source: Option<String>,
    /// The input's size when cached.
    pub source_bytes: Option<u64>,
    /// Whether the entry is of this klpsym's format (others are ignored and rebuilt).
    pub current: bool,
    /// Whether an input of the entry is still there as it was (with the stamp it was proven
    /// with; a module tree: every directory unchanged; a module debug file: its build's
    /// kernel entry is live). A stale entry is never used for a changed input; it is the
    /// first to go when the cache is pruned.
    pub live: bool,
    /// The inputs known to have its identity, each still there as proven (a package and
    /// its copies).
    pub inputs: Vec<String>,
    /// What it holds: `kernel` (a decoded table, with its debug sections when a `-dbg`
    /// package's), `package parts` (what a package holding no kernel adds: config,
    /// Module.symvers, named modules), `module tree` (a folder's listing), `Module.symvers`
    /// (a Module.symvers' index), `module debug file` (kept for `file:line`, named by its
    /// build's id), `copies index` (where a vmlinux's DWARF defines each function, named by
    /// its build's id), `debug sections` (left behind by a removed kernel entry) or
    /// `temporary file` (left behind by a run that was killed).
    pub kind: &'static str,
    /// Seconds since the entry was last written or used (a hit marks it at most once an
    /// hour).
    pub age_secs: u64,
}

/// What an entry records besides the table.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    pub(crate) source: String,
    pub(crate) source_bytes: u64,
    pub(crate) kind: SourceKind,
    pub(crate) facts: SourceFacts,
    pub(crate) package: Option<PackageMeta>,
    /// The declaration lines of a package's debug vmlinux (the package is not read again
    /// for them).
    #[serde(default)]
    pub(crate) lines: Option<crate::LineIndex>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct PackageMeta {
    pub(crate) packages: Vec<PathBuf>,
    pub(crate) release: Option<String>,
    pub(crate) config: Option<klpsym_sources::KernelConfig>,
    pub(crate) symvers: Option<klpsym_sources::Exports>,
}

/// The options that change what decoding produces, appended to a key.
pub(crate) fn put_options(k: &mut Vec<u8>, opts: &LoadOptions) {
    k.push(match opts.kallsyms_all {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    });
    // A package read with its modules is a different kernel: cached only with the modules a
    // check named, which the key names.
    k.push(opts.package_modules as u8);
    if let Some(names) = opts
        .package_modules
        .then_some(())
        .and(opts.package_module_names.as_ref())
    {
        let mut names: Vec<String> = names
            .iter()
            .map(|n| klpsym_core::normalize_module_name(n))
            .collect();
        names.sort();
        names.dedup();
        k.push(1);
        for n in names {
            k.extend_from_slice(n.as_bytes());
            k.push(0);
        }
    }
}

/// The key of the kernel entry of an input with identity `identity`: the cache's format,
/// the identity and the options that change what decoding produces.
pub(crate) fn entry_key(identity: u128, opts: &LoadOptions) -> Vec<u8> {
    let mut k = Vec::with_capacity(64);
    k.extend_from_slice(b"kernel\0");
    k.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    k.extend_from_slice(&identity.to_le_bytes());
    put_options(&mut k, opts);
    k
}

/// What a look-up found.
pub(crate) enum Lookup {
    /// The kernel, from its entry.
    Hit(Box<LoadedKernel>),
    /// No entry to use; the input's identity when it was proven (and recorded) on the way,
    /// so the caller need not hash the input again.
    Miss(Option<u128>),
}

impl Cache {
    /// The identity of the input at `path` (whose metadata is `meta`): from its stamp
    /// record when it is trusted (nothing of the input read), else proven by reading the
    /// input (and recorded). `None` when the input changed while it was read, or when no
    /// record names an input of its size (then no entry can be its: see
    /// `stamp::any_of_size`).
    pub(crate) fn identity_of(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        limit: u64,
        rs: &mut Resched,
    ) -> Result<Option<u128>, LoadError> {
        if let Some(id) = crate::stamp::trusted_identity(self, &Stamp::of(meta)) {
            return Ok(Some(id));
        }
        if !crate::stamp::any_of_size(self, meta.len(), rs)? {
            return Ok(None);
        }
        let proof = Proof::begin(meta);
        let Some(id) = crate::entry::prove_identity(path, limit, rs)? else {
            return Ok(None);
        };
        crate::stamp::record(self, path, &proof, id, rs);
        Ok(Some(id))
    }

    /// The cached kernel of `path`, when a valid entry matches its identity.
    /// `Ok(None)` for every kind of miss (none, stale, corrupt, other format).
    pub fn get(
        &self,
        path: &Path,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<Option<LoadedKernel>, LoadError> {
        Ok(match self.lookup(path, opts, rs)? {
            Lookup::Hit(k) => Some(*k),
            Lookup::Miss(_) => None,
        })
    }

    /// [`Cache::get`], telling the caller the input's identity on a miss when it was proven.
    pub(crate) fn lookup(
        &self,
        path: &Path,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<Lookup, LoadError> {
        let t0 = Instant::now();
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(Lookup::Miss(None));
        };
        // No folder yet (a first run): nothing to find, and the caller hashes the input
        // while it reads it.
        if !self.private() {
            return Ok(Lookup::Miss(None));
        }
        // A package is read streaming and never refused for its size (its members are
        // bounded instead), so its entry is not either: only a file read whole has a limit.
        let limit = if crate::detect::is_package(path) {
            u64::MAX
        } else {
            opts.max_input_size
        };
        let Some(identity) = self.identity_of(path, &meta, limit, rs)? else {
            return Ok(Lookup::Miss(None));
        };
        let miss = || Ok(Lookup::Miss(Some(identity)));
        let key = entry_key(identity, opts);
        let entry = self.entry_path(&key);
        // The table reads its names and records in place, keeping the map alive.
        let Some(backing) = map_entry(&entry) else {
            return miss();
        };
        let map: &[u8] = (*backing).as_ref();
        let Some((body, trailer)) = map
            .len()
            .checked_sub(16)
            .map(|n| map.split_at(n))
            .and_then(|(b, t)| Some((b, u128::from_le_bytes(t.try_into().ok()?))))
        else {
            return miss();
        };
        let Some((_, parsed)) =
            parse_body(body).filter(|(k, p)| *k == key && p.content == identity)
        else {
            return miss();
        };
        // The entry must be whole: a helper thread hashes it while this one decodes it
        // (decoding checks every bound, so it is safe on any bytes); a mismatch throws the
        // decoded table away.
        let mut helper = rs.sibling();
        let (hashed, decoded) = std::thread::scope(|s| {
            let helping = std::thread::Builder::new()
                .spawn_scoped(s, || hash_in_steps(body, &mut helper))
                .ok();
            let decoded = self.decode_parsed(&parsed, &backing, opts, rs);
            let hashed = match helping {
                Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No helper when the system refuses a thread: this one hashes.
                None => hash_in_steps(body, rs),
            };
            (hashed, decoded)
        });
        let hashed = hashed.map_err(|c| LoadError::from(klpsym_core::BuildError::from(c)))?;
        let decoded = decoded?;
        if hashed != trailer {
            return miss();
        }
        let Some((entry_meta, table, decode_time)) = decoded else {
            return miss();
        };
        touch(&entry);
        let read_time = t0.elapsed().saturating_sub(decode_time);
        Ok(Lookup::Hit(Box::new(LoadedKernel {
            cached: Some(entry),
            content: Some(identity),
            path: path.to_path_buf(),
            kind: entry_meta.kind,
            table,
            facts: entry_meta.facts,
            module: None,
            read_time,
            parse_time: decode_time,
            bytes: meta.len(),
            index_time: Duration::ZERO,
            debug: None,
            lines: entry_meta.lines.map(std::sync::Arc::new),
            elf: None,
            module_layouts: Vec::new(),
            package: entry_meta.package.map(|p| PackageParts {
                packages: p.packages,
                release: p.release,
                config: p.config,
                symvers: p.symvers,
                modules: parsed.modules.as_ref().map(|m| {
                    crate::modules::ModuleTree::from_members(
                        path,
                        m.iter().map(|(p, d)| (p.to_string(), d.to_vec())),
                    )
                }),
            }),
        })))
    }

    /// The metadata and table of a parsed entry, with the time it took; `None` when they do
    /// not decode (the entry is then ignored).
    fn decode_parsed(
        &self,
        parsed: &Parsed<'_>,
        backing: &klpsym_core::Backing,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<Option<(Meta, SymbolTable, Duration)>, LoadError> {
        let t1 = Instant::now();
        let Ok(mut entry_meta) = serde_json::from_slice::<Meta>(parsed.meta) else {
            return Ok(None);
        };
        if let Some(e) = parsed.exports.filter(|_| opts.export_facts) {
            let Some(e) = decode_exports(backing, e) else {
                return Ok(None);
            };
            entry_meta.facts.exports = Some(e);
        }
        // Only a check asks for them (with the exports).
        if let Some((source, count, bytes)) = parsed.ftrace.filter(|_| opts.export_facts) {
            let sites = decode_sites(bytes, count, rs)
                .map_err(|c| LoadError::from(klpsym_core::BuildError::from(c)))?;
            let Some(sites) = sites else {
                return Ok(None);
            };
            entry_meta.facts.ftrace = Some(crate::loaded::FtraceSites {
                sites,
                source: source.to_string(),
            });
        }
        // Where the table lies in the map (a slice of it).
        let at = parsed.table.as_ptr() as usize - (**backing).as_ref().as_ptr() as usize;
        let table = match SymbolTable::decode_in_place(backing, at, rs) {
            Ok((t, used)) if used == parsed.table.len() => t,
            Ok(_) => return Ok(None),
            Err(klpsym_core::DecodeError::Cancelled(c)) => {
                return Err(klpsym_core::BuildError::from(c).into())
            }
            Err(_) => return Ok(None),
        };
        if let Some(names) = parsed.names {
            let at = names.as_ptr() as usize - (**backing).as_ref().as_ptr() as usize;
            // One that does not fit this table is not used: the index is built when needed.
            table.attach_name_index(backing, at..at + names.len());
        }
        Ok(Some((entry_meta, table, t1.elapsed())))
    }
}

struct Parsed<'a> {
    content: u128,
    meta: &'a [u8],
    exports: Option<&'a [u8]>,
    table: &'a [u8],
    /// The table's name index, when the entry holds one.
    names: Option<&'a [u8]>,
    /// The package's modules kept with it (member path, bytes as stored), when it was read
    /// with named modules.
    modules: Option<Vec<(&'a str, &'a [u8])>>,
    /// vmlinux's ftrace call sites (source, count, encoded), when the entry holds them.
    ftrace: Option<(&'a str, u64, &'a [u8])>,
}

/// The parts of an entry's body (its trailer already checked).
fn parse_body(body: &[u8]) -> Option<(Vec<u8>, Parsed<'_>)> {
    let mut b = body;
    if split(&mut b, 8)? != MAGIC || u32_at(&mut b)? != CACHE_FORMAT {
        return None;
    }
    // The version that wrote it: any version of this format reads it.
    let vlen = u32_at(&mut b)? as usize;
    split(&mut b, vlen)?;
    let klen = u32_at(&mut b)? as usize;
    let key = split(&mut b, klen)?.to_vec();
    let content = u128::from_le_bytes(split(&mut b, 16)?.try_into().ok()?);
    let mlen = usize::try_from(u64_at(&mut b)?).ok()?;
    let meta = split(&mut b, mlen)?;
    let exports = match split(&mut b, 1)?[0] {
        0 => None,
        1 => {
            let n = usize::try_from(u64_at(&mut b)?).ok()?;
            Some(split(&mut b, n)?)
        }
        _ => return None,
    };
    let pad = split(&mut b, 1)?[0] as usize;
    split(&mut b, pad)?;
    let tlen = usize::try_from(u64_at(&mut b)?).ok()?;
    let table = split(&mut b, tlen)?;
    let pad = split(&mut b, 1)?[0] as usize;
    split(&mut b, pad)?;
    let nlen = usize::try_from(u64_at(&mut b)?).ok()?;
    let names = Some(split(&mut b, nlen)?).filter(|n| !n.is_empty());
    let modules = match split(&mut b, 1)?[0] {
        0 => None,
        1 => {
            let n = u32_at(&mut b)? as usize;
            let mut m = Vec::new();
            for _ in 0..n {
                let plen = u32_at(&mut b)? as usize;
                let path = std::str::from_utf8(split(&mut b, plen)?).ok()?;
                let dlen = usize::try_from(u64_at(&mut b)?).ok()?;
                m.push((path, split(&mut b, dlen)?));
            }
            Some(m)
        }
        _ => return None,
    };
    let ftrace = match split(&mut b, 1)?[0] {
        0 => None,
        1 => {
            let slen = u32_at(&mut b)? as usize;
            let source = std::str::from_utf8(split(&mut b, slen)?).ok()?;
            let count = u64_at(&mut b)?;
            let n = usize::try_from(u64_at(&mut b)?).ok()?;
            Some((source, count, split(&mut b, n)?))
        }
        _ => return None,
    };
    b.is_empty().then_some((
        key,
        Parsed {
            content,
            meta,
            exports,
            table,
            names,
            modules,
            ftrace,
        },
    ))
}

/// `encode_sites` (`cache_put.rs`) undone: `count` addresses, or `None` when the bytes do not
/// hold exactly that many (the entry is then ignored).
pub(crate) fn decode_sites(
    bytes: &[u8],
    count: u64,
    rs: &mut Resched,
) -> Result<Option<Vec<u64>>, Cancelled> {
    let Ok(count) = usize::try_from(count) else {
        return Ok(None);
    };
    if count > bytes.len() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(count);
    let (mut prev, mut d, mut shift) = (0u64, 0u64, 0u32);
    for (i, &byte) in bytes.iter().enumerate() {
        if i % 2048 == 0 {
            rs.tick()?;
        }
        if shift > 63 {
            return Ok(None);
        }
        d |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 != 0 {
            shift += 7;
            continue;
        }
        prev = prev.wrapping_add(d);
        out.push(prev);
        (d, shift) = (0, 0);
    }
    Ok((shift == 0 && out.len() == count).then_some(out))
}

/// What `klpsym cache` shows of a kernel entry.
#[derive(Debug)]
pub(crate) struct Described {
    /// The input it was made from, as first named.
    pub(crate) source: String,
    pub(crate) source_bytes: u64,
    /// The input's identity, which its stamp records name.
    pub(crate) identity: u128,
    /// The build id of the kernel (a module debug file of that build belongs to it).
    pub(crate) build_id: Option<String>,
}

/// What a kernel entry of this format holds, when `bytes` are one (its trailer is not
/// checked: a damaged entry is found when it is used).
pub(crate) fn describe(bytes: &[u8]) -> Option<Described> {
    /// The fields shown; serde passes over the rest (the declaration lines among them).
    #[derive(serde::Deserialize)]
    struct Shown {
        source: String,
        source_bytes: u64,
        facts: ShownFacts,
    }
    #[derive(serde::Deserialize)]
    struct ShownFacts {
        build_id: Option<String>,
    }
    let body = &bytes[..bytes.len().checked_sub(16)?];
    let (_, p) = parse_body(body)?;
    let m: Shown = serde_json::from_slice(p.meta).ok()?;
    Some(Described {
        source: m.source,
        source_bytes: m.source_bytes,
        identity: p.content,
        build_id: m.facts.build_id,
    })
}

/// The exports encoded at `b`, a slice of `backing`, read in place; `None` when they do not
/// decode (the entry is then ignored).
pub(crate) fn decode_exports(
    backing: &klpsym_core::Backing,
    b: &[u8],
) -> Option<klpsym_sources::Exports> {
    let at = b.as_ptr() as usize - (**backing).as_ref().as_ptr() as usize;
    let mut rest = b;
    let source = take_str(&mut rest)?.to_string();
    let start = at + (b.len() - rest.len());
    let symbols = klpsym_sources::ExportMap::view(backing, start..at + b.len())?;
    Some(klpsym_sources::Exports { source, symbols })
}

/// Marks the entry at `entry` used now (its mtime) when it was last marked more than an hour
/// ago: pruning takes the least recently used first. Entries are never written in place;
/// their times are not part of what they hold.
pub(crate) fn touch(entry: &Path) {
    let Ok(f) = std::fs::File::open(entry) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let since = f
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| now.duration_since(t).ok());
    if since.is_some_and(|d| d > Duration::from_secs(3600)) {
        let _ = f.set_modified(now);
    }
}
