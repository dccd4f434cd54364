//! What a package holding no kernel adds to one (a headers package's config and
//! Module.symvers, a 7.x `linux-base` package's config, a `linux-modules` package's named
//! modules), kept between runs: without it a warm run over a folder of packages would still
//! decompress every such package to the end of its archive (a 7.x modules package is a
//! hundred megabytes of XZ) to find what it adds.
//!
//! An entry is named like a kernel entry (`cache.rs`): the cache's format, the package's
//! identity and the options that choose what a package read keeps (`package_modules` and
//! the module names). It holds the release, the config as JSON, the Module.symvers as its
//! export map (read in place), the named modules as stored, and the words a kernel's notes
//! name the package with; it ends with the xxh3-128 of everything before it, and is ignored
//! and rebuilt when it is truncated, corrupt or of another format.

use std::path::Path;

use klpsym_core::resched::Resched;

use crate::cache_dir::Cache;
use crate::entry::{
    hash_in_steps, map_entry, put_str, split, take_str, u32_at, u64_at, CACHE_FORMAT,
};
use crate::options::LoadOptions;

/// The first bytes of a parts entry.
const MAGIC: &[u8; 8] = b"KLPSYMP\0";

/// What one package adds to a kernel, read from its members or from its entry.
#[derive(Debug, Default)]
pub(crate) struct Adds {
    pub(crate) release: Option<String>,
    pub(crate) config: Option<klpsym_sources::KernelConfig>,
    pub(crate) symvers: Option<klpsym_sources::Exports>,
    /// Modules (member path, bytes as stored), when the options read them.
    pub(crate) modules: Vec<(String, Vec<u8>)>,
    /// `package NAME VERSION (ARCH): PATH`, as a kernel's notes name it.
    pub(crate) described: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    source: String,
    source_bytes: u64,
    release: Option<String>,
    config: Option<klpsym_sources::KernelConfig>,
    described: String,
}

fn key(identity: u128, opts: &LoadOptions) -> Vec<u8> {
    let mut k = b"package parts\0".to_vec();
    k.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    k.extend_from_slice(&identity.to_le_bytes());
    crate::cache::put_options(&mut k, opts);
    k
}

/// What the package with identity `identity` adds, when its entry is whole and of this
/// format and key.
pub(crate) fn get(
    cache: &Cache,
    identity: u128,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<Option<Adds>, klpsym_core::Cancelled> {
    let key = key(identity, opts);
    let entry = cache.entry_path(&key);
    let Some(backing) = map_entry(&entry) else {
        return Ok(None);
    };
    let all: &[u8] = (*backing).as_ref();
    let Some(body_len) = all.len().checked_sub(16) else {
        return Ok(None);
    };
    let (body, trailer) = all.split_at(body_len);
    if trailer != hash_in_steps(body, rs)?.to_le_bytes() {
        return Ok(None);
    }
    let adds = parse(body, &key, &backing, rs)?;
    if adds.is_some() {
        crate::cache::touch(&entry);
    }
    Ok(adds)
}

fn parse(
    body: &[u8],
    key: &[u8],
    backing: &klpsym_core::Backing,
    rs: &mut Resched,
) -> Result<Option<Adds>, klpsym_core::Cancelled> {
    let Some(p) = parse_body(body).filter(|p| p.key == key) else {
        return Ok(None);
    };
    let Ok(meta) = serde_json::from_slice::<Meta>(p.meta) else {
        return Ok(None);
    };
    let symvers = match p.symvers {
        Some(s) => match crate::cache::decode_exports(backing, s) {
            Some(e) => Some(e),
            None => return Ok(None),
        },
        None => None,
    };
    let mut modules = Vec::with_capacity(p.modules.len());
    for (path, data) in p.modules {
        rs.tick_step()?;
        let mut bytes = Vec::new();
        klpsym_core::bulk::extend_from_slice(&mut bytes, data, rs)?;
        modules.push((path.to_string(), bytes));
    }
    Ok(Some(Adds {
        release: meta.release,
        config: meta.config,
        symvers,
        modules,
        described: meta.described,
    }))
}

struct Parsed<'a> {
    key: &'a [u8],
    identity: u128,
    meta: &'a [u8],
    symvers: Option<&'a [u8]>,
    modules: Vec<(&'a str, &'a [u8])>,
}

fn parse_body(body: &[u8]) -> Option<Parsed<'_>> {
    let mut b = body;
    if split(&mut b, 8)? != MAGIC || u32_at(&mut b)? != CACHE_FORMAT {
        return None;
    }
    take_str(&mut b)?;
    let klen = u32_at(&mut b)? as usize;
    let key = split(&mut b, klen)?;
    let identity = u128::from_le_bytes(split(&mut b, 16)?.try_into().ok()?);
    let mlen = usize::try_from(u64_at(&mut b)?).ok()?;
    let meta = split(&mut b, mlen)?;
    let symvers = match split(&mut b, 1)?[0] {
        0 => None,
        1 => {
            let n = usize::try_from(u64_at(&mut b)?).ok()?;
            Some(split(&mut b, n)?)
        }
        _ => return None,
    };
    let n = u32_at(&mut b)? as usize;
    let mut modules = Vec::with_capacity(n.min(b.len() / 12));
    for _ in 0..n {
        let path = take_str(&mut b)?;
        let dlen = usize::try_from(u64_at(&mut b)?).ok()?;
        modules.push((path, split(&mut b, dlen)?));
    }
    b.is_empty().then_some(Parsed {
        key,
        identity,
        meta,
        symvers,
        modules,
    })
}

/// Keeps what the package at `path` (with identity `identity`) adds. Failing to write is
/// not an error: the cache is an optimisation.
pub(crate) fn put(
    cache: &Cache,
    path: &Path,
    input_meta: &std::fs::Metadata,
    identity: u128,
    adds: &Adds,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<(), String> {
    // A package read with all its modules is not kept (as its kernel is not).
    if opts.package_modules && opts.package_module_names.is_none() {
        return Ok(());
    }
    let key = key(identity, opts);
    let meta = Meta {
        source: std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string(),
        source_bytes: input_meta.len(),
        release: adds.release.clone(),
        config: adds.config.clone(),
        described: adds.described.clone(),
    };
    let meta = serde_json::to_vec(&meta).map_err(|e| e.to_string())?;
    let symvers = match &adds.symvers {
        Some(e) => match crate::cache_put::encode_exports(e, rs).map_err(|e| e.to_string())? {
            Some(x) => Some(x),
            None => return Ok(()),
        },
        None => None,
    };
    let mut out = Vec::with_capacity(meta.len() + symvers.as_ref().map_or(0, Vec::len) + 256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    put_str(&mut out, env!("CARGO_PKG_VERSION"));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(&identity.to_le_bytes());
    out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    out.extend_from_slice(&meta);
    match &symvers {
        Some(s) => {
            out.push(1);
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            klpsym_core::bulk::extend_from_slice(&mut out, s, rs).map_err(|e| e.to_string())?;
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(adds.modules.len() as u32).to_le_bytes());
    for (p, data) in &adds.modules {
        put_str(&mut out, p);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        klpsym_core::bulk::extend_from_slice(&mut out, data, rs).map_err(|e| e.to_string())?;
    }
    let trailer = hash_in_steps(&out, rs).map_err(|e| e.to_string())?;
    out.extend_from_slice(&trailer.to_le_bytes());
    cache.write_entry(&key, &out, rs)?;
    cache.keep_bounded(&cache.entry_path(&key), rs);
    Ok(())
}

/// What `klpsym cache` shows of a parts entry: its package, the package's size, and its
/// identity (which its stamp records name); the trailer is not checked.
pub(crate) fn describe(bytes: &[u8]) -> Option<(String, u64, u128)> {
    #[derive(serde::Deserialize)]
    struct Shown {
        source: String,
        source_bytes: u64,
    }
    let p = parse_body(&bytes[..bytes.len().checked_sub(16)?])?;
    let m: Shown = serde_json::from_slice(p.meta).ok()?;
    Some((m.source, m.source_bytes, p.identity))
}

/// True when `bytes` start like a parts entry (of any format).
pub(crate) fn is_entry(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}
