//! One cache for every front end: an entry one program wrote is read by every other program
//! of the same cache format. Here the two programs are this test binary (a library program:
//! `klpsym::open`) and the `klpsym` command; before the cache format 11 each executable's
//! own size and mtime were part of every key, and each wrote its own entries.

use std::path::{Path, PathBuf};
use std::process::Command;

use klpsym::{CacheDir, Options};

fn klpsym(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_klpsym"))
        .args(args)
        .output()
        .expect("run klpsym")
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A synthetic image package of `variant`.
fn package(dir: &Path, variant: u8) -> PathBuf {
    let doc = vec![b'x'; 1 << 20];
    let p = dir.join(format!("linux-image-{variant}_1.0_amd64.deb"));
    let bytes = klpsym_testkit::packages::image_deb(
        600,
        variant,
        256 << 10,
        &[("./usr/share/doc/x", &doc)],
    );
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The kernel entries `klpsym cache` lists, each with its inputs.
fn kernel_entries(cache: &Path) -> Vec<serde_json::Value> {
    let listed = json(&klpsym(&["cache", "--cache-dir", s(cache), "--json"]));
    listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "kernel")
        .cloned()
        .collect()
}

#[test]
fn the_command_and_a_library_program_share_one_entry_per_input() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let opts = Options::new().cache(CacheDir::At(cache.clone()));
    let info = |p: &Path| {
        json(&klpsym(&[
            "info",
            "--kernel",
            s(p),
            "--cache-dir",
            s(&cache),
            "--json",
        ]))
    };

    // Written by this program, read by the command.
    let first = package(dir.path(), 1);
    let k = klpsym::open(&first, &opts).unwrap();
    assert!(k.info().cache_entry.is_none(), "cold");
    let by_command = info(&first);
    assert!(
        by_command["cache_entry"].is_string(),
        "the command did not read the library's entry: {by_command}"
    );
    assert_eq!(by_command["symbols"], k.table().len() as u64);

    // Written by the command, read by this program.
    let second = package(dir.path(), 2);
    assert!(info(&second)["cache_entry"].is_null(), "cold");
    let k = klpsym::open(&second, &opts).unwrap();
    assert!(
        k.info().cache_entry.is_some(),
        "the library did not read the command's entry"
    );

    // Each read again by both: exactly one entry per input, each live with its input.
    for p in [&first, &second] {
        assert!(info(p)["cache_entry"].is_string());
        assert!(klpsym::open(p, &opts).unwrap().info().cache_entry.is_some());
    }
    let entries = kernel_entries(&cache);
    assert_eq!(entries.len(), 2, "{entries:#?}");
    for e in &entries {
        assert_eq!(e["live"], true, "{e}");
        assert_eq!(e["current"], true, "{e}");
    }
    let mut sources: Vec<String> = entries
        .iter()
        .map(|e| e["source"].as_str().unwrap().to_string())
        .collect();
    sources.sort();
    assert_eq!(sources, [s(&first), s(&second)]);
}
