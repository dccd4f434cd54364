//! Writing a kernel's cache entry (`cache.rs` reads it): the table in fixed-width records,
//! its name index, the facts as JSON, the exports and ftrace call sites in their own
//! encodings, a check's named modules, and for a `-dbg` vmlinux its declaration lines and
//! debug sections; then the folder kept under its bound.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use klpsym_core::resched::{Cancelled, Resched};

use crate::cache::{entry_key, Meta, PackageMeta, MAGIC};
use crate::cache_dir::Cache;
use crate::entry::{hash_in_steps, put_str, CACHE_FORMAT};
use crate::loaded::{ElfBytes, LoadedKernel, SourceFacts, SourceKind};
use crate::options::LoadOptions;

impl Cache {
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
        // The input's size noted, so that a run proving its identity looks for this entry.
        crate::stamp::note(self, path, input_meta);
        let key = entry_key(content, opts);
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
        out.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
        // The version that wrote it, for the reader of `klpsym cache`: any version of this
        // format reads it.
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
        let entry = self.entry_path(&key);
        // A debug package's vmlinux: its DWARF beside the entry, for file:line without
        // reading the package again (a vmlinux file is mapped again instead).
        if let (Some(elf), true) = (elf, k.package.is_some()) {
            crate::debug_sidecar::write_sidecar(&entry, content, elf, rs)
                .map_err(|e| format!("debug sections: {e}"))?;
        }
        self.keep_bounded(&entry, rs);
        Ok(())
    }

    /// Removes the kernel entry of an input with identity `identity` read with `opts` (and
    /// its debug sections): made from bytes that changed while they were read.
    pub(crate) fn forget(&self, identity: u128, opts: &LoadOptions) {
        let entry = self.entry_path(&entry_key(identity, opts));
        let _ = std::fs::remove_file(crate::debug_sidecar::sidecar_of(&entry));
        let _ = std::fs::remove_file(entry);
    }

    /// Writes the entry of `key` (made whole, then renamed into place), creating the folder
    /// when it is missing; refuses a folder that is not private.
    pub(crate) fn write_entry(
        &self,
        key: &[u8],
        out: &[u8],
        rs: &mut Resched,
    ) -> Result<(), String> {
        self.ready()?;
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

/// Sorted addresses as the LEB128 of their differences (the first from 0).
pub(crate) fn encode_sites(sites: &[u64], rs: &mut Resched) -> Result<Vec<u8>, Cancelled> {
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

/// Exports: the source, then the map's own encoding ([`klpsym_sources::ExportMap::encode`]),
/// read back in place. `None` when the map does not fit the encoding (the entry is then not
/// written: a warm run must not lose the exports).
pub(crate) fn encode_exports(
    e: &klpsym_sources::Exports,
    rs: &mut Resched,
) -> Result<Option<Vec<u8>>, Cancelled> {
    rs.tick_step()?;
    let mut out = Vec::new();
    put_str(&mut out, &e.source);
    Ok(e.symbols.encode(&mut out, rs)?.then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::decode_sites;

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
