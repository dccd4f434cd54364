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
/// x86_64 ELF file, or no loaded segment holds the whole range in the file. 512 entries
/// counted at once, every 512 (`tick_n`: a batch ticked as one item would let the stride
/// learned on cheap items run 512 times too long between clock reads).
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
            resched.tick_n(512)?;
        }
        let site = u64::from_le_bytes(e.try_into().expect("chunks of 8"));
        if site != 0 {
            sites.push(site);
        }
    }
    // Sorted by the build since 6.1; at boot before (ftrace_process_locs()).
    if !sites.is_sorted() {
        resched.tick_step()?;
        klpsym_resched::bulk::sort_by_u64_key_with_points(&mut sites, |&s| s, resched)?;
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

/// Whether a module's function has an ftrace call site, as `ftrace_location()` looks for one:
/// `at_start`, a call covering the symbol's first byte (`site <= start < site + 5`: every
/// version); `within`, a call anywhere from its start to the next symbol of its section (5.18+,
/// which also finds `call __fentry__` after an `endbr64`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteFacts {
    /// A call site covers the first byte.
    pub at_start: bool,
    /// A call site lies between the first byte and the next symbol of the section.
    pub within: bool,
}

/// The call sites of an x86_64 module (`__mcount_loc`'s relocations: section, offset), or
/// `None` when the object is not one this models (another machine). A module without
/// `__mcount_loc` has no site (built without `-pg -mfentry`, or nothing traceable).
pub(crate) fn module_sites(
    raw: &crate::raw::RawElf<'_>,
    resched: &mut Resched,
) -> Result<Option<Vec<(u32, u64)>>, Cancelled> {
    use crate::raw::EM_X86_64;
    if raw.machine != EM_X86_64 || !raw.is_64 || !raw.little_endian {
        return Ok(None);
    }
    if !raw.sections.iter().any(|s| s.name == "__mcount_loc") {
        return Ok(Some(Vec::new()));
    }
    const SHT_RELA: u32 = 4;
    const R_X86_64_64: u32 = 1;
    let mut sites = Vec::new();
    for s in &raw.sections {
        if s.sh_type != SHT_RELA || s.name != ".rela__mcount_loc" {
            continue;
        }
        let Some(data) = s.data else { continue };
        for e in data.chunks_exact(24) {
            resched.tick()?;
            let (Ok(info), Ok(addend)) = (e[8..16].try_into(), e[16..24].try_into()) else {
                return Ok(None);
            };
            let (info, addend) = (u64::from_le_bytes(info), i64::from_le_bytes(addend));
            let (sym, typ) = ((info >> 32) as usize, info as u32);
            if typ != R_X86_64_64 {
                continue;
            }
            let Some(target) = raw.symbols.get(sym) else {
                continue;
            };
            let Some(section) = target.section else {
                continue;
            };
            let at = target.value.wrapping_add(addend as u64);
            sites.push((section, at));
        }
    }
    sort_pairs(&mut sites, resched)?;
    Ok(Some(sites))
}

/// Sorts (section, address) pairs in steps (a big module has tens of thousands of sites).
fn sort_pairs(v: &mut Vec<(u32, u64)>, resched: &mut Resched) -> Result<(), Cancelled> {
    klpsym_resched::bulk::sort_by_with_points(v, |a, b| a.cmp(b), resched)
}

/// [`SiteFacts`] of every entry of `entries` (a module's kallsyms lines, section-relative),
/// from its call sites: the extent of a symbol runs to the next entry of its section, else to
/// the section's end (`sizes`: section index -> size).
pub(crate) fn site_facts(
    entries: &crate::symbol::KallsymTable,
    sites: &[(u32, u64)],
    sizes: &dyn Fn(u32) -> u64,
    resched: &mut Resched,
) -> Result<Vec<SiteFacts>, Cancelled> {
    const MCOUNT_INSN_SIZE: u64 = 5;
    // Each section's entry starts, sorted: the next symbol bounds an extent.
    let mut starts: Vec<(u32, u64)> = Vec::with_capacity(entries.len());
    for e in entries.iter() {
        resched.tick()?;
        if let Some(sec) = e.section_index {
            starts.push((sec, e.addr));
        }
    }
    sort_pairs(&mut starts, resched)?;
    starts.dedup();
    let any = |sec: u32, lo: u64, hi: u64| {
        let from = sites.partition_point(|&(s, a)| (s, a) < (sec, lo));
        sites[from..]
            .iter()
            .take_while(|&&(s, a)| s == sec && a <= hi)
            .next()
            .is_some()
    };
    let mut out = Vec::with_capacity(entries.len());
    for e in entries.iter() {
        resched.tick()?;
        let Some(sec) = e.section_index else {
            out.push(SiteFacts::default());
            continue;
        };
        let start = e.addr;
        let next = starts
            .get(starts.partition_point(|&(s, a)| (s, a) <= (sec, start)))
            .filter(|&&(s, _)| s == sec)
            .map_or(sizes(sec), |&(_, a)| a);
        out.push(SiteFacts {
            at_start: any(sec, start.saturating_sub(MCOUNT_INSN_SIZE - 1), start),
            within: next > start && any(sec, start, next - 1),
        });
    }
    klpsym_resched::bulk::free_with_points(starts, resched)?;
    Ok(out)
}
