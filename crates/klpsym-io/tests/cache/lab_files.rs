//! The cache on the lab's real kernel files (skipped, saying so, without the lab).

use std::path::PathBuf;

use klpsym_core::resched::Resched;
use klpsym_io::{content_hash, input_identity, load, LoadOptions, LoadedKernel};
use klpsym_testkit::lab::lab;

use crate::{entries, opts, tempdir, view};

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
