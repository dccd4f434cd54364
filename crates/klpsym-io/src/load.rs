//! Loading one kernel symbol source: the dispatcher over the cache, the /proc reader, the
//! sparse vmlinux reader, packages and the decoders. The only file that knows them all.

use std::path::Path;
use std::time::Instant;

use klpsym_core::resched::Resched;

use crate::decode::from_bytes;
use crate::error::LoadError;
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
    if let Some(c) = cache {
        if let Some(k) = c.get(path, opts, resched)? {
            return Ok(k);
        }
    }
    let input_meta = std::fs::metadata(path).ok();
    if cache.is_none() && crate::stream::applies_to(path, input_meta.as_ref()) {
        return crate::stream::load(path, opts, resched);
    }
    let t0 = Instant::now();
    // A stripped vmlinux needs only its data: without a cache, and with one when its build id
    // is its identity (a content hash would need every byte, so then the file is read whole).
    let mut sparse = crate::sparse::read_stripped_vmlinux(path, opts.max_input_size, resched)?;
    let mut content = None;
    if let (Some(_), Some(b)) = (cache, &sparse) {
        content = crate::entry::build_id_identity_of(b);
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
    }
    let mut k = if klpsym_package::detect(&bytes).is_some() {
        let mut k = crate::package::load_one(path, &bytes, opts, resched)?;
        k.read_time = t0.elapsed();
        k
    } else {
        from_bytes(path, bytes, t0.elapsed(), opts, resched)?
    };
    if let (Some(c), Some(h), Some(m)) = (cache, content, input_meta) {
        if let Err(e) = c.put(path, &m, h, &k, opts, resched) {
            k.facts.notes.push(format!("not cached: {e}"));
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaded::SourceKind;
    use std::io::Write;

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
}
