//! The cache on synthetic packages: no lab needed.

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_io::{load, Cache, LoadOptions, LoadedKernel};

use crate::{entries, opts, tempdir};

/// An image package of 600 symbols (`variant` names one of them), 256 KiB with a 1 MiB
/// document beside it (so its entry is smaller than it).
fn image_package(variant: u8) -> Vec<u8> {
    let doc = vec![b'x'; 1 << 20];
    klpsym_testkit::packages::image_deb(600, variant, 256 << 10, &[("./usr/share/doc/x", &doc)])
}

/// The names of `k`'s symbols, in order.
fn names(k: &LoadedKernel) -> Vec<String> {
    k.table.iter().map(|s| s.name.to_string()).collect()
}

fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("cache"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.to_string_lossy().ends_with(suffix));
    v.sort();
    v
}

/// One input, one entry: the same package under two names and read twice each is one
/// kernel entry (named by the package's identity, not its path or its stamp), with one
/// stamp record per copy; `klpsym cache` lists it once, live, with both copies as inputs.
#[test]
fn one_entry_per_input_whatever_its_path() {
    let dir = tempdir("one-entry");
    let (a, b) = (dir.join("a.deb"), dir.join("b.deb"));
    std::fs::write(&a, image_package(1)).unwrap();
    std::fs::copy(&a, &b).unwrap();
    let o = opts(&dir);
    let rs = &mut Resched::none();
    let cold = load(&a, &o, rs).unwrap();
    assert!(cold.cached.is_none());
    assert!(
        cold.table.len() >= 600 && names(&cold).contains(&"fn_variant_001".to_string()),
        "the synthetic image decodes: {} symbols",
        cold.table.len()
    );
    for p in [&a, &b, &a, &b] {
        let k = load(p, &o, rs).unwrap();
        assert!(
            k.cached.is_some(),
            "{}: not read from the entry",
            p.display()
        );
        assert_eq!(names(&k), names(&cold));
    }
    assert_eq!(entries(&dir).len(), 1, "{:?}", entries(&dir));
    assert_eq!(
        files_ending(&dir, ".klps").len(),
        2,
        "one stamp record per copy"
    );
    let listed = o.cache.as_ref().unwrap().list(rs).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].live && listed[0].current && listed[0].kind == "kernel");
    assert_eq!(listed[0].inputs.len(), 2, "{listed:?}");
    // Through a symbolic link that is then removed: the record names the file itself, so the
    // entry stays live (a folder of links to packages, as the lab's tests make, is gone after
    // the run; the packages are not).
    let link = dir.join("link.deb");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    assert!(load(&link, &o, rs).unwrap().cached.is_some());
    std::fs::remove_file(&link).unwrap();
    let listed = o.cache.as_ref().unwrap().list(rs).unwrap();
    assert!(listed[0].live, "{listed:?}");
    assert!(
        listed[0].inputs.iter().all(|i| !i.ends_with("link.deb")),
        "{listed:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sets the file's mtime to `t`.
fn set_mtime(p: &Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// A warm run trusts a package's stamp (no byte of it read), and a package rewritten in
/// place keeping its size and mtime (as `cp` over it and `touch -r` would leave it) gets its
/// own answer: its ctime moved, so its identity is proven again and another entry found. A
/// package changed just before it was proven (its ctime within the settling time) is
/// hashed again by the next run, whatever its stamp says.
#[test]
fn a_package_rewritten_in_place_keeping_size_and_mtime_is_read_again() {
    let dir = tempdir("rewritten");
    let p = dir.join("linux-image.deb");
    let (one, two) = (image_package(1), image_package(2));
    assert_eq!(one.len(), two.len(), "the same size");
    assert_ne!(one, two);
    std::fs::write(&p, &one).unwrap();
    let mtime =
        std::fs::metadata(&p).unwrap().modified().unwrap() - std::time::Duration::from_secs(3600);
    set_mtime(&p, mtime);
    // Settled: its last change (ctime) older than the settling time before it is proven.
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let o = opts(&dir);
    let rs = &mut Resched::none();
    let first = load(&p, &o, rs).unwrap();
    assert!(names(&first).contains(&"fn_variant_001".to_string()));
    let warm = load(&p, &o, rs).unwrap();
    assert!(warm.cached.is_some());
    let before = std::fs::metadata(&p).unwrap();
    // Rewritten in place: same inode, size and mtime.
    std::fs::write(&p, &two).unwrap();
    set_mtime(&p, mtime);
    let after = std::fs::metadata(&p).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.ino(), before.size(), before.modified().unwrap()),
        (after.ino(), after.size(), after.modified().unwrap())
    );
    let k = load(&p, &o, rs).unwrap();
    assert!(k.cached.is_none(), "the old entry answered for new bytes");
    assert!(names(&k).contains(&"fn_variant_002".to_string()));
    assert!(!names(&k).contains(&"fn_variant_001".to_string()));
    // Changed a moment ago: the record made now is not trusted, so a rewrite within the
    // same timestamp tick (which would keep the ctime too) is still caught: the next run
    // proves the package again, and finds the entry of what it holds.
    std::fs::write(&p, &one).unwrap();
    set_mtime(&p, mtime);
    for _ in 0..2 {
        let k = load(&p, &o, rs).unwrap();
        assert!(names(&k).contains(&"fn_variant_001".to_string()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A package holding no kernel (here a config, as 7.x's `linux-base` holds it, and a
/// headers package's Module.symvers) is kept as what it adds: a warm check over it and its
/// image (the options a check reads packages with) reads neither package.
#[test]
fn a_package_holding_no_kernel_is_kept_as_its_parts() {
    let dir = tempdir("parts");
    let image = dir.join("linux-image-1.0.0-1-amd64_1.0_amd64.deb");
    std::fs::write(&image, image_package(3)).unwrap();
    let mut symvers = String::new();
    for i in 0..3000 {
        symvers += &format!("0x{:08x}\tsym_{i}\tvmlinux\tEXPORT_SYMBOL\n", i * 7919);
    }
    let config = b"CONFIG_MODULES=y\nCONFIG_LIVEPATCH=y\n";
    let headers = dir.join("linux-headers-1.0.0-1-amd64_1.0_amd64.deb");
    std::fs::write(
        &headers,
        klpsym_testkit::packages::deb(
            klpsym_testkit::packages::Comp::Xz,
            &[
                ("./boot/config-1.0.0-1-amd64", config),
                (
                    "./usr/src/linux-headers-1.0.0-1-amd64/Module.symvers",
                    symvers.as_bytes(),
                ),
            ],
        ),
    )
    .unwrap();
    let o = LoadOptions {
        package_modules: true,
        package_module_names: Some(vec!["dummy".to_string()]),
        ..opts(&dir)
    };
    let rs = &mut Resched::none();
    let both = [image.clone(), headers.clone()];
    let open = |rs: &mut Resched| {
        let mut v = klpsym_io::load_packages(&both, &o, rs).unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0).1.unwrap()
    };
    let cold = open(rs);
    let parts = |k: &LoadedKernel| {
        let p = k.package.as_ref().unwrap();
        (
            p.config
                .as_ref()
                .map(|c| c.value("CONFIG_LIVEPATCH").map(str::to_string)),
            p.symvers.as_ref().map(|s| s.symbols.len()),
            p.packages.clone(),
        )
    };
    assert_eq!(parts(&cold).0, Some(Some("y".to_string())));
    assert_eq!(parts(&cold).1, Some(3000));
    let listed = o.cache.as_ref().unwrap().list(rs).unwrap();
    let kinds: Vec<&str> = listed.iter().map(|e| e.kind).collect();
    assert!(
        kinds.contains(&"package parts") && kinds.contains(&"kernel"),
        "{kinds:?}"
    );
    // Warm: the parts from their entry.
    let warm = open(rs);
    assert!(warm.cached.is_some());
    assert_eq!(parts(&warm), parts(&cold));
    assert_eq!(
        warm.facts
            .notes
            .iter()
            .filter(|n| n.starts_with("package "))
            .count(),
        cold.facts
            .notes
            .iter()
            .filter(|n| n.starts_with("package "))
            .count()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The folder is kept under its bound: after each write, stale entries go first, then the
/// least recently used, never the entry just written; `prune` with `stale` removes the
/// entries whose input is gone, and their stamp records.
#[test]
fn the_cache_is_kept_under_its_bound_and_stale_entries_go_first() {
    let dir = tempdir("bound");
    let rs = &mut Resched::none();
    let unbounded = opts(&dir);
    let inputs: Vec<PathBuf> = (0..4u8)
        .map(|i| {
            let p = dir.join(format!("k{i}.deb"));
            std::fs::write(&p, image_package(10 + i)).unwrap();
            p
        })
        .collect();
    load(&inputs[0], &unbounded, rs).unwrap();
    let one = entries(&dir);
    assert_eq!(one.len(), 1);
    let entry_bytes = std::fs::metadata(&one[0]).unwrap().len();
    // Room for two entries and their records, not three.
    let bound = entry_bytes * 2 + entry_bytes / 2;
    let o = LoadOptions {
        cache: Some(Cache {
            dir: dir.join("cache"),
            max_bytes: bound,
        }),
        ..LoadOptions::default()
    };
    let cache = o.cache.clone().unwrap();
    let total = || cache.listing(&mut Resched::none()).unwrap().bytes;
    let inputs_of = |listed: &[klpsym_io::EntryInfo]| -> Vec<String> {
        let mut v: Vec<String> = listed
            .iter()
            .flat_map(|e| e.inputs.iter())
            .map(|i| {
                Path::new(i)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        v.sort();
        v
    };
    // The first input gone: its entry is stale (listed so), the first to go.
    std::fs::remove_file(&inputs[0]).unwrap();
    load(&inputs[1], &o, rs).unwrap();
    let listed = cache.list(rs).unwrap();
    assert_eq!(listed.len(), 2, "under the bound: nothing removed");
    assert_eq!(listed.iter().filter(|e| !e.live).count(), 1);
    load(&inputs[2], &o, rs).unwrap();
    assert!(total() <= bound, "{} > {bound}", total());
    let listed = cache.list(rs).unwrap();
    assert_eq!(
        inputs_of(&listed),
        ["k1.deb", "k2.deb"],
        "the stale entry went first"
    );
    assert!(listed.iter().all(|e| e.live));
    // Then the least recently used: k1's entry, written before k2's.
    load(&inputs[3], &o, rs).unwrap();
    assert!(total() <= bound, "{} > {bound}", total());
    assert_eq!(inputs_of(&cache.list(rs).unwrap()), ["k2.deb", "k3.deb"]);
    // A hit marks an entry used (when it was last marked over an hour ago): k2's, made
    // old, is used now and outlives k3's.
    for e in entries(&dir) {
        set_mtime(
            &e,
            std::time::SystemTime::now() - std::time::Duration::from_secs(7200),
        );
    }
    assert!(load(&inputs[2], &o, rs).unwrap().cached.is_some());
    load(&inputs[1], &o, rs).unwrap();
    assert_eq!(inputs_of(&cache.list(rs).unwrap()), ["k1.deb", "k2.deb"]);
    // A bound below one entry keeps the one just written.
    let tiny = LoadOptions {
        cache: Some(Cache {
            dir: dir.join("cache"),
            max_bytes: 1,
        }),
        ..LoadOptions::default()
    };
    std::fs::write(&inputs[0], image_package(10)).unwrap();
    load(&inputs[0], &tiny, rs).unwrap();
    let listed = cache.list(rs).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].inputs.iter().any(|i| i.ends_with("k0.deb")));
    // Its input removed: stale, and pruned with its stamp record.
    std::fs::remove_file(&inputs[0]).unwrap();
    let listed = cache.list(rs).unwrap();
    assert!(!listed[0].live);
    let how = klpsym_io::Prune {
        stale: true,
        ..klpsym_io::Prune::default()
    };
    assert_eq!(cache.prune(&how, rs).unwrap().len(), 1);
    assert!(cache.list(rs).unwrap().is_empty());
    assert!(files_ending(&dir, ".klps").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
