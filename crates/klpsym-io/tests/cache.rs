//! The index cache on the lab's real kernel files: a hit gives the same table and facts as a
//! decode; a changed input is re-read; a corrupt, truncated or foreign-version entry is ignored
//! and rebuilt; an entry whose recorded content hash (or, for a vmlinux, build id) does not
//! match the input is not trusted;
//! concurrent runs leave a valid entry; entries are smaller than their inputs. On synthetic
//! packages (no lab needed): one entry per input whatever its path, a package rewritten in
//! place with its size and mtime read again, a package holding no kernel kept as its
//! parts, the folder kept under its bound, live and stale entries told apart and pruned.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_VMLINUZ, KLPSYM_TEST_VMLINUX_STRIPPED,
//! KLPSYM_TEST_IMAGE_DEB, KLPSYM_TEST_DBG_DEB.

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_io::{content_hash, input_identity, load, Cache, LoadOptions, LoadedKernel};

use klpsym_testkit::lab::lab;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("klpsym-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opts(dir: &Path) -> LoadOptions {
    LoadOptions {
        cache: Some(Cache::new(dir.join("cache"))),
        ..LoadOptions::default()
    }
}

fn view(k: &LoadedKernel) -> (String, Option<String>, Option<String>, usize) {
    let mut out = Vec::new();
    klpsym_core::write_kallsyms(&k.table, &mut out, &mut Resched::none()).unwrap();
    (
        format!("{:x}", content_hash(&out, &mut Resched::none()).unwrap()),
        k.facts.version.clone(),
        k.facts.build_id.clone(),
        k.facts.exports.as_ref().map_or(0, |e| e.symbols.len()),
    )
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("cache"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.to_string_lossy().ends_with(".klpc"));
    v
}

#[test]
fn a_hit_equals_a_decode_and_damage_is_rebuilt() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("hit");
    let input = dir.join("vmlinuz");
    std::fs::copy(&vmlinuz, &input).unwrap();
    let o = opts(&dir);
    let rs = &mut Resched::none();
    let cold = load(&input, &o, rs).unwrap();
    assert!(cold.cached.is_none());
    let e = entries(&dir);
    assert_eq!(e.len(), 1, "one entry written");
    let entry_len = std::fs::metadata(&e[0]).unwrap().len();
    let input_len = std::fs::metadata(&input).unwrap().len();
    assert!(
        entry_len < input_len,
        "entry {entry_len} >= input {input_len}"
    );
    let warm = load(&input, &o, rs).unwrap();
    assert_eq!(warm.cached.as_deref(), Some(e[0].as_path()));
    assert_eq!(view(&warm), view(&cold));
    assert_eq!(warm.kind, cold.kind);
    assert_eq!(warm.facts.vermagic, cold.facts.vermagic);
    // A truncated entry, a flipped byte, a zeroed trailer: ignored, decoded again, rewritten.
    let good = std::fs::read(&e[0]).unwrap();
    let damaged: Vec<Vec<u8>> = vec![
        good[..good.len() / 2].to_vec(),
        {
            let mut d = good.clone();
            d[good.len() / 3] ^= 1;
            d
        },
        {
            let mut d = good.clone();
            let n = d.len();
            d[n - 16..].fill(0);
            d
        },
        Vec::new(),
        // An entry of another cache format, intact (its trailer recomputed): not trusted.
        {
            let mut d = good[..good.len() - 16].to_vec();
            assert_eq!(
                u32::from_le_bytes(d[8..12].try_into().unwrap()),
                klpsym_io::CACHE_FORMAT
            );
            d[8] ^= 0x01;
            let t = xxhash_rust::xxh3::xxh3_128(&d);
            d.extend_from_slice(&t.to_le_bytes());
            d
        },
    ];
    // Another klpsym version of the same format (its version recorded in the entry, for the
    // reader of `klpsym cache`): trusted, as every build of this format reads every other's.
    {
        let mut d = good[..good.len() - 16].to_vec();
        let vlen = u32::from_le_bytes(d[12..16].try_into().unwrap()) as usize;
        assert!(vlen > 0);
        d[16 + vlen - 1] ^= 0x01;
        let t = xxhash_rust::xxh3::xxh3_128(&d);
        d.extend_from_slice(&t.to_le_bytes());
        std::fs::write(&e[0], &d).unwrap();
        let k = load(&input, &o, rs).unwrap();
        assert!(k.cached.is_some(), "another version's entry was not read");
        assert_eq!(view(&k), view(&cold));
    }
    for (i, d) in damaged.iter().enumerate() {
        std::fs::write(&e[0], d).unwrap();
        let k = load(&input, &o, rs).unwrap();
        assert!(k.cached.is_none(), "damage {i} was trusted");
        assert_eq!(view(&k), view(&cold), "damage {i}");
        // Rebuilt: the next run is a hit again, with the same answers.
        let again = load(&input, &o, rs).unwrap();
        assert!(again.cached.is_some(), "damage {i}: not rebuilt");
        assert_eq!(view(&again), view(&cold), "damage {i}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_input_is_read_again() {
    let (Some(a), Some(b)) = (
        lab("KLPSYM_TEST_VMLINUZ"),
        lab("KLPSYM_TEST_VMLINUX_STRIPPED"),
    ) else {
        return;
    };
    let dir = tempdir("changed");
    let input = dir.join("kernel");
    let o = opts(&dir);
    let rs = &mut Resched::none();
    std::fs::copy(&a, &input).unwrap();
    let ka = load(&input, &o, rs).unwrap();
    assert!(load(&input, &o, rs).unwrap().cached.is_some());
    // The same path now holds another file: its own table, never the cached one.
    std::fs::copy(&b, &input).unwrap();
    let kb = load(&input, &o, rs).unwrap();
    assert!(kb.cached.is_none());
    assert_eq!(
        kb.facts.format,
        load(&b, &LoadOptions::default(), rs).unwrap().facts.format
    );
    assert_ne!(kb.facts.format, ka.facts.format);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fast key (device, inode, size, times) can match a file whose bytes differ (a rewrite
/// within one timestamp tick, a reused inode): the recorded content hash decides. Here an entry
/// is written for the input's identity but with another content's hash.
#[test]
fn an_entry_whose_content_hash_differs_is_not_trusted() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("hash");
    let input = dir.join("vmlinuz");
    std::fs::copy(&vmlinuz, &input).unwrap();
    let o = opts(&dir);
    let rs = &mut Resched::none();
    let k = load(&input, &LoadOptions::default(), rs).unwrap();
    let cache = o.cache.clone().unwrap();
    let meta = std::fs::metadata(&input).unwrap();
    let bytes = std::fs::read(&input).unwrap();
    cache
        .put(
            &input,
            &meta,
            content_hash(&bytes, rs).unwrap() ^ 1,
            &k,
            &o,
            rs,
        )
        .unwrap();
    assert_eq!(entries(&dir).len(), 1);
    assert!(cache.get(&input, &o, rs).unwrap().is_none());
    // The file is hashed in chunks by two threads: a byte changed on disk anywhere (first
    // byte, a chunk's edges, the last byte), under an entry whose key matches the changed file
    // but whose hash is of the bytes before, is a miss; the entry of the bytes as they are now
    // is a hit.
    let n = bytes.len();
    assert!(n > 2 << 20, "the test wants several chunks");
    for at in [0, (1 << 20) - 1, 1 << 20, n / 2, n - 1] {
        let mut other = bytes.clone();
        other[at] ^= 0x40;
        std::fs::write(&input, &other).unwrap();
        let changed = std::fs::metadata(&input).unwrap();
        let hit_with = |recorded: &[u8], rs: &mut Resched| {
            let h = content_hash(recorded, rs).unwrap();
            cache.put(&input, &changed, h, &k, &o, rs).unwrap();
            cache.get(&input, &o, rs).unwrap().is_some()
        };
        assert!(!hit_with(&bytes, rs), "byte {at}");
        assert!(hit_with(&other, rs), "byte {at}");
    }
    std::fs::write(&input, &bytes).unwrap();
    let meta = std::fs::metadata(&input).unwrap();
    cache
        .put(&input, &meta, content_hash(&bytes, rs).unwrap(), &k, &o, rs)
        .unwrap();
    assert!(cache.get(&input, &o, rs).unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A vmlinux (ELF with a GNU build id) is proven unchanged by its build id and length, not by
/// hashing every byte: an entry recorded under the file's build-id identity is a hit, one
/// recorded with a build id changed in the file is a miss, and so is one recorded with the
/// plain content hash (the identity, not the bytes' hash, is what is checked).
#[test]
fn a_vmlinux_is_proven_by_its_build_id() {
    let Some(vmlinux) = lab("KLPSYM_TEST_VMLINUX_STRIPPED") else {
        return;
    };
    let dir = tempdir("build-id");
    let input = dir.join("vmlinux");
    std::fs::copy(&vmlinux, &input).unwrap();
    let o = opts(&dir);
    let rs = &mut Resched::none();
    let k = load(&input, &LoadOptions::default(), rs).unwrap();
    let cache = o.cache.clone().unwrap();
    let bytes = std::fs::read(&input).unwrap();
    let identity = input_identity(&bytes, rs).unwrap();
    assert_ne!(
        identity,
        content_hash(&bytes, rs).unwrap(),
        "not read as an ELF with a build id"
    );
    let meta = std::fs::metadata(&input).unwrap();
    cache.put(&input, &meta, identity, &k, &o, rs).unwrap();
    let hit = cache.get(&input, &o, rs).unwrap().expect("a hit");
    assert_eq!(view(&hit), view(&k));
    // An entry recorded under the plain content hash is not the input's: not found.
    std::fs::remove_file(hit.cached.as_ref().unwrap()).unwrap();
    cache
        .put(&input, &meta, content_hash(&bytes, rs).unwrap(), &k, &o, rs)
        .unwrap();
    assert_eq!(entries(&dir).len(), 1);
    assert!(cache.get(&input, &o, rs).unwrap().is_none());
    // The build id changed in place (one byte of the note's descriptor), under an entry whose
    // fast key matches the changed file but whose identity is the old one: a miss.
    let id = k
        .facts
        .build_id
        .clone()
        .expect("the lab vmlinux has a build id");
    let id: Vec<u8> = (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect();
    // (Every copy: the note's is not the first one in the file.)
    let mut other = bytes.clone();
    let copies: Vec<usize> = bytes
        .windows(id.len())
        .enumerate()
        .filter(|(_, w)| *w == id.as_slice())
        .map(|(at, _)| at)
        .collect();
    assert!(!copies.is_empty(), "the build id is in the file");
    for at in copies {
        other[at + id.len() - 1] ^= 1;
    }
    std::fs::write(&input, &other).unwrap();
    let changed = std::fs::metadata(&input).unwrap();
    assert_ne!(input_identity(&other, rs).unwrap(), identity);
    cache.put(&input, &changed, identity, &k, &o, rs).unwrap();
    assert!(cache.get(&input, &o, rs).unwrap().is_none());
    cache
        .put(
            &input,
            &changed,
            input_identity(&other, rs).unwrap(),
            &k,
            &o,
            rs,
        )
        .unwrap();
    assert!(cache.get(&input, &o, rs).unwrap().is_some());
    // Bytes that are not a build id, an ELF file too short for its headers, a truncated
    // program header table: the content hash.
    for b in [&b"not an elf"[..], &bytes[..40], &bytes[..70]] {
        assert_eq!(input_identity(b, rs).unwrap(), content_hash(b, rs).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_runs_leave_one_valid_entry() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("concurrent");
    let input = dir.join("vmlinuz");
    std::fs::copy(&vmlinuz, &input).unwrap();
    let want = view(&load(&input, &LoadOptions::default(), &mut Resched::none()).unwrap());
    let o = opts(&dir);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| view(&load(&input, &o, &mut Resched::none()).unwrap())))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), want);
        }
    });
    assert_eq!(entries(&dir).len(), 1);
    let k = load(&input, &o, &mut Resched::none()).unwrap();
    assert!(k.cached.is_some());
    assert_eq!(view(&k), want);
    // No temporary files left behind: the entry and its input's stamp record.
    let mut names: Vec<String> = std::fs::read_dir(dir.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| n.ends_with(".klps"));
    assert!(
        names.len() == 2 && names[0].ends_with(".klpc") && names[1].ends_with(".klps"),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An entry that would outgrow its input with the name index is written without it (the index
/// is then built when needed), and one that outgrows it anyway is not written at all.
#[test]
fn the_name_index_is_left_out_when_the_entry_would_outgrow_its_input() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("outgrow");
    let input = dir.join("vmlinuz");
    std::fs::copy(&vmlinuz, &input).unwrap();
    let o = opts(&dir);
    let c = o.cache.clone().unwrap();
    let rs = &mut Resched::none();
    let cold = load(&input, &o, rs).unwrap();
    let e = entries(&dir);
    assert_eq!(e.len(), 1);
    let full = std::fs::metadata(&e[0]).unwrap().len();
    let mut index = Vec::new();
    cold.table.encode_name_index(&mut index, rs).unwrap();
    assert!(
        index.len() > 4096,
        "a real kernel's index: {} bytes",
        index.len()
    );
    // Inputs of the same name length (the entry records it) and a chosen size, all zeros.
    let put_as = |name: &str, size: u64| -> Option<u64> {
        let p = dir.join(name);
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(size).unwrap();
        drop(f);
        let meta = std::fs::metadata(&p).unwrap();
        let id = input_identity(&std::fs::read(&p).unwrap(), &mut Resched::none()).unwrap();
        let before: Vec<PathBuf> = entries(&dir);
        c.put(&p, &meta, id, &cold, &o, &mut Resched::none())
            .unwrap();
        let new: Vec<PathBuf> = entries(&dir)
            .into_iter()
            .filter(|x| !before.contains(x))
            .collect();
        assert!(new.len() <= 1);
        new.first().map(|x| std::fs::metadata(x).unwrap().len())
    };
    // One byte short of the full entry: written, smaller by the index.
    let without = put_as("vmlinuy", full - 1).expect("an entry without the index");
    assert!(
        without + index.len() as u64 <= full,
        "{without} + {} > {full}",
        index.len()
    );
    // A hit on it answers as the cold load did, names looked up through an index built now.
    let k = c.get(&dir.join("vmlinuy"), &o, rs).unwrap().expect("a hit");
    assert_eq!(view(&k), view(&cold));
    for name in ["printk", "_text", "klp_enable_patch", "no_such_symbol_here"] {
        let got: Vec<u64> = k.table.by_name(name).map(|s| s.addr).collect();
        let want: Vec<u64> = cold.table.by_name(name).map(|s| s.addr).collect();
        assert_eq!(got, want, "{name}");
    }
    // Smaller than the entry without the index: nothing is written. (64 bytes short, not 1:
    // the entry records its input's size in decimal and pads the table to 8 bytes, so its
    // own size moves by a few bytes with the input's.)
    assert_eq!(put_as("vmlinux", without - 64), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every lab kernel's image gets an entry that holds its name index and its exports, so a
/// warm run reads both in place: an entry left without its index (it would have outgrown
/// the image) rebuilds the index on every run, a silent 10-15 ms. The margin is small (the
/// 5.10 entry is 6.9 MB for a 7.1 MB image).
#[test]
fn every_lab_image_entry_keeps_its_name_index() {
    for k in klpsym_testkit::lab::lab_kernels() {
        let dir = tempdir(&format!("margin-{}", k.value("RELEASE")));
        let o = opts(&dir);
        let rs = &mut Resched::none();
        let image = k.path("VMLINUZ");
        let cold = load(&image, &o, rs).unwrap();
        let warm = load(&image, &o, rs).unwrap();
        assert!(warm.cached.is_some(), "{}: no cache hit", k.name);
        assert!(
            warm.table.name_indexed(),
            "{}: the entry ({} bytes for a {}-byte image) was written without its name index",
            k.name,
            entries(&dir)
                .iter()
                .map(|e| std::fs::metadata(e).unwrap().len())
                .sum::<u64>(),
            std::fs::metadata(&image).unwrap().len()
        );
        assert_eq!(view(&warm), view(&cold), "{}", k.name);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The bytes of module `name` in `k`'s package modules, when it has it.
fn module_bytes(k: &LoadedKernel, name: &str) -> Option<Vec<u8>> {
    match k.package.as_ref()?.modules.as_ref()?.file(name)? {
        klpsym_io::ModuleFile::Member { data, .. } => Some(data.to_vec()),
        klpsym_io::ModuleFile::Path(p) => std::fs::read(p).ok(),
    }
}

/// A check's modules from an image package are kept with its entry (only the modules it
/// names, keyed by those names), so a warm check does not read the package again; a
/// `-dbg` package's vmlinux is kept with its declaration lines, and joins its image from the
/// cache. Warm answers equal cold ones.
#[test]
fn a_check_s_package_modules_and_a_dbg_package_are_cached() {
    let (Some(image), Some(dbg)) = (lab("KLPSYM_TEST_IMAGE_DEB"), lab("KLPSYM_TEST_DBG_DEB"))
    else {
        return;
    };
    let dir = tempdir("package-parts");
    let rs = &mut Resched::none();
    let named = |names: &[&str]| LoadOptions {
        package_modules: true,
        package_module_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..opts(&dir)
    };
    let one = |o: &LoadOptions, rs: &mut Resched| {
        let mut v = klpsym_io::load_packages(std::slice::from_ref(&image), o, rs).unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0).1.unwrap()
    };
    let cold = one(&named(&["dummy"]), rs);
    assert!(cold.cached.is_none());
    let tree = cold.package.as_ref().unwrap().modules.as_ref().unwrap();
    assert_eq!(tree.len(), 1, "only the named module is kept");
    let warm = one(&named(&["dummy"]), rs);
    assert!(warm.cached.is_some(), "the second check reads the entry");
    assert_eq!(view(&warm), view(&cold));
    assert_eq!(module_bytes(&warm, "dummy"), module_bytes(&cold, "dummy"));
    assert!(module_bytes(&warm, "dummy").is_some());
    // Other names are another entry, never the first one's modules.
    let other = one(&named(&["dummy", "veth"]), rs);
    assert!(other.cached.is_none());
    assert!(module_bytes(&other, "veth").is_some());

    // The image with its -dbg package: cold, the debug part reads lines from the package;
    // warm, both parts come from the cache and the lines from the entry.
    let both = [image.clone(), dbg.clone()];
    let o = opts(&dir);
    let kernel = |rs: &mut Resched| {
        let mut v = klpsym_io::load_packages(&both, &o, rs).unwrap();
        assert_eq!(v.len(), 1, "one kernel of one release");
        v.remove(0).1.unwrap()
    };
    // The image cached alone first (a lookup on it, say): the cold run joins that entry's
    // package, read anew, with the -dbg package, and keeps both parts.
    assert!(one(&o, rs).cached.is_none());
    let cold = kernel(rs);
    let warm = kernel(rs);
    let d = warm
        .debug
        .as_deref()
        .expect("the -dbg part joined its image");
    assert!(
        warm.cached.is_some() && d.cached.is_some(),
        "both parts from the cache"
    );
    assert!(d.lines.as_ref().is_some_and(|l| l.len() > 10_000));
    // A package is read streaming and never refused for its size, warm as cold: with an input
    // limit below both packages' sizes the entries still serve them (7.x's -dbg package is
    // over the 1 GiB default, and was read anew from its 1.2 GB every time).
    let small = LoadOptions {
        max_input_size: 1024,
        ..opts(&dir)
    };
    let mut v = klpsym_io::load_packages(&both, &small, rs).unwrap();
    let limited = v.remove(0).1.unwrap();
    assert!(
        limited.cached.is_some() && limited.debug.as_deref().is_some_and(|d| d.cached.is_some()),
        "a package over the input limit is served from its entry"
    );
    assert_eq!(view(&limited), view(&warm));
    let addrs: Vec<Option<u64>> = cold
        .debug
        .as_deref()
        .unwrap()
        .table
        .iter()
        // Functions, not the padding before them (`__pfx_*`, `__cfi_*` from 6.2 on: no DWARF).
        .filter(|s| matches!(s.kind, 't' | 'T'))
        .filter(|s| !s.name.starts_with("__pfx_") && !s.name.starts_with("__cfi_"))
        .step_by(97)
        .map(|s| Some(s.addr))
        .collect();
    let lines = |k: &LoadedKernel, rs: &mut Resched| k.decl_lines_at(&addrs, 1 << 31, rs).unwrap();
    let (c, w) = (lines(&cold, rs), lines(&warm, rs));
    assert!(c.iter().filter(|l| l.is_some()).count() > addrs.len() / 2);
    assert_eq!(c, w, "the entry's lines are the DWARF's");
    assert_eq!(view(&warm), view(&cold));
    assert_eq!(view(d), view(cold.debug.as_deref().unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
}

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
