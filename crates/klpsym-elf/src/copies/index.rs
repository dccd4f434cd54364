//! The index of a whole DWARF: which units name which functions, which units refer to
//! entries of others. One walk of all of `.debug_info`, made once and kept by the caller.

use std::collections::HashMap;

use gimli::{Reader, Section};

use klpsym_resched::resched::{Cancelled, Resched};

use super::walk::{reference, Stop};
use super::Slice;

/// Which units name which functions, and which units refer to entries of other units: made
/// from one walk of all of `.debug_info` ([`crate::DebugLines::copies_index`]), kept by the caller
/// ([`CopiesIndex::encode`]). Flat (a few buffers), so it is freed in steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopiesIndex {
    /// Every name, one after the other, in sorted order (bytes as DWARF has them).
    text: Vec<u8>,
    /// Per name: (start in `text`, length, first of its units in `units`, how many).
    names: Vec<(u32, u32, u32, u32)>,
    /// Units (`.debug_info` offsets), each name's sorted.
    units: Vec<u64>,
    /// (unit referred to, unit referring to it), sorted.
    refs: Vec<(u64, u64)>,
}

impl CopiesIndex {
    const MAGIC: &'static [u8; 8] = b"KLPSYMCI";
    const FORMAT: u32 = 1;

    fn name(&self, i: usize) -> &[u8] {
        let (s, l, _, _) = self.names[i];
        self.text
            .get(s as usize..(s + l) as usize)
            .unwrap_or_default()
    }

    /// The units defining a function named `name` (its out-of-line or inline definition).
    pub fn units_of(&self, name: &str) -> &[u64] {
        let (mut lo, mut hi) = (0, self.names.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.name(mid).cmp(name.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let (_, _, f, n) = self.names[mid];
                    return self
                        .units
                        .get(f as usize..(f + n) as usize)
                        .unwrap_or_default();
                }
            }
        }
        &[]
    }

    /// The units whose entries refer to entries of `unit`.
    pub fn referring_to(&self, unit: u64) -> impl Iterator<Item = u64> + '_ {
        let first = self.refs.partition_point(|r| r.0 < unit);
        self.refs[first..]
            .iter()
            .take_while(move |r| r.0 == unit)
            .map(|r| r.1)
    }

    /// How many names it knows.
    pub fn names(&self) -> usize {
        self.names.len()
    }

    /// How many references across units it knows.
    pub fn references(&self) -> usize {
        self.refs.len()
    }

    /// Frees it in steps.
    pub fn free_with_points(self, rs: &mut Resched) -> Result<(), Cancelled> {
        klpsym_resched::bulk::free_with_points(self.text, rs)?;
        klpsym_resched::bulk::free_with_points(self.names, rs)?;
        klpsym_resched::bulk::free_with_points(self.units, rs)?;
        klpsym_resched::bulk::free_with_points(self.refs, rs)
    }

    /// The bytes a cache keeps.
    pub fn encode(&self, rs: &mut Resched) -> Result<Vec<u8>, Cancelled> {
        let mut out = Vec::new();
        out.extend_from_slice(Self::MAGIC);
        out.extend_from_slice(&Self::FORMAT.to_le_bytes());
        for n in [
            self.text.len(),
            self.names.len(),
            self.units.len(),
            self.refs.len(),
        ] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        klpsym_resched::bulk::extend_from_slice(&mut out, &self.text, rs)?;
        for &(a, b, c, d) in &self.names {
            rs.tick()?;
            for x in [a, b, c, d] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        for u in &self.units {
            rs.tick()?;
            out.extend_from_slice(&u.to_le_bytes());
        }
        for (a, b) in &self.refs {
            rs.tick()?;
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
        Ok(out)
    }

    /// Reads what [`CopiesIndex::encode`] wrote; `Ok(None)` for bytes that are not one
    /// (another format, truncated, out of bounds, unsorted).
    pub fn decode(bytes: &[u8], rs: &mut Resched) -> Result<Option<CopiesIndex>, Cancelled> {
        let mut b = bytes;
        let mut take = |n: usize| -> Option<&[u8]> {
            if b.len() < n {
                return None;
            }
            let (h, t) = b.split_at(n);
            b = t;
            Some(h)
        };
        let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap_or_default());
        let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or_default());
        macro_rules! get {
            ($e:expr) => {
                match $e {
                    Some(x) => x,
                    None => return Ok(None),
                }
            };
        }
        if get!(take(8)) != Self::MAGIC || u32_of(get!(take(4))) != Self::FORMAT {
            return Ok(None);
        }
        let mut counts = [0usize; 4];
        for c in &mut counts {
            *c = get!(usize::try_from(u64_of(get!(take(8)))).ok());
        }
        let [text_len, names_len, units_len, refs_len] = counts;
        let mut text = Vec::new();
        klpsym_resched::bulk::extend_from_slice(&mut text, get!(take(text_len)), rs)?;
        let mut names = Vec::new();
        for _ in 0..names_len {
            rs.tick()?;
            let e = get!(take(16));
            let x = (
                u32_of(&e[0..4]),
                u32_of(&e[4..8]),
                u32_of(&e[8..12]),
                u32_of(&e[12..16]),
            );
            if (x.0 as usize + x.1 as usize) > text.len()
                || (x.2 as usize + x.3 as usize) > units_len
            {
                return Ok(None);
            }
            names.push(x);
        }
        let mut units = Vec::new();
        for _ in 0..units_len {
            rs.tick()?;
            units.push(u64_of(get!(take(8))));
        }
        let mut refs = Vec::new();
        for _ in 0..refs_len {
            rs.tick()?;
            let e = get!(take(16));
            refs.push((u64_of(&e[..8]), u64_of(&e[8..])));
        }
        if !b.is_empty() || !refs.is_sorted() {
            return Ok(None);
        }
        let index = CopiesIndex {
            text,
            names,
            units,
            refs,
        };
        for i in 1..index.names.len() {
            rs.tick()?;
            if index.name(i - 1) >= index.name(i) {
                return Ok(None);
            }
        }
        Ok(Some(index))
    }
}

/// What the walk of every unit gathers: names (interned), (name, unit) pairs, references.
#[derive(Default)]
struct Gathered {
    ids: HashMap<Box<[u8]>, u32>,
    pairs: Vec<(u32, u64)>,
    refs: Vec<(u64, u64)>,
}

impl Gathered {
    fn add(&mut self, name: &[u8], unit: u64) {
        let next = self.ids.len() as u32;
        let id = match self.ids.get(name) {
            Some(&id) => id,
            None => {
                self.ids.insert(name.into(), next);
                next
            }
        };
        if self.pairs.last() != Some(&(id, unit)) {
            self.pairs.push((id, unit));
        }
    }

    /// The index: names sorted, each with its units.
    fn finish(self, rs: &mut Resched) -> Result<CopiesIndex, Cancelled> {
        let Gathered {
            ids,
            mut pairs,
            mut refs,
        } = self;
        // The names out of the map one at a time (freeing a map of many strings at once
        // would be one long stretch).
        let mut named: Vec<(Box<[u8]>, u32)> = Vec::with_capacity(ids.len());
        for (n, id) in ids {
            rs.tick()?;
            named.push((n, id));
        }
        // Megabytes of fresh pages for these two, written in steps.
        let mut order: Vec<u32> = Vec::with_capacity(named.len());
        for i in 0..named.len() as u32 {
            rs.tick()?;
            order.push(i);
        }
        klpsym_resched::bulk::sort_by_with_points(
            &mut order,
            |a, b| named[*a as usize].0.cmp(&named[*b as usize].0),
            rs,
        )?;
        // Old id -> rank in sorted order.
        let mut rank = klpsym_resched::bulk::filled_vec(named.len(), 0u32, rs)?;
        let mut text = Vec::new();
        let mut spans = Vec::with_capacity(named.len());
        for (r, &i) in order.iter().enumerate() {
            rs.tick()?;
            let (n, id) = &named[i as usize];
            rank[*id as usize] = r as u32;
            spans.push((text.len() as u32, n.len() as u32));
            text.extend_from_slice(n);
        }
        // The names and their vector freed in steps: dropped one by one and the buffer
        // after, they were one stretch of 1.6-1.9 ms (`klpsym-bench resched`, 2026-12-07:
        // glibc merges the freed strings when the buffer goes).
        klpsym_resched::bulk::free_with_points(named, rs)?;
        for p in &mut pairs {
            rs.tick()?;
            p.0 = rank[p.0 as usize];
        }
        klpsym_resched::bulk::free_with_points(rank, rs)?;
        klpsym_resched::bulk::free_with_points(order, rs)?;
        klpsym_resched::bulk::sort_by_with_points(&mut pairs, |a, b| a.cmp(b), rs)?;
        klpsym_resched::bulk::dedup_with_points(&mut pairs, rs)?;
        let mut names = Vec::with_capacity(spans.len());
        let mut units = Vec::with_capacity(pairs.len());
        let mut at = 0;
        for (r, (start, len)) in spans.into_iter().enumerate() {
            let first = units.len() as u32;
            while at < pairs.len() && pairs[at].0 == r as u32 {
                rs.tick()?;
                units.push(pairs[at].1);
                at += 1;
            }
            names.push((start, len, first, units.len() as u32 - first));
        }
        klpsym_resched::bulk::free_with_points(pairs, rs)?;
        klpsym_resched::bulk::sort_by_with_points(&mut refs, |a, b| a.cmp(b), rs)?;
        klpsym_resched::bulk::dedup_with_points(&mut refs, rs)?;
        Ok(CopiesIndex {
            text,
            names,
            units,
            refs,
        })
    }
}

/// One walk of every unit: named functions and references across units.
pub(super) fn index_all(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    mapped: Option<&[u8]>,
    rs: &mut Resched,
) -> Result<CopiesIndex, Cancelled> {
    let mut starts = Vec::new();
    let mut headers = dwarf.units();
    loop {
        // A step, not an item: each header is read from a page of its own of a mapped
        // `.debug_info`, often a page fault (an item's stride made these stretches 300 µs,
        // `klpsym-bench resched`, 2026-12-07).
        rs.tick_step()?;
        match headers.next() {
            Ok(Some(h)) => {
                if let Some(o) = h.debug_info_offset() {
                    starts.push((o.0 as u64, h));
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    let offsets: Vec<u64> = starts.iter().map(|s| s.0).collect();
    // The names' map sized once for the whole walk: growing it re-hashes every name at each
    // doubling, one stretch of milliseconds on a vmlinux (6.1 -dbg: 6.8 ms in one step of
    // the walk, `klpsym-bench resched --debug-vmlinux`). About one distinct function name
    // per 2 KiB of `.debug_info` on Debian's vmlinux files; capped for a huge input.
    let info_len = dwarf.debug_info.reader().len();
    let mut g = Gathered {
        ids: HashMap::with_capacity((info_len / 2048).min(1 << 20)),
        ..Gathered::default()
    };
    let mut released = 0usize;
    // A window ahead of the walk asked into the page cache in steps (see `dwarf.rs`'s
    // `Behind`).
    let mut ahead = klpsym_resched::bulk::ReadAhead::default();
    for (off, header) in starts {
        if let Some(m) = mapped {
            ahead.at(m, off as usize, rs)?;
        }
        // What lies behind the walk leaves the process's memory (a mapped 7.x vmlinux has
        // 250 MB of `.debug_info`) once 16 MiB are passed, in the bounded steps of
        // `release_pages_with` (16 MiB in one call is over a millisecond in the kernel).
        if let Some(done) = mapped.and_then(|m| m.get(released..off as usize)) {
            if done.len() >= 16 << 20 {
                klpsym_resched::bulk::release_pages_with(done, rs)?;
                released = off as usize;
            }
        }
        match index_unit(dwarf, header, off, &offsets, &mut g, rs) {
            Ok(()) | Err(Stop::Dwarf(_)) => {}
            Err(Stop::Cancelled) => return Err(Cancelled),
        }
    }
    if let Some(m) = mapped {
        klpsym_resched::bulk::release_pages_with(m, rs)?;
    }
    g.finish(rs)
}

fn index_unit(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    header: gimli::UnitHeader<Slice<'_>>,
    off: u64,
    offsets: &[u64],
    g: &mut Gathered,
    rs: &mut Resched,
) -> Result<(), Stop> {
    let unit = dwarf.unit(header)?;
    // Parsing a unit (its abbreviations, its line program's header) is a step (see
    // `dwarf.rs`).
    rs.tick_step()?;
    let end = off + unit.header.length_including_self() as u64;
    // Declarations of this unit by offset: a definition that only specifies one (a prior
    // prototype) is named by it.
    let mut declared: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut cursor = unit.entries();
    while let Some(e) = cursor.next_dfs()? {
        rs.tick()?;
        let origin = e
            .attr_value(gimli::DW_AT_abstract_origin)
            .or_else(|| e.attr_value(gimli::DW_AT_specification))
            .and_then(|v| reference(&unit, v));
        if let Some(to) = origin.filter(|&to| to < off || to >= end) {
            let i = offsets.partition_point(|&s| s <= to);
            if let Some(&target) = i.checked_sub(1).and_then(|i| offsets.get(i)) {
                g.refs.push((target, off));
            }
        }
        if e.tag() != gimli::DW_TAG_subprogram {
            continue;
        }
        match e.attr_value(gimli::DW_AT_name) {
            Some(v) => {
                let n = dwarf.attr_string(&unit, v)?;
                if e.attr_value(gimli::DW_AT_declaration).is_some() {
                    let at = e
                        .offset()
                        .to_debug_info_offset(&unit.header)
                        .map_or(0, |o| o.0 as u64);
                    declared.insert(at, n.slice().to_vec());
                } else {
                    g.add(n.slice(), off);
                }
            }
            None => {
                if let Some(n) = origin.and_then(|to| declared.get(&to)) {
                    let n = n.clone();
                    g.add(&n, off);
                }
            }
        }
    }
    for (_, n) in declared {
        rs.tick()?;
        drop(n);
    }
    Ok(())
}
