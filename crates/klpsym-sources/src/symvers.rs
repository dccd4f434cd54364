//! Exported symbols (Module.symvers, a vmlinux's `__crc_*` symbols, an image's `__kcrctab`)
//! as one lookup structure: the names, modules and namespaces in one byte buffer (for a
//! Module.symvers, its own text, never copied into strings), a record per symbol and a flat
//! hash table over the names.
//!
//! No I/O here: the I/O layer reads (and decompresses) the file and hands over its text.
//!
//! A warm `check` against a tree with `build/Module.symvers` (26,772 lines on Debian 6.12)
//! spent most of its time building a `HashMap<String, _>` of it: three allocations per line
//! and as many frees, for the few dozen names a module asks. Read this way it is one pass over
//! the text, three allocations in all. A kernel's cache entry holds its exports in the map's
//! own encoding, read where they lie; a Module.symvers' entry holds the records and slots
//! alone, read over the file's own bytes (symvers_cache.rs).

use std::ops::Range;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::Backing;

/// One exported symbol as the kernel's build lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export<'a> {
    /// The CRC, when the kernel uses CONFIG_MODVERSIONS (0 and absent otherwise).
    pub crc: Option<u32>,
    /// The exporting object (`vmlinux` or a module path).
    pub module: &'a str,
    /// The symbol namespace, when it has one.
    pub namespace: Option<&'a str>,
}

/// Exported symbols by name, and where they came from.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Exports {
    /// What was read (`Module.symvers`, `vmlinux __crc_*`, `image __kcrctab`).
    pub source: String,
    /// By name.
    pub symbols: ExportMap,
}

/// A string in [`ExportMap::text`].
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    at: usize,
    len: usize,
}

#[derive(Debug, Clone, Copy)]
struct Rec {
    name: Span,
    module: Span,
    /// Empty when the symbol has none (Module.symvers' empty fifth field means none too).
    namespace: Span,
    crc: Option<u32>,
}

/// Exported symbols by name: a later entry for a name replaces the earlier one (as a map's
/// insert does); iteration is in the order names were first inserted.
///
/// Built in memory, or read where it lies in a memory-mapped cache entry ([`ExportMap::encode`],
/// [`ExportMap::view`]): an image's 10,000-25,000 exports were decoded into a fresh map on
/// every warm run, 3-8 ms of a 20 ms `check`.
#[derive(Clone, Default)]
pub struct ExportMap {
    /// Always valid UTF-8: a Module.symvers' text (checked whole) or strings appended.
    text: Vec<u8>,
    recs: Vec<Rec>,
    /// Open addressing, linear probing: 0 is empty, else a record's index + 1 in the low 32
    /// bits and the name's hash tag in the high 32 (most mismatches never read the name). A
    /// power of two at least twice the records (or empty).
    slots: Vec<u64>,
    /// When set, the map is this encoding (and the fields above are empty).
    mapped: Option<Mapped>,
}

/// An encoded map in a backing buffer: absolute ranges of its text, its records (32 bytes
/// each: name, module and namespace as offset and length into the text, the CRC, flags) and
/// its slots (4 bytes each: the record's number + 1 in the low 24 bits, the tag's high 8
/// bits above), all little-endian. Nothing is trusted: every offset read is
/// checked, every string is checked UTF-8 as it is read, and a probe stops after one lap.
///
/// The text may lie in another buffer than the records and slots: a Module.symvers' index
/// kept in the cache is read over the file's own bytes ([`ExportMap::view_index`]).
#[derive(Clone)]
struct Mapped {
    text_backing: Backing,
    text: Range<usize>,
    backing: Backing,
    recs: Range<usize>,
    slots: Range<usize>,
}

const REC_BYTES: usize = 32;

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        (*self.backing).as_ref()
    }
    fn len(&self) -> usize {
        self.recs.len() / REC_BYTES
    }
    fn str_at(&self, at: u32, len: u32) -> Option<&str> {
        let text = (*self.text_backing).as_ref().get(self.text.clone())?;
        let at = at as usize;
        std::str::from_utf8(text.get(at..at.checked_add(len as usize)?)?).ok()
    }
    /// Record `k`: its name and entry, or `None` when any part of it is out of bounds.
    fn entry(&self, k: usize) -> Option<(&str, Export<'_>)> {
        let recs = self.bytes().get(self.recs.clone())?;
        let r = recs.get(k.checked_mul(REC_BYTES)?..)?;
        let f = |i: usize| le32(r, i * 4);
        let name = self.str_at(f(0)?, f(1)?)?;
        let module = self.str_at(f(2)?, f(3)?)?;
        let flags = f(7)?;
        let namespace = if flags & 2 != 0 {
            Some(self.str_at(f(4)?, f(5)?)?)
        } else {
            None
        };
        let crc = (flags & 1 != 0).then_some(f(6)?);
        Some((
            name,
            Export {
                crc,
                module,
                namespace,
            },
        ))
    }
    fn get(&self, name: &str) -> Option<Export<'_>> {
        let slots = self.bytes().get(self.slots.clone())?;
        let n = slots.len() / 4;
        if n == 0 {
            return None;
        }
        let (mut i, tag) = place(name.as_bytes(), n - 1);
        for _ in 0..n {
            let s = le32(slots, i * 4)?;
            if s == 0 {
                return None;
            }
            if s >> 24 == tag >> 24 {
                let k = (s & 0xff_ffff).checked_sub(1)? as usize;
                if let Some((got, e)) = self.entry(k) {
                    if got == name {
                        return Some(e);
                    }
                }
            }
            i = (i + 1) & (n - 1);
        }
        None
    }
}

impl std::fmt::Debug for ExportMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The first slot to probe for `name` and its tag. FxHash's product is mixed once more and
/// its high bits pick the slot (its low bits cluster on names that differ in their last
/// bytes, as `foo_1`, `foo_2` do).
fn place(name: &[u8], mask: usize) -> (usize, u32) {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(name);
    let h = h.finish().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let slot = (h >> 32) as usize ^ (h as usize >> 7);
    (slot & mask, h as u32 | 1)
}

impl ExportMap {
    /// Room for `n` symbols without growing.
    pub fn with_capacity(n: usize) -> Self {
        ExportMap {
            text: Vec::new(),
            recs: Vec::with_capacity(n),
            slots: vec![0; slots_for(n)],
            mapped: None,
        }
    }

    /// [`ExportMap::with_capacity`] with its slots written now, in steps with reschedule
    /// points: left to the inserts, their first touches (a page each, at random) come
    /// hundreds in a row between two clock reads.
    pub fn with_capacity_with(n: usize, resched: &mut Resched) -> Result<Self, Cancelled> {
        Ok(ExportMap {
            text: Vec::new(),
            recs: Vec::with_capacity(n),
            slots: klpsym_core::bulk::filled_vec(slots_for(n), 0, resched)?,
            mapped: None,
        })
    }

    /// Frees the map in steps with reschedule points (its text, records and slots are
    /// megabytes for a kernel's exports).
    pub fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        let ExportMap {
            text,
            recs,
            slots,
            mapped,
        } = self;
        drop(mapped);
        klpsym_core::bulk::free_with_points(text, resched)?;
        klpsym_core::bulk::free_with_points(recs, resched)?;
        klpsym_core::bulk::free_with_points(slots, resched)
    }

    /// How many symbols.
    pub fn len(&self) -> usize {
        match &self.mapped {
            Some(m) => m.len(),
            None => self.recs.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn str_at(&self, s: Span) -> &str {
        // `text` is valid UTF-8 and spans are cut at ASCII tabs, newlines or appended
        // strings' ends, so each is valid on its own; checked anyway (no unsafe).
        std::str::from_utf8(&self.text[s.at..s.at + s.len]).unwrap_or_default()
    }

    fn export(&self, r: &Rec) -> Export<'_> {
        Export {
            crc: r.crc,
            module: self.str_at(r.module),
            namespace: (r.namespace.len > 0).then(|| self.str_at(r.namespace)),
        }
    }

    /// The slot that holds `name`, or the empty slot where it would go, and its tag.
    fn probe(&self, name: &[u8]) -> (usize, u32) {
        let mask = self.slots.len() - 1;
        let (mut i, tag) = place(name, mask);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return (i, tag);
            }
            if (s >> 32) as u32 == tag {
                let n = self.recs[(s as u32 - 1) as usize].name;
                if &self.text[n.at..n.at + n.len] == name {
                    return (i, tag);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The symbol named `name`.
    pub fn get(&self, name: &str) -> Option<Export<'_>> {
        if let Some(m) = &self.mapped {
            return m.get(name);
        }
        if self.slots.is_empty() {
            return None;
        }
        match self.slots[self.probe(name.as_bytes()).0] {
            0 => None,
            s => Some(self.export(&self.recs[(s as u32 - 1) as usize])),
        }
    }

    /// True when `name` is exported.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every symbol, in the order first inserted.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Export<'_>)> + '_ {
        (0..self.len()).filter_map(move |k| match &self.mapped {
            Some(m) => m.entry(k),
            None => {
                let r = &self.recs[k];
                Some((self.str_at(r.name), self.export(r)))
            }
        })
    }

    /// Every symbol's entry, in the order first inserted.
    pub fn values(&self) -> impl Iterator<Item = Export<'_>> + '_ {
        self.iter().map(|(_, e)| e)
    }

    /// Appends the map's encoding (read back in place by [`ExportMap::view`]); `false` when
    /// it does not fit the encoding's 32-bit offsets (nothing is appended then). A reschedule
    /// point every 4,096 records.
    pub fn encode(&self, out: &mut Vec<u8>, rs: &mut Resched) -> Result<bool, Cancelled> {
        if self.mapped.is_some() {
            return self.copied(0).encode_parts(out, true, rs);
        }
        self.encode_parts(out, true, rs)
    }

    /// Appends the map's encoding without its text: the records and slots over a text the
    /// reader already holds (a Module.symvers' own bytes, as [`parse_symvers_text`] kept them;
    /// read back by [`ExportMap::view_index`]). `false` as for [`ExportMap::encode`], and for
    /// a map read in place (its text is not the file's).
    pub fn encode_index(&self, out: &mut Vec<u8>, rs: &mut Resched) -> Result<bool, Cancelled> {
        if self.mapped.is_some() {
            return Ok(false);
        }
        self.encode_parts(out, false, rs)
    }

    fn encode_parts(
        &self,
        out: &mut Vec<u8>,
        with_text: bool,
        rs: &mut Resched,
    ) -> Result<bool, Cancelled> {
        // Records are numbered in 24 bits in the encoded slots, offsets are 32-bit.
        if self.recs.len() >= 1 << 24 || u32::try_from(self.text.len()).is_err() {
            return Ok(false);
        }
        // The encoded table is sized for its records alone (load at most 3/4, not the
        // in-memory 1/2): a kernel's entry must stay smaller than its image.
        let nslots = (self.recs.len() * 4 / 3 + 1).next_power_of_two();
        let mut slots = vec![0u32; nslots];
        for (k, r) in self.recs.iter().enumerate() {
            if k % 4096 == 0 {
                rs.tick_step()?;
            }
            let (mut i, tag) = place(&self.text[r.name.at..r.name.at + r.name.len], nslots - 1);
            while slots[i] != 0 {
                i = (i + 1) & (nslots - 1);
            }
            slots[i] = (tag >> 24) << 24 | (k as u32 + 1);
        }
        let text: &[u8] = if with_text { &self.text } else { &[] };
        out.reserve(16 + text.len() + self.recs.len() * REC_BYTES + nslots * 4);
        out.extend_from_slice(&(self.text.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.recs.len() as u32).to_le_bytes());
        out.extend_from_slice(&(nslots as u32).to_le_bytes());
        out.extend_from_slice(text);
        for (k, r) in self.recs.iter().enumerate() {
            if k % 4096 == 0 {
                rs.tick_step()?;
            }
            let flags = u32::from(r.crc.is_some()) | (u32::from(r.namespace.len > 0) << 1);
            for v in [
                r.name.at,
                r.name.len,
                r.module.at,
                r.module.len,
                r.namespace.at,
                r.namespace.len,
                r.crc.unwrap_or(0) as usize,
                flags as usize,
            ] {
                // Spans lie inside the text, whose length fits in 32 bits.
                out.extend_from_slice(&(v as u32).to_le_bytes());
            }
        }
        for s in slots {
            out.extend_from_slice(&s.to_le_bytes());
        }
        Ok(true)
    }

    /// The map encoded at `range` of `backing`, read in place; `None` when the sizes do not
    /// add up (its contents are checked as they are read).
    pub fn view(backing: &Backing, range: Range<usize>) -> Option<ExportMap> {
        Self::view_parts(backing, range, None)
    }

    /// The map whose records and slots ([`ExportMap::encode_index`]) are at `range` of
    /// `index`, over all of `text`; `None` when the sizes do not add up, or `text` is not as
    /// long as the text the index was made over.
    pub fn view_index(text: &Backing, index: &Backing, range: Range<usize>) -> Option<ExportMap> {
        Self::view_parts(index, range, Some(text))
    }

    fn view_parts(
        backing: &Backing,
        range: Range<usize>,
        text_apart: Option<&Backing>,
    ) -> Option<ExportMap> {
        let b = (**backing).as_ref().get(range.clone())?;
        let text_len = usize::try_from(u64::from_le_bytes(b.get(..8)?.try_into().ok()?)).ok()?;
        let nrecs = le32(b, 8)? as usize;
        let nslots = le32(b, 12)? as usize;
        let start = range.start.checked_add(16)?;
        let (text_backing, text, recs_at) = match text_apart {
            None => {
                let end = start.checked_add(text_len)?;
                (backing, start..end, end)
            }
            Some(t) => {
                if (**t).as_ref().len() != text_len {
                    return None;
                }
                (t, 0..text_len, start)
            }
        };
        let recs = recs_at..recs_at.checked_add(nrecs.checked_mul(REC_BYTES)?)?;
        let slots = recs.end..recs.end.checked_add(nslots.checked_mul(4)?)?;
        let fits = slots.end == range.end
            && (nslots == 0 && nrecs == 0 || nslots.is_power_of_two() && nslots > nrecs);
        fits.then(|| ExportMap {
            mapped: Some(Mapped {
                text_backing: text_backing.clone(),
                text,
                backing: backing.clone(),
                recs,
                slots,
            }),
            ..ExportMap::default()
        })
    }

    fn append(&mut self, s: &str) -> Span {
        let at = self.text.len();
        self.text.extend_from_slice(s.as_bytes());
        Span { at, len: s.len() }
    }

    /// Adds `name` (or replaces its entry).
    pub fn insert(&mut self, name: &str, e: Export<'_>) {
        if self.mapped.is_some() {
            // Read in place: copied into memory first (never done by klpsym itself).
            *self = self.copied(1);
        }
        let name_span = self.append(name);
        // The last module appended is reused: most sources name one module ("vmlinux").
        let module = match self.recs.last() {
            Some(r) if self.str_at(r.module) == e.module => r.module,
            _ => self.append(e.module),
        };
        let namespace = match e.namespace {
            Some(ns) => self.append(ns),
            None => Span::default(),
        };
        self.put(Rec {
            name: name_span,
            module,
            namespace,
            crc: e.crc,
        });
    }

    /// An in-memory copy with room for `extra` more symbols.
    fn copied(&self, extra: usize) -> ExportMap {
        let mut owned = ExportMap::with_capacity(self.len() + extra);
        for (n, e) in self.iter() {
            owned.insert(n, e);
        }
        owned
    }

    /// Adds a record whose strings are already in `text`.
    fn put(&mut self, rec: Rec) {
        if (self.recs.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let name = &self.text[rec.name.at..rec.name.at + rec.name.len];
        let (i, tag) = self.probe(name);
        match self.slots[i] {
            0 => {
                self.recs.push(rec);
                self.slots[i] = u64::from(tag) << 32 | self.recs.len() as u64;
            }
            s => self.recs[(s as u32 - 1) as usize] = rec,
        }
    }

    fn grow(&mut self) {
        let n = slots_for((self.recs.len() + 1).max(self.recs.capacity()));
        self.slots = vec![0; n];
        let mask = n - 1;
        for (k, r) in self.recs.iter().enumerate() {
            let (mut i, tag) = place(&self.text[r.name.at..r.name.at + r.name.len], mask);
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = u64::from(tag) << 32 | (k as u64 + 1);
        }
    }
}

/// Slots for `n` records: a power of two, at least 2n and 16.
fn slots_for(n: usize) -> usize {
    (n.saturating_mul(2)).max(16).next_power_of_two()
}

/// An entry as serialized: a map from name to this.
#[derive(serde::Serialize, serde::Deserialize)]
struct EntryText<'a> {
    crc: Option<u32>,
    #[serde(borrow)]
    module: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    namespace: Option<std::borrow::Cow<'a, str>>,
}

impl serde::Serialize for ExportMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.len()))?;
        for (name, e) in self.iter() {
            m.serialize_entry(
                name,
                &EntryText {
                    crc: e.crc,
                    module: e.module.into(),
                    namespace: e.namespace.map(Into::into),
                },
            )?;
        }
        m.end()
    }
}

impl<'de> serde::Deserialize<'de> for ExportMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ExportMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of exported symbols")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<ExportMap, A::Error> {
                let mut m = ExportMap::with_capacity(a.size_hint().unwrap_or(0));
                while let Some((name, e)) =
                    a.next_entry::<std::borrow::Cow<'de, str>, EntryText<'de>>()?
                {
                    m.insert(
                        &name,
                        Export {
                            crc: e.crc,
                            module: &e.module,
                            namespace: e.namespace.as_deref(),
                        },
                    );
                }
                Ok(m)
            }
        }
        d.deserialize_map(V)
    }
}

/// Why a Module.symvers' text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SymversError {
    /// A line that is not `CRC<TAB>NAME<TAB>MODULE<TAB>TYPE[<TAB>NAMESPACE]`.
    #[error("line {line}: {what} (expected CRC<TAB>NAME<TAB>MODULE<TAB>TYPE)")]
    Line {
        /// 1-based.
        line: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// A reschedule point said stop.
    #[error("cancelled")]
    Cancelled(#[from] Cancelled),
}

/// The exports a Module.symvers' text (`CRC<TAB>NAME<TAB>MODULE<TAB>EXPORT_TYPE
/// [<TAB>NAMESPACE]`, decompressed already) lists; the text becomes the map's own. `source`
/// names it in reports. Errors name the line, in line order.
pub fn parse_symvers_text(
    text: Vec<u8>,
    source: String,
    resched: &mut Resched,
) -> Result<Exports, SymversError> {
    // Where the text stops being UTF-8 is reported as that line's error, in line order with
    // the others; the rest is then known valid.
    let bad_utf8 = std::str::from_utf8(&text)
        .err()
        .map(|e| memchr::memchr_iter(b'\n', &text[..e.valid_up_to()]).count());
    // One record per line: sized once instead of growing (and rehashing) ~15 times.
    let lines = memchr::memchr_iter(b'\n', &text).count() + 1;
    let mut map = ExportMap::with_capacity(lines);
    let len = text.len();
    map.text = text;
    let mut start = 0;
    let mut i = 0;
    while start < len {
        resched.tick()?;
        let end = memchr::memchr(b'\n', &map.text[start..]).map_or(len, |n| start + n);
        let bad = |what: &'static str| SymversError::Line { line: i + 1, what };
        if end > start {
            if bad_utf8 == Some(i) {
                return Err(bad("not UTF-8"));
            }
            let f = fields(&map.text, start, end);
            let [Some(crc), Some(name), Some(module), Some(_type)] = [f[0], f[1], f[2], f[3]]
            else {
                return Err(bad("fewer than 4 fields"));
            };
            let crc = hex_u32(&map.text[crc.at..crc.at + crc.len])
                .ok_or_else(|| bad("the CRC is not hex"))?;
            map.put(Rec {
                name,
                module,
                namespace: f[4].unwrap_or_default(),
                crc: Some(crc),
            });
        }
        start = end + 1;
        i += 1;
    }
    Ok(Exports {
        source,
        symbols: map,
    })
}

/// A CRC as Module.symvers writes it (`0x%08x`); `0x` may be left out.
fn hex_u32(b: &[u8]) -> Option<u32> {
    let b = b.strip_prefix(b"0x").unwrap_or(b);
    u32::from_str_radix(std::str::from_utf8(b).ok()?, 16).ok()
}

/// The first five tab-separated fields of `text[start..end]`.
fn fields(text: &[u8], start: usize, end: usize) -> [Option<Span>; 5] {
    let mut out = [None; 5];
    let mut at = start;
    for slot in &mut out {
        let stop = memchr::memchr(b'\t', &text[at..end]).map_or(end, |n| at + n);
        *slot = Some(Span { at, len: stop - at });
        if stop == end {
            break;
        }
        at = stop + 1;
    }
    out
}

#[cfg(test)]
mod tests;
