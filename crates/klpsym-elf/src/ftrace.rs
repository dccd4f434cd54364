//! A vmlinux's ftrace call sites: the `__mcount_loc` table between `__start_mcount_loc` and
//! `__stop_mcount_loc` (`MCOUNT_REC()` in include/asm-generic/vmlinux.lds.h, inside
//! `.init.data`), one `unsigned long` per `call __fentry__` site, which the kernel turns into
//! its ftrace records at boot (`ftrace_init()` -> `ftrace_process_locs()`). The table is init
//! data, freed after boot: a running kernel no longer has it, its vmlinux (or the ELF payload
//! of its bzImage) does.
//!
//! On x86_64 the entries are absolute link-time addresses (`ftrace_call_adjust()` is the
//! identity), sorted at build time since 6.1 (`CONFIG_BUILDTIME_MCOUNT_SORT`) and at boot
//! before; 7.x's sorttable zeroes the entries of dropped weak functions, which the kernel
//! skips. Other architectures fill the table through relocations (arm64's
//! `__patchable_function_entries`): not read here.

use klpsym_resched::resched::{Cancelled, Resched};

/// The call sites of the `__mcount_loc` table at `[start, stop)` (the addresses of
/// `__start_mcount_loc` and `__stop_mcount_loc`) in the x86_64 ELF `bytes` (a vmlinux, or the
/// ELF payload of a bzImage), sorted, zero entries left out. `None` when `bytes` are not an
/// x86_64 ELF file, or no loaded segment holds the whole range in the file. A tick per 512
/// entries.
pub fn mcount_sites(
    bytes: &[u8],
    start: u64,
    stop: u64,
    resched: &mut Resched,
) -> Result<Option<Vec<u64>>, Cancelled> {
    use object::{Object, ObjectSegment};
    let Ok(file) = object::File::parse(bytes) else {
        return Ok(None);
    };
    if file.architecture() != object::Architecture::X86_64
        || stop < start
        || !(stop - start).is_multiple_of(8)
    {
        return Ok(None);
    }
    let mut table = None;
    for seg in file.segments() {
        resched.tick()?;
        let (addr, (off, filesz)) = (seg.address(), seg.file_range());
        if start >= addr && stop <= addr.saturating_add(filesz) {
            let from = off.checked_add(start - addr);
            let to = from.and_then(|f| f.checked_add(stop - start));
            table = from
                .zip(to)
                .and_then(|(f, t)| Some((usize::try_from(f).ok()?, usize::try_from(t).ok()?)))
                .and_then(|(f, t)| bytes.get(f..t));
            break;
        }
    }
    let Some(table) = table else {
        return Ok(None);
    };
    let mut sites = Vec::with_capacity(table.len() / 8);
    for (i, e) in table.chunks_exact(8).enumerate() {
        if i % 512 == 0 {
            resched.tick()?;
        }
        let site = u64::from_le_bytes(e.try_into().expect("chunks of 8"));
        if site != 0 {
            sites.push(site);
        }
    }
    // Sorted by the build since 6.1; at boot before (ftrace_process_locs()).
    if !sites.is_sorted() {
        resched.tick_step()?;
        sites.sort_unstable();
    }
    Ok(Some(sites))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::{Object as WObject, StandardSegment};
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};

    /// A relocatable object's sections have no segments: the reader wants loaded segments.
    #[test]
    fn an_object_without_segments_has_no_table() {
        let mut o = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let s = o.add_section(
            o.segment_name(StandardSegment::Data).to_vec(),
            b".init.data".to_vec(),
            SectionKind::Data,
        );
        o.append_section_data(s, &[1u8; 16], 8);
        let bytes = o.write().unwrap();
        assert_eq!(
            mcount_sites(&bytes, 0, 16, &mut Resched::none()).unwrap(),
            None
        );
    }

    #[test]
    fn not_an_elf_file() {
        assert_eq!(
            mcount_sites(b"not an elf", 0, 8, &mut Resched::none()).unwrap(),
            None
        );
    }
}
