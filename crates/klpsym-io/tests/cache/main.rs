//! The index cache on the lab's real kernel files: a hit gives the same table and facts as a
//! decode; a changed input is re-read; a corrupt, truncated or foreign-version entry is ignored
//! and rebuilt; an entry whose recorded content hash (or, for a vmlinux, build id) does not
//! match the input is not trusted;
//! concurrent runs leave a valid entry; entries are smaller than their inputs. On synthetic
//! packages (no lab needed): one entry per input whatever its path, a package rewritten in
//! place with its size and mtime read again, a package holding no kernel kept as its
//! parts, the folder kept under its bound, live and stale entries told apart and pruned.
//!
//! The lab files' tests are in lab_files.rs, the synthetic packages' in synthetic.rs.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_VMLINUZ, KLPSYM_TEST_VMLINUX_STRIPPED,
//! KLPSYM_TEST_IMAGE_DEB, KLPSYM_TEST_DBG_DEB.

mod lab_files;
mod synthetic;

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_io::{content_hash, Cache, LoadOptions, LoadedKernel};

pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("klpsym-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn opts(dir: &Path) -> LoadOptions {
    LoadOptions {
        cache: Some(Cache::new(dir.join("cache"))),
        ..LoadOptions::default()
    }
}

pub fn view(k: &LoadedKernel) -> (String, Option<String>, Option<String>, usize) {
    let mut out = Vec::new();
    klpsym_core::write_kallsyms(&k.table, &mut out, &mut Resched::none()).unwrap();
    (
        format!("{:x}", content_hash(&out, &mut Resched::none()).unwrap()),
        k.facts.version.clone(),
        k.facts.build_id.clone(),
        k.facts.exports.as_ref().map_or(0, |e| e.symbols.len()),
    )
}

pub fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("cache"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.to_string_lossy().ends_with(".klpc"));
    v
}
