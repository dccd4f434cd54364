//! The kallsyms view of a vmlinux: what scripts/kallsyms puts in the tables and
//! so what /proc/kallsyms lists, in its order.
//!
//! Pipeline (scripts/link-vmlinux.sh + scripts/kallsyms.c): `nm -n` lines ->
//! era filters ([`crate::filter`]) -> text-range check unless `--all-symbols`
//! (CONFIG_KALLSYMS_ALL) -> percpu symbols turned into `A` under
//! `--absolute-percpu` (x86_64 SMP until 6.15) -> `compare_symbols()` sort.

use std::cmp::Ordering;
use std::io::Read;

use klpsym_resched::bulk::sort_by_with_points;
use klpsym_resched::resched::{Cancelled, Resched};

use crate::error::ElfError;
use crate::filter::{is_ignored, KernelVersion};
use crate::names::NameTable;
use crate::nm::{nm_sorted, NmLine};
use crate::raw::{RawElf, RawSection, EM_X86_64};
use crate::symbol::{KallsymTable, KallsymTableBuilder};
use klpsym_resched::bulk::free_with_points;
use klpsym_resched::ChunkedFinder;

/// Result of [`vmlinux_kallsyms`].
#[derive(Debug, Clone)]
pub struct VmlinuxSymbols {
    /// The kallsyms entries in /proc/kallsyms order.
    pub entries: KallsymTable,
    /// Whether CONFIG_KALLSYMS_ALL was taken to be on.
    pub kallsyms_all: bool,
    /// Where `kallsyms_all` came from: "given by caller", "detected from ...",
    /// or "assumed ...".
    pub kallsyms_all_source: String,
    /// Everything else that was assumed or detected.
    pub notes: Vec<String>,
    /// `UTS_RELEASE` from the embedded `linux_banner`, if found.
    pub version: Option<String>,
}

/// Options beyond the required `kallsyms_all`, for callers that know better than
/// the detection.
#[derive(Debug, Clone, Copy, Default)]
pub struct VmlinuxOptions {
    /// CONFIG_KALLSYMS_ALL; `None` = detect.
    pub kallsyms_all: Option<bool>,
    /// Kernel version selecting the era rules; `None` = from `linux_banner`.
    pub version: Option<KernelVersion>,
    /// `--absolute-percpu`; `None` = detect (x86_64, percpu section linked at 0,
    /// kernel before 6.15).
    pub absolute_percpu: Option<bool>,
}

/// The kallsyms entries of a vmlinux with a `.symtab`, in /proc/kallsyms order.
pub fn vmlinux_kallsyms(
    elf: &[u8],
    kallsyms_all: Option<bool>,
) -> Result<VmlinuxSymbols, ElfError> {
    vmlinux_kallsyms_with(
        elf,
        VmlinuxOptions {
            kallsyms_all,
            ..VmlinuxOptions::default()
        },
        &mut Resched::none(),
    )
}

/// [`vmlinux_kallsyms`] with every assumption overridable (`opts`), reaching a reschedule point through `resched` per symbol (in
/// parsing, filtering, sorting and every table pass) and every 256 KiB of scanning; a cancelled
/// point ends it with [`ElfError::Cancelled`].
pub fn vmlinux_kallsyms_with(
    elf: &[u8],
    opts: VmlinuxOptions,
    resched: &mut Resched,
) -> Result<VmlinuxSymbols, ElfError> {
    let mut raw = RawElf::parse(elf, resched)?;
    if !raw.has_symtab {
        return Err(ElfError::NoSymtab);
    }
    let mut notes = Vec::new();
    let release = find_release(elf, resched)?;
    let version = match (
        opts.version,
        release.as_deref().and_then(KernelVersion::parse),
    ) {
        (Some(v), _) => v,
        (None, Some(v)) => v,
        (None, None) => {
            notes.push(
                "kernel version unknown (no linux_banner): assumed current (6.17+) filter rules"
                    .to_owned(),
            );
            KernelVersion {
                major: 6,
                minor: 17,
            }
        }
    };
    notes.push(format!(
        "filter rules of kernel {}.{} (mksysmap input: {})",
        version.major,
        version.minor,
        if (version.major, version.minor) >= (6, 1) {
            "yes"
        } else {
            "no"
        }
    ));
    let lines = nm_sorted(&raw, resched)?;
    let mut kept: Vec<(usize, &NmLine<'_>)> = Vec::with_capacity(lines.len());
    for l in &lines {
        resched.tick()?;
        if !is_ignored(version, l.name, l.kind) {
            kept.push((kept.len(), l));
        }
    }

    let absolute_percpu = match opts.absolute_percpu {
        Some(b) => b,
        None => {
            let start = find_addr(&kept, "__per_cpu_start", resched)?;
            let detected = raw.machine == EM_X86_64
                && start == Some(0)
                && !(version.major, version.minor).ge(&(6, 15));
            if detected {
                notes.push("absolute percpu: x86_64 with .data..percpu linked at 0".to_owned());
            }
            detected
        }
    };

    let (kallsyms_all, source) = match opts.kallsyms_all {
        Some(b) => (b, "given by caller".to_owned()),
        None => detect_all(&raw, elf, &kept, absolute_percpu, &mut notes, resched)?,
    };
    let rows = sorted_rows(&kept, kallsyms_all, absolute_percpu, resched)?;
    let exported = Exported::new(&lines, resched)?;
    let table = build_table(&rows, &raw.sections, &exported, resched)?;
    // Megabytes of intermediate tables: given back in steps. The names were borrowed from
    // `elf` (only the rare non-UTF-8 ones own a copy), so there is nothing to free per symbol.
    exported.free_with_points(resched)?;
    free_with_points(rows, resched)?;
    free_with_points(kept, resched)?;
    free_with_points(lines, resched)?;
    free_with_points(std::mem::take(&mut raw.symbols), resched)?;
    Ok(VmlinuxSymbols {
        entries: table,
        kallsyms_all,
        kallsyms_all_source: source,
        notes,
        version: release,
    })
}

type Kept<'l, 'r> = [(usize, &'l NmLine<'r>)];

fn find_addr(
    kept: &Kept<'_, '_>,
    name: &str,
    resched: &mut Resched,
) -> Result<Option<u64>, Cancelled> {
    for (_, l) in kept {
        resched.tick()?;
        if l.name == name {
            return Ok(Some(l.addr));
        }
    }
    Ok(None)
}

/// `{start, end}` from the named symbols, defaulting like the C statics do.
fn range(
    kept: &Kept<'_, '_>,
    start: &str,
    end: &str,
    default: (u64, u64),
    resched: &mut Resched,
) -> Result<(u64, u64), Cancelled> {
    Ok((
        find_addr_last(kept, start, resched)?.unwrap_or(default.0),
        find_addr_last(kept, end, resched)?.unwrap_or(default.1),
    ))
}

/// check_symbol_range() overwrites on every occurrence: the last one wins.
fn find_addr_last(
    kept: &Kept<'_, '_>,
    name: &str,
    resched: &mut Resched,
) -> Result<Option<u64>, Cancelled> {
    for (_, l) in kept.iter().rev() {
        resched.tick()?;
        if l.name == name {
            return Ok(Some(l.addr));
        }
    }
    Ok(None)
}

/// One entry of the kallsyms table before the names are copied: its position in `kept`
/// (scripts/kallsyms' input order, the last tie-break), its nm line and its final letter.
#[derive(Debug, Clone, Copy)]
struct Row<'l, 'r> {
    pos: usize,
    line: &'l NmLine<'r>,
    kind: u8,
}

/// Calls `f` with every entry scripts/kallsyms keeps, in input order: the text-range check
/// unless `all` (CONFIG_KALLSYMS_ALL), percpu symbols made `A` under `absolute_percpu`.
fn for_each_selected<'l, 'r>(
    kept: &Kept<'l, 'r>,
    all: bool,
    absolute_percpu: bool,
    resched: &mut Resched,
    mut f: impl FnMut(Row<'l, 'r>),
) -> Result<(), Cancelled> {
    let text = range(kept, "_stext", "_etext", (0, 0), resched)?;
    let init = range(kept, "_sinittext", "_einittext", (0, 0), resched)?;
    let percpu = range(
        kept,
        "__per_cpu_start",
        "__per_cpu_end",
        (u64::MAX, 0),
        resched,
    )?;
    let in_range = |a: u64, r: (u64, u64)| a >= r.0 && a <= r.1;

    for &(pos, l) in kept {
        resched.tick()?;
        if !all {
            if !in_range(l.addr, text) && !in_range(l.addr, init) {
                continue;
            }
            // Symbols sharing _etext/_einittext's address can move between the
            // kallsyms link passes, so symbol_valid() drops them.
            if (l.addr == text.1 && l.name != "_etext")
                || (l.addr == init.1 && l.name != "_einittext")
            {
                continue;
            }
        }
        let kind = if absolute_percpu && in_range(l.addr, percpu) {
            b'A'
        } else {
            l.kind
        };
        f(Row { pos, line: l, kind });
    }
    Ok(())
}

/// Number of entries the table would have.
fn count_selected(
    kept: &Kept<'_, '_>,
    all: bool,
    absolute_percpu: bool,
    resched: &mut Resched,
) -> Result<usize, Cancelled> {
    let mut n = 0;
    for_each_selected(kept, all, absolute_percpu, resched, |_| n += 1)?;
    Ok(n)
}

/// The kept entries in scripts/kallsyms' `compare_symbols()` order.
fn sorted_rows<'l, 'r>(
    kept: &Kept<'l, 'r>,
    all: bool,
    absolute_percpu: bool,
    resched: &mut Resched,
) -> Result<Vec<Row<'l, 'r>>, Cancelled> {
    let mut rows = Vec::with_capacity(kept.len());
    for_each_selected(kept, all, absolute_percpu, resched, |r| rows.push(r))?;
    sort_by_with_points(&mut rows, compare_symbols, resched)?;
    Ok(rows)
}

/// The rows as a [`KallsymTable`]: names copied into its arena, `exported` marked.
fn build_table(
    rows: &[Row<'_, '_>],
    sections: &[RawSection<'_>],
    exported: &Exported<'_, '_>,
    resched: &mut Resched,
) -> Result<KallsymTable, Cancelled> {
    let mut name_bytes = 0usize;
    for s in sections {
        resched.tick()?;
        name_bytes = name_bytes.saturating_add(s.name.len());
    }
    for r in rows {
        resched.tick()?;
        // File names are stored once each; counting them per row over-reserves a little and
        // keeps the arena from growing (one copy of it all) while it is filled.
        let file = r.line.file.map_or(0, str::len);
        name_bytes = name_bytes.saturating_add(r.line.name.len() + file);
    }
    let mut b = KallsymTableBuilder::with_capacity(rows.len(), name_bytes);
    b.reserve_sections(sections.len());
    for s in sections {
        resched.tick()?;
        b.push_section(&s.name);
    }
    for r in rows {
        resched.tick()?;
        let l = r.line;
        b.push(
            l.name,
            r.kind,
            l.addr,
            Some(l.size),
            l.section_index,
            exported.contains(l.name),
        );
        if let Some(f) = l.file {
            b.set_last_file(f);
        }
    }
    Ok(b.finish())
}

/// scripts/kallsyms.c compare_symbols(): address, non-weak before weak, real
/// symbols before linker-script markers, fewer leading underscores, input order.
fn compare_symbols(a: &Row<'_, '_>, b: &Row<'_, '_>) -> Ordering {
    let weak = |r: &Row<'_, '_>| matches!(r.kind, b'w' | b'W');
    let (na, nb) = (a.line.name, b.line.name);
    a.line
        .addr
        .cmp(&b.line.addr)
        .then_with(|| weak(a).cmp(&weak(b)))
        .then_with(|| linker_provided(na).cmp(&linker_provided(nb)))
        .then_with(|| underscores(na).cmp(&underscores(nb)))
        .then_with(|| a.pos.cmp(&b.pos))
}

/// may_be_linker_script_provide_symbol(): `__start_*`, `__stop_*`, `__end_*`,
/// `__*_start`, `__*_end`, for names of at least 8 bytes.
pub(crate) fn linker_provided(name: &str) -> bool {
    let n = name.as_bytes();
    if n.len() < 8 || !name.starts_with("__") {
        return false;
    }
    let rest = &name[2..];
    rest.starts_with("start_")
        || rest.starts_with("stop_")
        || rest.starts_with("end_")
        || name.ends_with("_start")
        || name.ends_with("_end")
}

fn underscores(name: &str) -> usize {
    name.bytes().take_while(|&c| c == b'_').count()
}

const KSYMTAB: &str = "__ksymtab_";

/// The names that have a `__ksymtab_<name>` line.
struct Exported<'l, 'r> {
    lines: &'l [NmLine<'r>],
    /// `__ksymtab_*` lines by the name they export.
    table: NameTable,
}

impl<'l, 'r> Exported<'l, 'r> {
    fn new(lines: &'l [NmLine<'r>], resched: &mut Resched) -> Result<Self, Cancelled> {
        let mut n = 0usize;
        for l in lines {
            resched.tick()?;
            n += usize::from(l.name.starts_with(KSYMTAB));
        }
        let mut table = NameTable::with_capacity(n, resched)?;
        let exported = |i: u32| &lines[i as usize].name[KSYMTAB.len()..];
        for (i, l) in lines.iter().enumerate() {
            resched.tick()?;
            if let Some(name) = l.name.strip_prefix(KSYMTAB) {
                table.insert_first(i as u32, name, exported);
            }
        }
        Ok(Exported { lines, table })
    }

    fn contains(&self, name: &str) -> bool {
        let exported = |i: u32| &self.lines[i as usize].name[KSYMTAB.len()..];
        self.table.get(name, exported).is_some()
    }

    fn free_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.table.free_with_points(resched)
    }
}

/// Decide CONFIG_KALLSYMS_ALL: embedded IKCONFIG first, then the symbol count
/// the image's own `kallsyms_num_syms` holds, else assume on (every major
/// distribution kernel enables it).
fn detect_all(
    raw: &RawElf<'_>,
    elf: &[u8],
    kept: &Kept<'_, '_>,
    absolute_percpu: bool,
    notes: &mut Vec<String>,
    resched: &mut Resched,
) -> Result<(bool, String), Cancelled> {
    if let Some(config) = find_ikconfig(elf, resched)? {
        let (mut on, mut off) = (false, false);
        for l in config.lines() {
            let l = trim_with_points(l, resched)?;
            on |= l == "CONFIG_KALLSYMS_ALL=y";
            off |= l == "# CONFIG_KALLSYMS_ALL is not set";
        }
        drop(config);
        if on {
            return Ok((true, "detected from embedded IKCONFIG".to_owned()));
        }
        if off {
            return Ok((false, "detected from embedded IKCONFIG".to_owned()));
        }
        notes.push("embedded IKCONFIG has no CONFIG_KALLSYMS_ALL line".to_owned());
    }
    if let Some(count) = kallsyms_num_syms(raw, resched)? {
        let all = count_selected(kept, true, absolute_percpu, resched)? as u64;
        let text = count_selected(kept, false, absolute_percpu, resched)? as u64;
        if u64::from(count) == all && all != text {
            return Ok((true, format!("detected from kallsyms_num_syms = {count}")));
        }
        if u64::from(count) == text && all != text {
            return Ok((false, format!("detected from kallsyms_num_syms = {count}")));
        }
        notes.push(format!(
            "kallsyms_num_syms = {count} matches neither computed set (all: {all}, text only: {text})"
        ));
    }
    Ok((
        true,
        "assumed (no IKCONFIG, no usable kallsyms_num_syms; distributions enable it)".to_owned(),
    ))
}

/// The u32 stored at `kallsyms_num_syms`, read through the symbol's own section.
fn kallsyms_num_syms(raw: &RawElf<'_>, resched: &mut Resched) -> Result<Option<u32>, Cancelled> {
    let mut found = None;
    for s in &raw.symbols {
        resched.tick()?;
        if s.name == "kallsyms_num_syms" {
            found = Some(s);
            break;
        }
    }
    Ok(found.and_then(|sym| {
        let sec = raw.sections.get(usize::try_from(sym.section?).ok()?)?;
        let off = usize::try_from(sym.value.checked_sub(sec.addr)?).ok()?;
        let b: [u8; 4] = sec.data?.get(off..off.checked_add(4)?)?.try_into().ok()?;
        Some(if raw.little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }))
}

/// The gzip'ed .config between `IKCFG_ST` and `IKCFG_ED` (CONFIG_IKCONFIG),
/// inflated with a 16 MiB cap, a few KiB between reschedule points.
pub(crate) fn find_ikconfig(
    elf: &[u8],
    resched: &mut Resched,
) -> Result<Option<String>, Cancelled> {
    let spans = loaded_spans(elf);
    let Some(start) = ChunkedFinder::new(b"IKCFG_ST").find_in(elf, &spans, 0, resched)? else {
        return Ok(None);
    };
    let start = start + 8;
    let Some(end) = ChunkedFinder::new(b"IKCFG_ED").find_in(elf, &spans, start, resched)? else {
        return Ok(None);
    };
    const CAP: usize = 16 << 20;
    let mut dec = flate2::read::GzDecoder::new(&elf[start..end]);
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let got = match dec.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Ok(None),
        };
        out.extend_from_slice(&chunk[..got]);
        if out.len() > CAP {
            return Ok(None);
        }
        resched.tick_n(got as u32)?;
    }
    utf8_with_points(&out, resched)
}

/// `bytes` as a `String` if it is UTF-8, validated and copied a chunk per reschedule point
/// (`String::from_utf8` would check megabytes in one stretch).
fn utf8_with_points(bytes: &[u8], resched: &mut Resched) -> Result<Option<String>, Cancelled> {
    const CHUNK: usize = 16 << 10;
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        let take = rest.len().min(CHUNK);
        let valid = match std::str::from_utf8(&rest[..take]) {
            Ok(s) => s,
            // A character split by the end of the chunk: the next chunk starts with it.
            Err(e) if e.error_len().is_none() && take < rest.len() && e.valid_up_to() > 0 => {
                match std::str::from_utf8(&rest[..e.valid_up_to()]) {
                    Ok(s) => s,
                    Err(_) => return Ok(None),
                }
            }
            Err(_) => return Ok(None),
        };
        out.push_str(valid);
        rest = &rest[valid.len()..];
        resched.tick_n(valid.len() as u32)?;
    }
    Ok(Some(out))
}

/// `line.trim()`, with a point reachable per character trimmed: a line can be megabytes of
/// whitespace.
fn trim_with_points<'s>(line: &'s str, resched: &mut Resched) -> Result<&'s str, Cancelled> {
    let mut start = line.len();
    for (i, c) in line.char_indices() {
        if !c.is_whitespace() {
            start = i;
            break;
        }
        resched.tick()?;
    }
    let rest = &line[start..];
    let mut end = 0;
    for (i, c) in rest.char_indices().rev() {
        if !c.is_whitespace() {
            end = i + c.len_utf8();
            break;
        }
        resched.tick()?;
    }
    Ok(&rest[..end])
}

/// Asks the parts of a mapped vmlinux that reading its symbols goes through (`.symtab`,
/// `.strtab` and the loaded data the banner, vermagic and CRC scans search) into the page
/// cache, 16 KiB a step with a reschedule point after each (`bulk::prefetch_with`): the walk
/// then finds them cached, where each of its page faults read ahead inside one stretch
/// (340-720 µs, 2.5-2.9 faults a stretch on a -dbg vmlinux, `klpsym-bench resched`,
/// 2026-12-07). Advice only: for bytes in the heap it changes nothing.
pub fn prefetch_symbol_sections(elf: &[u8], resched: &mut Resched) -> Result<(), Cancelled> {
    use object::{Object, ObjectSection};
    let Ok(f) = object::File::parse(elf) else {
        return Ok(());
    };
    let mut ranges: Vec<std::ops::Range<usize>> = f
        .sections()
        .filter(|s| matches!(s.name(), Ok(".symtab" | ".strtab")))
        .filter_map(|s| {
            let (off, len) = s.file_range()?;
            Some(usize::try_from(off).ok()?..usize::try_from(off.checked_add(len)?).ok()?)
        })
        .collect();
    ranges.extend(loaded_spans(elf));
    for r in ranges {
        if let Some(b) = elf.get(r) {
            klpsym_resched::bulk::prefetch_with(b, resched)?;
        }
    }
    Ok(())
}

/// The file ranges of a vmlinux's loaded data (sections with an address, not code): where its
/// strings (`linux_banner`, the vermagic, the embedded config) are. A search limited to them
/// never touches the DWARF that is most of a -dbg vmlinux. The whole file when the section
/// headers cannot be read.
pub fn loaded_spans(elf: &[u8]) -> Vec<std::ops::Range<usize>> {
    use object::{Object, ObjectSection, SectionKind};
    let Ok(f) = object::File::parse(elf) else {
        return klpsym_resched::EVERYWHERE.to_vec();
    };
    let spans: Vec<std::ops::Range<usize>> = f
        .sections()
        .filter(|s| s.address() != 0 && s.kind() != SectionKind::Text)
        .filter_map(|s| {
            let (off, len) = s.file_range()?;
            Some(usize::try_from(off).ok()?..usize::try_from(off.checked_add(len)?).ok()?)
        })
        .collect();
    if spans.is_empty() {
        klpsym_resched::EVERYWHERE.to_vec()
    } else {
        klpsym_resched::merge_spans(spans)
    }
}

/// `UTS_RELEASE` from `linux_banner` ("Linux version 6.1.0-57-amd64 (...").
pub(crate) fn find_release(elf: &[u8], resched: &mut Resched) -> Result<Option<String>, Cancelled> {
    let needle = b"Linux version ";
    let finder = ChunkedFinder::new(needle);
    let spans = loaded_spans(elf);
    let mut next = 0;
    while let Some(pos) = finder.find_in(elf, &spans, next, resched)? {
        next = pos + 1;
        let rest = &elf[pos + needle.len()..];
        let Some(end) = rest.iter().take(64).position(|&c| c == b' ' || c == 0) else {
            return Ok(None);
        };
        let Ok(rel) = std::str::from_utf8(&rest[..end]) else {
            return Ok(None);
        };
        if KernelVersion::parse(rel).is_some() && !rel.contains('%') {
            return Ok(Some(rel.to_owned()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_testkit::elf::{At, Fixture};
    use object::{Architecture, SectionKind};

    /// A vmlinux-like object. Symbol values are used as addresses, as nm does.
    fn sample(banner: &str, num_syms: Option<u32>, extra_w: bool) -> Vec<u8> {
        let mut f = Fixture::new(Architecture::X86_64);
        let text = f.section(".text", SectionKind::Text, &[]);
        let init = f.section(".init.text", SectionKind::Text, &[]);
        let mut ro = vec![0u8; 0x8000];
        ro[0x100..0x100 + banner.len()].copy_from_slice(banner.as_bytes());
        if let Some(n) = num_syms {
            ro[0x7300..0x7304].copy_from_slice(&n.to_le_bytes());
        }
        let rodata = f.section(".rodata", SectionKind::ReadOnlyData, &ro);
        let data = f.section(".data", SectionKind::Data, &[]);
        let bss = f.section(".bss", SectionKind::UninitializedData, &[]);
        let pcpu = f.section(".data..percpu", SectionKind::Data, &[]);
        // locals
        f.sym("pcpu_a", At::Sec(pcpu), 0x10, 'l', 'o');
        f.sym("_b_fn", At::Sec(text), 0x2000, 'l', 'f');
        f.sym("at_etext", At::Sec(text), 0x3000, 'l', 'f');
        f.sym("init_fn", At::Sec(init), 0x5010, 'l', 'f');
        f.sym("ro_var", At::Sec(rodata), 0x7000, 'l', 'o');
        f.sym("$x", At::Sec(text), 0x1000, 'l', 'n');
        // globals
        f.sym("__per_cpu_start", At::Sec(pcpu), 0, 'g', 'n');
        f.sym("pcpu_weak", At::Sec(pcpu), 0x20, 'w', 'o');
        f.sym("__per_cpu_end", At::Sec(pcpu), 0x100, 'g', 'n');
        f.sym("_text", At::Sec(text), 0x1000, 'g', 'n');
        f.sym("startup", At::Sec(text), 0x1000, 'g', 'f');
        f.sym("_stext", At::Sec(text), 0x1000, 'g', 'n');
        f.sym("c_fn", At::Sec(text), 0x2000, 'g', 'f');
        f.sym("__x_end", At::Sec(text), 0x2000, 'g', 'n');
        f.sym("a_weak", At::Sec(text), 0x2000, 'w', 'f');
        f.sym("__start_marker", At::Sec(text), 0x2000, 'g', 'n');
        f.sym("__under", At::Sec(text), 0x2000, 'g', 'f');
        f.sym("_etext", At::Sec(text), 0x3000, 'g', 'n');
        f.sym("_sinittext", At::Sec(init), 0x5000, 'g', 'n');
        f.sym("_einittext", At::Sec(init), 0x6000, 'g', 'n');
        f.sym("kallsyms_names", At::Sec(rodata), 0x7100, 'g', 'o');
        f.sym("kallsyms_num_syms", At::Sec(rodata), 0x7300, 'g', 'o');
        f.sym("data_var", At::Sec(data), 0x8000, 'g', 'o');
        f.sym("bss_var", At::Sec(bss), 0x9000, 'g', 'o');
        f.sym("__crc_data_var", At::Abs, 0x1234, 'g', 'n');
        f.sym("abs_sym", At::Abs, 0x42, 'g', 'n');
        f.sym("printk_undef", At::Undef, 0, 'g', 'n');
        if extra_w {
            f.sym("weak_undef", At::Undef, 0, 'w', 'n');
        }
        f.bytes()
    }

    const V61: &str = "Linux version 6.1.0-test (x@y) #1 SMP";

    fn show(v: &VmlinuxSymbols) -> Vec<String> {
        v.entries
            .iter()
            .map(|e| format!("{:x} {} {}", e.addr, e.kind as char, e.name))
            .collect()
    }

    const TEXT_ONLY: &[&str] = &[
        "1000 T startup",
        "1000 T _stext",
        "1000 T _text",
        "2000 T c_fn",
        "2000 t _b_fn",
        "2000 T __under",
        // "__x_end" is shorter than 8 bytes: not taken for a linker marker, so it
        // ties with "__under" and falls back to nm's name order.
        "2000 T __x_end",
        "2000 T __start_marker",
        "2000 W a_weak",
        "3000 T _etext",
        "5000 T _sinittext",
        "5010 t init_fn",
        "6000 T _einittext",
    ];

    #[test]
    fn text_only_set_and_tie_order() {
        let v = vmlinux_kallsyms(&sample(V61, None, false), Some(false)).unwrap();
        assert_eq!(v.version.as_deref(), Some("6.1.0-test"));
        assert_eq!(v.kallsyms_all_source, "given by caller");
        assert_eq!(show(&v), TEXT_ONLY);
    }

    #[test]
    fn all_symbols_with_absolute_percpu() {
        let v = vmlinux_kallsyms(&sample(V61, None, true), Some(true)).unwrap();
        let mut want = vec![
            "0 A __per_cpu_start",
            "10 A pcpu_a",
            // weak, but the percpu 'A' override comes before the sort.
            "20 A pcpu_weak",
            "100 A __per_cpu_end",
        ];
        want.extend_from_slice(&TEXT_ONLY[..9]);
        want.extend_from_slice(&[
            "3000 t at_etext",
            "3000 T _etext",
            "5000 T _sinittext",
            "5010 t init_fn",
            "6000 T _einittext",
            "7000 r ro_var",
            "8000 D data_var",
            "9000 B bss_var",
        ]);
        assert_eq!(show(&v), want);
        assert!(v.notes.iter().any(|n| n.contains("absolute percpu")));
    }

    #[test]
    fn weak_undefined_is_kept_before_6_1_only() {
        let old = "Linux version 5.10.0-test (x@y) #1 SMP";
        let v = vmlinux_kallsyms(&sample(old, None, true), Some(true)).unwrap();
        // 'w' at 0 becomes percpu 'A'; it sorts before the linker marker.
        assert_eq!(show(&v)[..2], ["0 A weak_undef", "0 A __per_cpu_start"]);
        let v = vmlinux_kallsyms(&sample(V61, None, true), Some(true)).unwrap();
        assert!(v.entries.iter().all(|e| e.name != "weak_undef"));
    }

    #[test]
    fn kallsyms_all_detected_from_num_syms() {
        let v = vmlinux_kallsyms(&sample(V61, Some(TEXT_ONLY.len() as u32), false), None).unwrap();
        assert!(!v.kallsyms_all);
        assert!(
            v.kallsyms_all_source.contains("kallsyms_num_syms"),
            "{}",
            v.kallsyms_all_source
        );
        let v = vmlinux_kallsyms(&sample(V61, Some(21), false), None).unwrap();
        assert!(v.kallsyms_all, "{}", v.kallsyms_all_source);
        assert!(v.kallsyms_all_source.contains("detected"));
        let v = vmlinux_kallsyms(&sample(V61, Some(999), false), None).unwrap();
        assert!(v.kallsyms_all_source.starts_with("assumed"));
        assert!(v.notes.iter().any(|n| n.contains("matches neither")));
    }

    #[test]
    fn kallsyms_all_detected_from_ikconfig() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"CONFIG_X=y\n# CONFIG_KALLSYMS_ALL is not set\n")
            .unwrap();
        let mut blob = b"IKCFG_ST".to_vec();
        blob.extend(gz.finish().unwrap());
        blob.extend_from_slice(b"IKCFG_ED");
        let mut f = Fixture::new(Architecture::X86_64);
        let ro = f.section(".rodata", SectionKind::ReadOnlyData, &blob);
        f.sym("kernel_config_data", At::Sec(ro), 0, 'l', 'o');
        let v = vmlinux_kallsyms(&f.bytes(), None).unwrap();
        assert!(!v.kallsyms_all);
        assert_eq!(v.kallsyms_all_source, "detected from embedded IKCONFIG");
        assert!(v.notes.iter().any(|n| n.contains("version unknown")));
    }

    #[test]
    fn stripped_and_garbage_inputs_are_errors() {
        let mut f = Fixture::new(Architecture::X86_64);
        f.section(".text", SectionKind::Text, &[]);
        // object::write always emits a .symtab; a non-ELF must still fail cleanly.
        assert!(vmlinux_kallsyms(b"\x7fELF\x02\x01\x01", None).is_err());
        assert!(vmlinux_kallsyms(&[0u8; 64], None).is_err());
        let good = sample(V61, None, false);
        for cut in [20, 64, good.len() / 3, good.len() - 3] {
            let _ = vmlinux_kallsyms(&good[..cut], None);
        }
    }

    #[test]
    fn linker_marker_guess() {
        for yes in [
            "__start_foo",
            "__stop_foo",
            "__end_foo",
            "__bss_start",
            "__bss_end",
        ] {
            assert!(linker_provided(yes), "{yes}");
        }
        for no in [
            "_start",
            "__end",
            "start_foo",
            "__foo",
            "x_end_y",
            "_s_start",
        ] {
            assert!(!linker_provided(no), "{no}");
        }
    }
}
