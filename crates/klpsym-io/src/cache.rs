//! The index cache: decoded tables of kernel images, vmlinux ELFs and packages, kept so a
//! repeat run reads a few megabytes instead of decompressing and decoding again.
//!
//! An entry is named by the input's identity as the file system tells it (device, inode,
//! size, mtime, ctime: the fast key) and records the input's identity ([`crate::input_identity`]),
//! checked on every use (a file rewritten in place within one mtime tick is still caught): the
//! xxh3-128 hash of its bytes, or for an ELF with a GNU build id (a vmlinux) that build id and
//! its length, read in a few kilobytes instead of hashing 66-500 MB.
//! The entry holds the table in fixed-width records ([`SymbolTable::encode`]), the facts as
//! JSON, and ends with the xxh3-128 of everything before it: a truncated, corrupt or
//! foreign-version entry is ignored and rebuilt, never trusted. Entries are written to a
//! temporary file and renamed, so concurrent runs never see half an entry; they are read
//! through a read-only memory map (entries are never written in place, only replaced).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::SymbolTable;
use xxhash_rust::xxh3::xxh3_128;

use crate::entry::{
    combine, file_build_id_identity, hash_in_steps, map_entry, put_build, put_stamp, put_str,
    split, take_str, u32_at, u64_at, verified_body, HASH_CHUNK,
};
use crate::error::LoadError;
use crate::loaded::{ElfBytes, LoadedKernel, PackageParts, SourceFacts, SourceKind};
use crate::options::LoadOptions;

const MAGIC: &[u8; 8] = b"KLPSYMC\0";
/// Bumped whenever the entry layout or what the decoders produce changes.
// 11: a -dbg vmlinux's data symbols name their files, assembler units' paths relative (#48).
const FORMAT: u32 = 11;
/// Entry file suffix.
pub const SUFFIX: &str = ".klpc";

/// Where entries live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// The cache folder.
    pub dir: PathBuf,
}

/// One entry as `klpsym cache` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntryInfo {
    /// The entry file.
    pub file: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The input it was made from (as first named).
    pub source: Option<String>,
    /// The input's size when cached.
    pub source_bytes: Option<u64>,
    /// Whether the entry is of this klpsym's format (others are ignored and rebuilt).
    pub current: bool,
    /// What it holds: `kernel` (a decoded table, with its debug sections when a `-dbg`
    /// package's), `module tree` (a folder's listing), `Module.symvers` (a Module.symvers'
    /// index), `module debug file` (kept for `file:line`, named by its build's id), `copies
    /// index` (where a vmlinux's DWARF defines each function, named by its build's id) or
    /// `debug sections` (left behind by a removed kernel entry).
    pub kind: &'static str,
    /// Seconds since the entry was last written.
    pub age_secs: u64,
}

/// What an entry records besides the table.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Meta {
    source: String,
    source_bytes: u64,
    kind: SourceKind,
    facts: SourceFacts,
    package: Option<PackageMeta>,
    /// The declaration lines of a package's debug vmlinux (the package is not read again
    /// for them).
    #[serde(default)]
    lines: Option<crate::LineIndex>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PackageMeta {
    packages: Vec<PathBuf>,
    release: Option<String>,
    config: Option<klpsym_sources::KernelConfig>,
    symvers: Option<klpsym_sources::Exports>,
}

/// The fast key: what the file system says about the input, and the options that change
/// what decoding produces.
fn fast_key(meta: &std::fs::Metadata, opts: &LoadOptions) -> Vec<u8> {
    let mut k = Vec::with_capacity(64);
    put_build(&mut k);
    put_stamp(&mut k, meta);
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
    k
}

impl Cache {
    /// `$XDG_CACHE_HOME/klpsym`, else `$HOME/.cache/klpsym`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("klpsym"))
    }

    /// True for inputs worth caching: regular files outside /proc and /sys.
    pub fn applies_to(path: &Path) -> bool {
        !(path.starts_with("/proc") || path.starts_with("/sys"))
            && std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }

    /// True when the folder is ours alone: owned by this process's user and writable by no
    /// one else. Entries carry no signature; a folder others can write (a shared /tmp
    /// directory) could hold forged ones, so such a folder is not used at all.
    pub(crate) fn private(&self) -> bool {
        let Ok(me) = std::fs::metadata("/proc/self") else {
            return false;
        };
        std::fs::metadata(&self.dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == me.uid() && m.mode() & 0o022 == 0)
    }

    pub(crate) fn entry_path(&self, key: &[u8]) -> PathBuf {
        self.dir.join(format!("{:032x}{SUFFIX}", xxh3_128(key)))
    }

    /// The cached kernel of `path`, when a valid entry matches its identity and content.
    /// `Ok(None)` for every kind of miss (none, stale, corrupt, other format).
    pub fn get(
        &self,
        path: &Path,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<Option<LoadedKernel>, LoadError> {
        let t0 = Instant::now();
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(None);
        };
        if !self.private() {
            return Ok(None);
        }
        let key = fast_key(&meta, opts);
        let entry = self.entry_path(&key);
        // The table reads its names and records in place, keeping the map alive.
        let Some(backing) = map_entry(&entry) else {
            return Ok(None);
        };
        let map: &[u8] = (*backing).as_ref();
        let Some((body, trailer)) = map
            .len()
            .checked_sub(16)
            .map(|n| map.split_at(n))
            .and_then(|(b, t)| Some((b, u128::from_le_bytes(t.try_into().ok()?))))
        else {
            return Ok(None);
        };
        // Another klpsym version may decode differently: rebuild rather than trust.
        let ours = |(k, p): &(Vec<u8>, Parsed<'_>)| {
            *k == key && p.version == env!("CARGO_PKG_VERSION").as_bytes()
        };
        let Some((_, parsed)) = parse_body(body).filter(ours) else {
            return Ok(None);
        };
        // The entry must be whole (its trailer) and the input what was cached (the fast key
        // alone trusts the file system). A helper thread starts hashing both while this one
        // decodes the entry (decoding checks every bound, so it is safe on any bytes), then
        // this one helps; a mismatch throws the decoded table away.
        // A package is read streaming and never refused for its size (its members are
        // bounded instead), so its entry is not either: only a file read whole has a limit.
        let limit = if crate::package::is_package(path) {
            u64::MAX
        } else {
            opts.max_input_size
        };
        let verifier = Verifier::new(path, limit, body)?;
        let mut helper = rs.sibling();
        let (worked, decoded) = std::thread::scope(|s| {
            // No helper when the system refuses a thread: this one does all the hashing.
            let helping = std::thread::Builder::new()
                .spawn_scoped(s, || verifier.work(&mut helper))
                .ok();
            let decoded = self.decode_parsed(&parsed, &backing, opts, rs);
            let mine = verifier.work(rs);
            let theirs = helping.map_or(Ok(()), |h| {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            });
            (mine.and(theirs), decoded)
        });
        worked?;
        if verifier.result() != Some((parsed.content, trailer)) {
            return Ok(None);
        }
        let Some((entry_meta, table, decode_time)) = decoded? else {
            return Ok(None);
        };
        let read_time = t0.elapsed().saturating_sub(decode_time);
        Ok(Some(LoadedKernel {
            cached: Some(entry),
            content: Some(parsed.content),
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
        }))
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

    /// Keeps `k` (decoded from `input`, whose identity, [`crate::input_identity`], is `content`) for next time. Kernels
    /// with parts an entry does not hold (a module's own description, package modules or a
    /// debug vmlinux) are not kept. Failing to write is not an error: the cache is an
    /// optimisation, and the reason is returned for a note.
    pub fn put(
        &self,
        path: &Path,
        input_meta: &std::fs::Metadata,
        content: u128,
        k: &LoadedKernel,
        opts: &LoadOptions,
        rs: &mut Resched,
    ) -> Result<(), String> {
        // A package's debug vmlinux is kept with its declaration lines (made now from the
        // bytes at hand), not its bytes.
        let elf = k.elf.as_ref().map(ElfBytes::bytes);
        let named = opts.package_modules && opts.package_module_names.is_some();
        if k.module.is_some()
            || k.debug.is_some()
            || k.package
                .as_ref()
                .is_some_and(|p| p.modules.is_some() && !named)
            || !matches!(k.kind, SourceKind::KernelImage | SourceKind::VmlinuxElf)
        {
            return Ok(());
        }
        let lines = match (&k.lines, elf) {
            (Some(l), _) => Some((**l).clone()),
            (None, Some(elf)) => {
                Some(crate::LineIndex::make(elf, &k.table, rs).map_err(|e| e.to_string())?)
            }
            (None, None) => None,
        };
        let key = fast_key(input_meta, opts);
        // The facts but their exports (tens of thousands of entries, kept as records below).
        let f = &k.facts;
        let facts = SourceFacts {
            version: f.version.clone(),
            arch: f.arch.clone(),
            format: f.format.clone(),
            facts: f.facts.clone(),
            notes: f.notes.clone(),
            vermagic: f.vermagic.clone(),
            exports: None,
            build_id: f.build_id.clone(),
            klp_structs: f.klp_structs.clone(),
            ftrace: None,
        };
        let exports = match &f.exports {
            Some(e) => match encode_exports(e, rs).map_err(|e| e.to_string())? {
                Some(x) => Some(x),
                None => return Ok(()),
            },
            None => None,
        };
        let meta = Meta {
            // Absolute: `klpsym cache` and `--prune` judge the input from any folder.
            source: std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string(),
            source_bytes: input_meta.size(),
            kind: k.kind,
            facts,
            package: k.package.as_ref().map(|p| PackageMeta {
                packages: p.packages.clone(),
                release: p.release.clone(),
                config: p.config.clone(),
                symvers: p.symvers.clone(),
            }),
            lines,
        };
        let meta = serde_json::to_vec(&meta).map_err(|e| e.to_string())?;
        let mut table = Vec::new();
        k.table.encode(&mut table, rs).map_err(|e| e.to_string())?;
        // The name index too (built now if the verb had not): a warm run reads it in place
        // instead of building it. Left out when it would make the entry outgrow its input.
        let mut names = Vec::new();
        k.table
            .encode_name_index(&mut names, rs)
            .map_err(|e| e.to_string())?;
        let exports_len = exports.as_ref().map_or(0, Vec::len);
        // vmlinux's ftrace call sites: deltas as LEB128 (about 2 bytes a site, where the
        // addresses would take 8: the entry must stay smaller than its input).
        let ftrace = match &f.ftrace {
            Some(t) => Some((t, encode_sites(&t.sites, rs).map_err(|e| e.to_string())?)),
            None => None,
        };
        let ftrace_len = ftrace.as_ref().map_or(0, |(t, e)| t.source.len() + e.len());
        // 256 bytes: more than the header, pads and trailer take.
        if (meta.len() + exports_len + table.len() + names.len() + ftrace_len + 256) as u64
            > input_meta.size()
        {
            names = Vec::new();
        }
        let mut out = Vec::with_capacity(table.len() + meta.len() + 128);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        let version = env!("CARGO_PKG_VERSION").as_bytes();
        out.extend_from_slice(&(version.len() as u32).to_le_bytes());
        out.extend_from_slice(version);
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(&key);
        out.extend_from_slice(&content.to_le_bytes());
        out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
        out.extend_from_slice(&meta);
        // Exports apart from the JSON: tens of thousands of entries read back in a loop.
        match &exports {
            Some(e) => {
                out.push(1);
                out.extend_from_slice(&(e.len() as u64).to_le_bytes());
                out.extend_from_slice(e);
            }
            None => out.push(0),
        }
        // The table starts 8-aligned in the entry (a pad count, then zeros): a mapped entry is
        // page-aligned, so the table's records are read where they lie, not parsed.
        let pad = (8 - (out.len() + 1 + 8) % 8) % 8;
        out.push(pad as u8);
        out.resize(out.len() + pad, 0);
        out.extend_from_slice(&(table.len() as u64).to_le_bytes());
        klpsym_core::bulk::extend_from_slice(&mut out, &table, rs).map_err(|e| e.to_string())?;
        // The name index starts 8-aligned too, after its own pad count and length.
        let pad = (8 - (out.len() + 1 + 8) % 8) % 8;
        out.push(pad as u8);
        out.resize(out.len() + pad, 0);
        out.extend_from_slice(&(names.len() as u64).to_le_bytes());
        klpsym_core::bulk::extend_from_slice(&mut out, &names, rs).map_err(|e| e.to_string())?;
        // The named modules a check read from the package, as stored in it.
        match k.package.as_ref().and_then(|p| p.modules.as_ref()) {
            Some(tree) => {
                let members = tree.members();
                out.push(1);
                out.extend_from_slice(&(members.len() as u32).to_le_bytes());
                for (path, data) in members {
                    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
                    out.extend_from_slice(path.as_bytes());
                    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
                    klpsym_core::bulk::extend_from_slice(&mut out, data, rs)
                        .map_err(|e| e.to_string())?;
                }
            }
            None => out.push(0),
        }
        match &ftrace {
            Some((t, sites)) => {
                out.push(1);
                let src = t.source.as_bytes();
                out.extend_from_slice(&(src.len() as u32).to_le_bytes());
                out.extend_from_slice(src);
                out.extend_from_slice(&(t.sites.len() as u64).to_le_bytes());
                out.extend_from_slice(&(sites.len() as u64).to_le_bytes());
                klpsym_core::bulk::extend_from_slice(&mut out, sites, rs)
                    .map_err(|e| e.to_string())?;
            }
            None => out.push(0),
        }
        let trailer = hash_in_steps(&out, rs).map_err(|e| e.to_string())?;
        out.extend_from_slice(&trailer.to_le_bytes());
        if out.len() as u64 > input_meta.size() {
            // An entry larger than its input saves nothing (a tiny System.map, say).
            return Ok(());
        }
        self.write_entry(&key, &out, rs)?;
        // A debug package's vmlinux: its DWARF beside the entry, for file:line without
        // reading the package again (a vmlinux file is mapped again instead).
        if let (Some(elf), true) = (elf, k.package.is_some()) {
            crate::debug_lines::write_sidecar(&self.entry_path(&key), content, elf, rs)
                .map_err(|e| format!("debug sections: {e}"))?;
        }
        Ok(())
    }

    /// Writes the entry of `key` (made whole, then renamed into place), creating the folder
    /// when it is missing; refuses a folder that is not private.
    pub(crate) fn write_entry(
        &self,
        key: &[u8],
        out: &[u8],
        rs: &mut Resched,
    ) -> Result<(), String> {
        if !self.dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
                .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        }
        if !self.private() {
            return Err(format!(
                "{}: not used as a cache: it must be owned by this user and writable by no one else",
                self.dir.display()
            ));
        }
        let entry = self.entry_path(key);
        crate::output::write_atomically(&entry, |w| {
            for chunk in out.chunks(64 << 10) {
                rs.tick_step().map_err(std::io::Error::other)?;
                w.write_all(chunk)?;
            }
            Ok(())
        })
        .map_err(|e| format!("{}: {e}", entry.display()))
    }
}

struct Parsed<'a> {
    version: &'a [u8],
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

/// The parts of an entry of this format whose trailer checks out, whatever its key.
fn parse_entry_with<'a>(
    all: &'a [u8],
    rs: &mut Resched,
) -> Result<Option<(Vec<u8>, Parsed<'a>)>, Cancelled> {
    Ok(verified_body(all, rs)?.and_then(parse_body))
}

/// The parts of an entry's body (its trailer already checked).
fn parse_body(body: &[u8]) -> Option<(Vec<u8>, Parsed<'_>)> {
    let mut b = body;
    if split(&mut b, 8)? != MAGIC || u32_at(&mut b)? != FORMAT {
        return None;
    }
    let vlen = u32_at(&mut b)? as usize;
    let version = split(&mut b, vlen)?;
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
            version,
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

/// Sorted addresses as the LEB128 of their differences (the first from 0).
fn encode_sites(sites: &[u64], rs: &mut Resched) -> Result<Vec<u8>, Cancelled> {
    let mut out = Vec::with_capacity(sites.len() * 2 + 16);
    let mut prev = 0u64;
    for (i, &s) in sites.iter().enumerate() {
        if i % 1024 == 0 {
            rs.tick()?;
        }
        let mut d = s.wrapping_sub(prev);
        prev = s;
        loop {
            let byte = (d & 0x7f) as u8;
            d >>= 7;
            if d == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    Ok(out)
}

/// [`encode_sites`] undone: `count` addresses, or `None` when the bytes do not hold exactly
/// that many (the entry is then ignored).
fn decode_sites(bytes: &[u8], count: u64, rs: &mut Resched) -> Result<Option<Vec<u64>>, Cancelled> {
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

/// The input a kernel entry of this klpsym was made from and its size, when `bytes` are one
/// (for `klpsym cache`).
pub(crate) fn describe(bytes: &[u8], rs: &mut Resched) -> Result<Option<(String, u64)>, Cancelled> {
    Ok(parse_entry_any(bytes, rs)?
        .and_then(|m| serde_json::from_slice::<Meta>(m).ok())
        .map(|m| (m.source, m.source_bytes)))
}

/// An entry's metadata, when it is one of this klpsym's.
fn parse_entry_any<'a>(all: &'a [u8], rs: &mut Resched) -> Result<Option<&'a [u8]>, Cancelled> {
    Ok(parse_entry_with(all, rs)?
        .filter(|(_, p)| p.version == env!("CARGO_PKG_VERSION").as_bytes())
        .map(|(_, p)| p.meta))
}

/// Exports: the source, then the map's own encoding ([`klpsym_sources::ExportMap::encode`]),
/// read back in place. `None` when the map does not fit the encoding (the entry is then not
/// written: a warm run must not lose the exports).
fn encode_exports(
    e: &klpsym_sources::Exports,
    rs: &mut Resched,
) -> Result<Option<Vec<u8>>, Cancelled> {
    rs.tick_step()?;
    let mut out = Vec::new();
    put_str(&mut out, &e.source);
    Ok(e.symbols.encode(&mut out, rs)?.then_some(out))
}

/// The exports encoded at `b`, a slice of `backing`, read in place; `None` when they do not
/// decode (the entry is then ignored).
fn decode_exports(backing: &klpsym_core::Backing, b: &[u8]) -> Option<klpsym_sources::Exports> {
    let at = b.as_ptr() as usize - (**backing).as_ref().as_ptr() as usize;
    let mut rest = b;
    let source = take_str(&mut rest)?.to_string();
    let start = at + (b.len() - rest.len());
    let symbols = klpsym_sources::ExportMap::view(backing, start..at + b.len())?;
    Some(klpsym_sources::Exports { source, symbols })
}

/// The content hash of a file and of a cache entry's body, shared out between threads in
/// chunks: a helper starts at once, and the thread that has decoded the entry joins in.
/// The identity the cache records for the file at `path` ([`crate::input_identity`] of its
/// bytes), read from the file in chunks (two threads when the system gives one), never held
/// whole: for a package streamed while it is hashed.
pub(crate) fn file_identity(path: &Path, rs: &mut Resched) -> Result<u128, LoadError> {
    let v = Verifier::new(path, u64::MAX, &[])?;
    let mut helper = rs.sibling();
    let worked = std::thread::scope(|s| {
        let helping = std::thread::Builder::new()
            .spawn_scoped(s, || v.work(&mut helper))
            .ok();
        let mine = v.work(rs);
        let theirs = helping.map_or(Ok(()), |h| {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        });
        mine.and(theirs)
    });
    worked?;
    v.result()
        .map(|(file, _)| file)
        .ok_or_else(|| LoadError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("the file changed while it was read"),
        })
}

struct Verifier<'a> {
    path: &'a Path,
    file: File,
    len: u64,
    body: &'a [u8],
    /// The next job: 0 the entry's body, then the file's chunks.
    next: std::sync::atomic::AtomicUsize,
    /// How many jobs there are.
    jobs: usize,
    /// The file's identity when its build id gives it (no file job then).
    identity: Option<u128>,
    done: std::sync::Mutex<Vec<Option<u128>>>,
}

impl<'a> Verifier<'a> {
    fn new(path: &'a Path, limit: u64, body: &'a [u8]) -> Result<Self, LoadError> {
        let io_err = |source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        if len > limit {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                size: len,
                limit,
            });
        }
        let identity = file_build_id_identity(&file, len);
        let jobs = match identity {
            Some(_) => 1,
            None => 1 + len.div_ceil(HASH_CHUNK) as usize,
        };
        Ok(Verifier {
            path,
            file,
            len,
            body,
            next: std::sync::atomic::AtomicUsize::new(0),
            jobs,
            identity,
            done: std::sync::Mutex::new(vec![None; jobs]),
        })
    }

    /// Takes jobs until none is left.
    fn work(&self, rs: &mut Resched) -> Result<(), LoadError> {
        use std::os::unix::fs::FileExt;
        let io_err = |source| LoadError::Io {
            path: self.path.to_path_buf(),
            source,
        };
        let cancelled = |c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c));
        let mut buf = Vec::new();
        loop {
            let job = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let h = match job {
                0 => hash_in_steps(self.body, rs).map_err(cancelled)?,
                j if j < self.jobs => {
                    buf.resize(64 << 10, 0);
                    let start = (j as u64 - 1) * HASH_CHUNK;
                    let end = (start + HASH_CHUNK).min(self.len);
                    let mut h = xxhash_rust::xxh3::Xxh3::new();
                    let mut at = start;
                    while at < end {
                        rs.tick_step().map_err(cancelled)?;
                        let want = ((end - at) as usize).min(buf.len());
                        let n = match self.file.read_at(&mut buf[..want], at) {
                            // Shorter than it was: the hash will not match.
                            Ok(0) => break,
                            Ok(n) => n,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(io_err(e)),
                        };
                        h.update(&buf[..n]);
                        at += n as u64;
                    }
                    h.digest128()
                }
                _ => return Ok(()),
            };
            self.done.lock().unwrap_or_else(|p| p.into_inner())[job] = Some(h);
        }
    }

    /// The file's identity ([`crate::input_identity`]) and the body's hash, once every job is done; `None` when the
    /// file is no longer the length it was (bytes appended while it was hashed).
    fn result(self) -> Option<(u128, u128)> {
        if self.file.metadata().ok()?.len() != self.len {
            return None;
        }
        let done = self.done.into_inner().unwrap_or_else(|p| p.into_inner());
        let all: Option<Vec<u128>> = done.into_iter().collect();
        let all = all?;
        let file = self
            .identity
            .unwrap_or_else(|| combine(self.len, &all[1..]));
        Some((file, all[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_sites_survive_their_encoding() {
        let rs = &mut Resched::none();
        let sites = [
            0xffff_ffff_8100_0000u64,
            0xffff_ffff_8100_0005,
            0xffff_ffff_8100_0085,
            0xffff_ffff_8300_0000,
        ];
        let e = encode_sites(&sites, rs).unwrap();
        assert!(e.len() < 8 * sites.len());
        assert_eq!(
            decode_sites(&e, 4, rs).unwrap().as_deref(),
            Some(&sites[..])
        );
        // Another count, a cut encoding, an over-long varint: refused, never misread.
        assert_eq!(decode_sites(&e, 3, rs).unwrap(), None);
        assert_eq!(decode_sites(&e[..e.len() - 1], 4, rs).unwrap(), None);
        assert_eq!(decode_sites(&[0xff; 11], 1, rs).unwrap(), None);
        assert_eq!(decode_sites(&[], 0, rs).unwrap(), Some(vec![]));
    }
}
