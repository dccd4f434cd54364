//! Loading one kernel symbol source: the dispatcher over the cache, the /proc reader, the
//! sparse vmlinux reader, packages and the decoders. The only file that knows them all.

use std::path::Path;
use std::time::Instant;

use klpsym_core::resched::Resched;

use crate::cache::Lookup;
use crate::decode::from_bytes;
use crate::error::LoadError;
use crate::file_stamp::Proof;
use crate::loaded::LoadedKernel;
use crate::options::LoadOptions;
use crate::read::read_bounded;

/// Reads `path` (a regular file or a /proc file), tells its kind from the content, and turns it
/// into a symbol table, reaching reschedule points through `resched`: from the cache when an
/// entry proves it, streamed for /proc/kallsyms, a stripped vmlinux without its code, a
/// package by its members, anything else decoded whole.
pub fn load(
    path: &Path,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let cache = opts
        .cache
        .as_ref()
        .filter(|_| crate::Cache::applies_to(path));
    let input_meta = std::fs::metadata(path).ok();
    // Each probe of the input below opens and reads it (a stat, a package's magic, an ELF's
    // headers): a few system calls each, so a point between them keeps the start of a load
    // inside the bound on a busy machine (`klpsym-bench resched`: 220-630 µs from the start
    // to the first point in a CI run, 2026-12-07).
    resched.tick_step()?;
    let package = input_meta.as_ref().is_some_and(std::fs::Metadata::is_file)
        && crate::detect::is_package(path);
    resched.tick_step()?;
    // A package streams from its file (a -dbg package is a gigabyte): never read whole. Its
    // kernel is looked up in the cache there.
    if package {
        let t0 = Instant::now();
        let mut sole = opts.clone();
        if cache.is_none() {
            sole.cache = None;
        }
        let mut ks = crate::package::load_packages(&[path.to_path_buf()], &sole, resched)?;
        let mut k = ks.remove(0).1?;
        if k.cached.is_none() {
            k.read_time = t0.elapsed();
        }
        return Ok(k);
    }
    // The input's identity when the cache proved it on the way to a miss.
    let mut known = None;
    if let Some(c) = cache {
        match c.lookup(path, opts, resched)? {
            Lookup::Hit(k) => return Ok(*k),
            Lookup::Miss(id) => known = id,
        }
    }
    if cache.is_none() && crate::stream::applies_to(path, input_meta.as_ref()) {
        return crate::stream::load(path, opts, resched);
    }
    let t0 = Instant::now();
    // Taken before the first byte is read: the stamp record of the identity found below.
    let proof = input_meta.as_ref().map(Proof::begin);
    let proven = (known, proof.as_ref());
    resched.tick_step()?;
    if let Some(k) = debug_vmlinux(path, input_meta.as_ref(), cache, proven, opts, resched)? {
        return Ok(k);
    }
    resched.tick_step()?;
    // A stripped vmlinux needs only its data: without a cache, and with one when its
    // identity is known or is its build id (a content hash would need every byte, so then
    // the file is read whole).
    resched.set_phase("read the file");
    let mut sparse = crate::sparse::read_stripped_vmlinux(path, opts.max_input_size, resched)?;
    let mut content = known;
    let mut proven_here = false;
    if let (Some(_), None, Some(b)) = (cache, content, &sparse) {
        content = crate::entry::build_id_identity_of(b);
        proven_here = content.is_some();
        if content.is_none() {
            sparse = None;
        }
    }
    let bytes = match sparse {
        Some(b) => b,
        None => read_bounded(path, opts.max_input_size, resched)?,
    };
    if cache.is_some() && content.is_none() {
        content =
            Some(crate::input_identity(&bytes, resched).map_err(klpsym_core::BuildError::from)?);
        proven_here = true;
    }
    if let (true, Some(c), Some(p), Some(h)) = (proven_here, cache, &proof, content) {
        crate::stamp::record(c, path, p, h, resched);
    }
    let mut k = from_bytes(path, bytes, t0.elapsed(), opts, resched)?;
    if let (Some(c), Some(h), Some(m)) = (cache, content, input_meta) {
        resched.set_phase("cache: write the entry");
        if let Err(e) = c.put(path, &m, h, &k, opts, resched) {
            k.facts.notes.push(format!("not cached: {e}"));
        }
    }
    Ok(k)
}

/// A vmlinux with debug info (a big ELF executable: 400-630 MB for a distribution kernel's),
/// read in place (mapped, never copied, never in the heap). Its identity is its build id (a few
/// kilobytes read), so a cache needs no content hash of it.
fn debug_vmlinux(
    path: &Path,
    meta: Option<&std::fs::Metadata>,
    cache: Option<&crate::Cache>,
    (known, proof): (Option<u128>, Option<&Proof>),
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<Option<LoadedKernel>, LoadError> {
    const BIG: u64 = 64 << 20;
    let Some(meta) = meta.filter(|m| m.is_file() && m.len() >= BIG) else {
        return Ok(None);
    };
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    if crate::detect::detect(&head[..n]) != crate::detect::Detected::ElfExecutable {
        return Ok(None);
    }
    let t0 = Instant::now();
    resched.set_phase("debug vmlinux: read in place");
    let file = crate::read::in_place(path, opts, resched)?;
    let bytes: &[u8] = (*file.bytes).as_ref();
    // Mapped: what the symbols' pass reads is asked into the page cache in steps first.
    klpsym_elf::prefetch_symbol_sections(bytes, resched)
        .map_err(|c| LoadError::from(klpsym_core::BuildError::from(c)))?;
    let read_time = t0.elapsed();
    let mut k = crate::decode::from_binary(path, bytes, opts, resched)?;
    k.read_time = read_time;
    // What was decoded is the file's only if it did not change meanwhile.
    file.unchanged(path)?;
    let id = known.or_else(|| {
        let id = crate::entry::build_id_identity_of(bytes)?;
        if let (Some(c), Some(p)) = (cache, proof) {
            crate::stamp::record(c, path, p, id, resched);
        }
        Some(id)
    });
    k.elf = Some(crate::loaded::ElfBytes(file.bytes.clone()));
    if let (Some(c), Some(id)) = (cache, id) {
        resched.set_phase("cache: write the entry");
        if let Err(e) = c.put(path, meta, id, &k, opts, resched) {
            k.facts.notes.push(format!("not cached: {e}"));
        }
        // The entry (its declaration lines read from the map) is the file's only if the
        // file did not change while it was made.
        if let Err(e) = file.unchanged(path) {
            c.forget(id, opts);
            return Err(e);
        }
    }
    Ok(Some(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache_dir::Cache;
    use crate::file_stamp::Stamp;
    use crate::loaded::SourceKind;
    use crate::stamp::{decode, encode, record_path, Record};
    use std::io::Write;
    use std::time::{Duration, SystemTime};

    #[test]
    fn loads_text_and_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("k.txt");
        std::fs::write(&good, "ffffffff81000000 T _text\n").unwrap();
        let k = load(&good, &LoadOptions::default(), &mut Resched::none()).unwrap();
        assert_eq!(k.table.len(), 1);
        assert_eq!(k.kind, SourceKind::Kallsyms);

        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "ffffffff81000000 T _text\nzz T x\n").unwrap();
        let e = load(&bad, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.txt: line 2: bad hex address"), "{e}");

        let elf = dir.path().join("x.ko");
        std::fs::File::create(&elf)
            .unwrap()
            .write_all(b"\x7fELF\x02\x01\x01")
            .unwrap();
        let e = load(&elf, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", elf.display())), "{e}");

        let e = load(
            &dir.path().join("missing"),
            &LoadOptions::default(),
            &mut Resched::none(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing: No such file"), "{e}");

        let opts = LoadOptions {
            max_input_size: 4,
            ..LoadOptions::default()
        };
        assert!(matches!(
            load(&good, &opts, &mut Resched::none()),
            Err(LoadError::TooLarge { .. })
        ));

        let random = dir.path().join("random.bin");
        let bytes: Vec<u8> = (0..100_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&random, bytes).unwrap();
        let e = load(&random, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", random.display())), "{e}");
    }

    /// A trusted record is all a warm run reads of its input: forged to name another
    /// package's identity, it makes the run answer with that package's entry (so the input
    /// itself was not read). The same record under a changed stamp is never consulted.
    #[test]
    fn a_trusted_record_is_taken_without_reading_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("cache"));
        let opts = LoadOptions {
            cache: Some(cache.clone()),
            ..LoadOptions::default()
        };
        let doc = vec![b'x'; 1 << 20];
        let pkg = |v| {
            klpsym_testkit::packages::image_deb(300, v, 128 << 10, &[("./usr/share/doc/x", &doc)])
        };
        let (a, b) = (dir.path().join("a.deb"), dir.path().join("b.deb"));
        std::fs::write(&a, pkg(1)).unwrap();
        std::fs::write(&b, pkg(2)).unwrap();
        let rs = &mut Resched::none();
        let has = |k: &LoadedKernel, name: &str| k.table.iter().any(|s| s.name == name);
        let ka = load(&a, &opts, rs).unwrap();
        let kb = load(&b, &opts, rs).unwrap();
        assert!(has(&ka, "fn_variant_001") && has(&kb, "fn_variant_002"));
        let identity_of = |p: &Path| {
            let r = std::fs::read(record_path(&cache, &Stamp::now(p).unwrap())).unwrap();
            decode(&r).unwrap()
        };
        let (ra, rb) = (identity_of(&a), identity_of(&b));
        assert_ne!(ra.identity, rb.identity);
        // Just written: not trusted yet, so a run proves the input (and finds its entry).
        assert!(!ra.trusted());
        let forge = |identity| {
            let r = Record {
                identity,
                // As if proven an hour later.
                began: SystemTime::now() + Duration::from_secs(3600),
                ..ra.clone()
            };
            assert!(r.trusted());
            std::fs::write(record_path(&cache, &ra.stamp), encode(&r)).unwrap();
        };
        forge(ra.identity);
        let warm = load(&a, &opts, rs).unwrap();
        assert!(warm.cached.is_some() && has(&warm, "fn_variant_001"));
        forge(rb.identity);
        let fooled = load(&a, &opts, rs).unwrap();
        assert!(
            has(&fooled, "fn_variant_002"),
            "the trusted record was not used: the input was read"
        );
        // Rewritten with the same bytes: another ctime, so another stamp; the forged record
        // is not its record, and the input is proven again.
        while Stamp::now(&a) == Some(ra.stamp) {
            std::thread::sleep(Duration::from_millis(2));
            std::fs::write(&a, pkg(1)).unwrap();
        }
        let k = load(&a, &opts, rs).unwrap();
        assert!(k.cached.is_some() && has(&k, "fn_variant_001"));
    }
}
