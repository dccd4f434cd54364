//! A table as bytes and back, for caches: fixed-width little-endian records read back with
//! bounds checks and no text parsing. Every field is validated on the way in (offsets inside
//! the arena, object ids inside the object list, UTF-8 names), so a damaged or foreign buffer
//! is an error, never a panic or a wrong table.

use std::sync::OnceLock;

use crate::resched::{Cancelled, Resched};
use crate::storage::SymRec;
use crate::storage::{Names, Records};
use crate::table::SymbolTable;
use crate::{ObjectInfo, ObjectKind};

const MAGIC: &[u8; 8] = b"KSYMTAB2";

/// Why bytes are not a table.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are damaged, truncated or of another format.
    #[error("not a klpsym table encoding: {0}")]
    Invalid(String),
    /// The operation was cancelled at a reschedule point.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

fn bad(what: impl Into<String>) -> DecodeError {
    DecodeError::Invalid(what.into())
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad(format!("truncated in {what}")))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn str(&mut self, what: &str) -> Result<String, DecodeError> {
        let n = self.u32(what)? as usize;
        let s = self.take(n, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| bad(format!("{what} is not UTF-8")))
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

const SYM_BYTES: usize = std::mem::size_of::<SymRec>();

/// Records read one by one (little-endian fields; any alignment).
fn owned_records(recs: &[u8], resched: &mut Resched) -> Result<Vec<SymRec>, Cancelled> {
    let mut syms = Vec::with_capacity(recs.len() / SYM_BYTES);
    for rec in recs.chunks_exact(SYM_BYTES) {
        resched.tick()?;
        let le32 = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().expect("4"));
        syms.push(SymRec {
            addr: u64::from_le_bytes(rec[..8].try_into().expect("8")),
            name_off: le32(8),
            name_len: le32(12),
            object: le32(16),
            kind: rec[20],
            pad: [0; 3],
        });
    }
    Ok(syms)
}

impl SymbolTable {
    /// Appends the table's encoding to `out` (indexes are not kept: they are rebuilt).
    pub fn encode(&self, out: &mut Vec<u8>, resched: &mut Resched) -> Result<(), Cancelled> {
        out.extend_from_slice(MAGIC);
        out.push(self.addr_width);
        out.push(self.addresses_hidden as u8);
        out.push(self.source_sizes.is_some() as u8);
        out.push(self.source_files.is_some() as u8);
        out.extend_from_slice(&(self.objects.len() as u32).to_le_bytes());
        for o in &self.objects {
            put_str(out, &o.name);
            out.push(match o.kind {
                ObjectKind::Vmlinux => 0,
                ObjectKind::Module => 1,
                ObjectKind::Pseudo => 2,
            });
            out.extend_from_slice(&o.symbol_count.to_le_bytes());
            out.push(o.unplaced as u8);
        }
        out.extend_from_slice(&(self.names.len() as u64).to_le_bytes());
        out.extend_from_slice(self.names.bytes());
        out.extend_from_slice(&(self.syms.len() as u32).to_le_bytes());
        // The records start 8-aligned from the start of `out` (a pad count, then zeros), so
        // a reader whose buffer is aligned the same way (a mapped cache entry) reads them in
        // place.
        let pad = (8 - (out.len() + 1) % 8) % 8;
        out.push(pad as u8);
        out.resize(out.len() + pad, 0);
        out.reserve(self.syms.len() * SYM_BYTES);
        for r in self.syms.iter() {
            resched.tick()?;
            out.extend_from_slice(&r.addr.to_le_bytes());
            out.extend_from_slice(&r.name_off.to_le_bytes());
            out.extend_from_slice(&r.name_len.to_le_bytes());
            out.extend_from_slice(&r.object.to_le_bytes());
            out.push(r.kind);
            out.extend_from_slice(&[0; 3]);
        }
        if let Some(sizes) = &self.source_sizes {
            for s in sizes {
                resched.tick()?;
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        if let Some((idx, names)) = &self.source_files {
            out.extend_from_slice(&(names.len() as u32).to_le_bytes());
            for n in names {
                put_str(out, n);
            }
            for i in idx {
                resched.tick()?;
                out.extend_from_slice(&i.to_le_bytes());
            }
        }
        Ok(())
    }

    /// Appends the table's name index (built now when it is not yet) to `out`, for a reader
    /// of the same build to use in place with [`attach_name_index`](Self::attach_name_index)
    /// instead of building it. `out` should be 8-aligned where the index starts.
    pub fn encode_name_index(
        &self,
        out: &mut Vec<u8>,
        resched: &mut Resched,
    ) -> Result<(), Cancelled> {
        self.build_name_index(resched)?;
        match self.name_index.get() {
            Some(idx) => idx.encode(out, resched),
            None => Ok(()),
        }
    }

    /// Uses the name index at `range` of `backing` (what
    /// [`encode_name_index`](Self::encode_name_index) wrote for this table, by this build) in
    /// place; false when those
    /// bytes are not an index for a table of this size, or an index is already built (the
    /// index is then built when first needed, as without one).
    pub fn attach_name_index(
        &self,
        backing: &crate::Backing,
        range: std::ops::Range<usize>,
    ) -> bool {
        match crate::name_index::NameIndex::view(backing, range, self.syms.len()) {
            Some(idx) => self.name_index.set(idx).is_ok(),
            None => false,
        }
    }

    /// Reads a table [`encode`](Self::encode) wrote; returns it and the bytes it used.
    pub fn decode(
        bytes: &[u8],
        resched: &mut Resched,
    ) -> Result<(SymbolTable, usize), DecodeError> {
        Self::decode_from(bytes, None, resched)
    }

    /// [`decode`](Self::decode) of the table at `at` in `backing`, reading its names and
    /// records in place (kept alive by the table) instead of copying them: for a memory-mapped
    /// cache entry, whose megabytes are then never copied into fresh memory. Checked as
    /// thoroughly as `decode`; records that are not aligned in `backing` are copied.
    pub fn decode_in_place(
        backing: &crate::Backing,
        at: usize,
        resched: &mut Resched,
    ) -> Result<(SymbolTable, usize), DecodeError> {
        let bytes = (**backing)
            .as_ref()
            .get(at..)
            .ok_or_else(|| bad("the table lies outside its buffer"))?;
        Self::decode_from(bytes, Some((backing, at)), resched)
    }

    fn decode_from(
        bytes: &[u8],
        backing: Option<(&crate::Backing, usize)>,
        resched: &mut Resched,
    ) -> Result<(SymbolTable, usize), DecodeError> {
        let mut r = Reader { b: bytes, at: 0 };
        if r.take(8, "magic")? != MAGIC {
            return Err(bad("wrong magic"));
        }
        let addr_width = r.u8("header")?;
        let hidden = r.u8("header")? != 0;
        let has_sizes = r.u8("header")? != 0;
        let has_files = r.u8("header")? != 0;
        if !matches!(addr_width, 8 | 16) {
            return Err(bad(format!("address width {addr_width}")));
        }
        let n_objects = r.u32("objects")? as usize;
        if n_objects == 0 || n_objects > bytes.len() {
            return Err(bad(format!("{n_objects} objects")));
        }
        let mut objects = Vec::with_capacity(n_objects);
        for _ in 0..n_objects {
            resched.tick()?;
            let name = r.str("object name")?;
            let kind = match r.u8("object kind")? {
                0 => ObjectKind::Vmlinux,
                1 => ObjectKind::Module,
                2 => ObjectKind::Pseudo,
                k => return Err(bad(format!("object kind {k}"))),
            };
            let symbol_count = r.u32("object")?;
            let unplaced = r.u8("object")? != 0;
            objects.push(ObjectInfo {
                name,
                kind,
                symbol_count,
                unplaced,
            });
        }
        if objects[0].kind != ObjectKind::Vmlinux {
            return Err(bad("object 0 is not vmlinux"));
        }
        let names_len = usize::try_from(r.u64("names")?)
            .ok()
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| bad("names length"))?;
        let names_at = r.at;
        let arena = r.take(names_len, "names")?;
        let names = match backing {
            Some((b, base)) => {
                // Checked once (in steps, never in one stretch), then read in place.
                if crate::bulk::validate_utf8(arena, resched)?.is_err() {
                    return Err(bad("names are not UTF-8"));
                }
                Names::Mapped(b.clone(), base + names_at..base + names_at + names_len)
            }
            None => {
                // Copied in steps, then checked once (in steps too).
                let mut copy = Vec::with_capacity(arena.len());
                crate::bulk::extend_from_slice(&mut copy, arena, resched)?;
                Names::Owned(
                    crate::table::utf8_exact(copy, resched)?
                        .ok_or_else(|| bad("names are not UTF-8"))?,
                )
            }
        };
        let n = r.u32("symbols")? as usize;
        let pad = r.u8("padding")? as usize;
        r.take(pad, "padding")?;
        let recs = r.take(
            n.checked_mul(SYM_BYTES)
                .ok_or_else(|| bad("symbol count"))?,
            "symbols",
        )?;
        let recs_at = r.at - recs.len();
        let view = backing
            .and_then(|(b, base)| Records::view(b, base + recs_at..base + recs_at + recs.len()));
        let syms = match view {
            Some(v) => v,
            None => Records::Owned(owned_records(recs, resched)?),
        };
        let mut counts = vec![0u32; n_objects];
        let name_bytes = names.bytes();
        // A UTF-8 character boundary: not a continuation byte (0b10xx_xxxx), or the end.
        let boundary = |i: usize| i == name_bytes.len() || name_bytes[i] as i8 >= -0x40;
        for s in syms.iter() {
            resched.tick()?;
            if !s.kind.is_ascii_graphic() {
                return Err(bad("a symbol type is not a letter"));
            }
            let end = s.name_off as usize + s.name_len as usize;
            if end > name_bytes.len() || !boundary(s.name_off as usize) || !boundary(end) {
                return Err(bad("a symbol name lies outside the names"));
            }
            let c = counts
                .get_mut(s.object as usize)
                .ok_or_else(|| bad("a symbol's object is not listed"))?;
            *c += 1;
        }
        if objects
            .iter()
            .zip(&counts)
            .any(|(o, &c)| o.symbol_count != c)
        {
            return Err(bad("object symbol counts disagree with the symbols"));
        }
        let source_sizes = if has_sizes {
            let raw = r.take(n * 8, "sizes")?;
            let mut v = Vec::with_capacity(n);
            for c in raw.chunks_exact(8) {
                resched.tick()?;
                v.push(u64::from_le_bytes(c.try_into().expect("8")));
            }
            Some(v)
        } else {
            None
        };
        let source_files = if has_files {
            let k = r.u32("files")? as usize;
            if k > bytes.len() {
                return Err(bad("file count"));
            }
            let mut fnames = Vec::with_capacity(k);
            for _ in 0..k {
                resched.tick()?;
                fnames.push(r.str("file name")?);
            }
            let raw = r.take(n * 4, "file indexes")?;
            let mut idx = Vec::with_capacity(n);
            for c in raw.chunks_exact(4) {
                resched.tick()?;
                let i = u32::from_le_bytes(c.try_into().expect("4"));
                if i != u32::MAX && i as usize >= k {
                    return Err(bad("a file index is out of range"));
                }
                idx.push(i);
            }
            Some((idx, fnames))
        } else {
            None
        };
        Ok((
            SymbolTable {
                names,
                syms,
                objects,
                source_sizes,
                source_files,
                addr_width,
                addresses_hidden: hidden,
                name_index: OnceLock::new(),
                addr_index: OnceLock::new(),
                stem_index: OnceLock::new(),
                walks: false,
                driver: std::sync::Mutex::new(Some(resched.sibling())),
                spans: OnceLock::new(),
                stem_walks: Default::default(),
            },
            r.at,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectId, SymbolTableBuilder};

    fn table() -> SymbolTable {
        let mut b = SymbolTableBuilder::with_capacity(8, 64);
        b.push(ObjectId::VMLINUX, 0xffffffff81000000, b'T', "_text")
            .unwrap();
        b.set_last_file("init/main.c");
        b.push(ObjectId::VMLINUX, 0xffffffff81000100, b't', "init_once")
            .unwrap();
        b.set_last_size(0x10);
        let m = b.object("ext4", ObjectKind::Module);
        b.set_unplaced(m, true);
        b.push(m, 0x40, b't', "init_once").unwrap();
        b.build()
    }

    fn lines(t: &SymbolTable) -> Vec<String> {
        t.iter()
            .map(|s| {
                format!(
                    "{:x} {} {} {:?} {:?} {}",
                    s.addr,
                    s.kind,
                    s.name,
                    t.file(s.id),
                    t.size(s.id),
                    t.object_info(s.object).name
                )
            })
            .collect()
    }

    #[test]
    fn a_table_round_trips_and_damage_is_an_error() {
        let t = table();
        let mut out = Vec::new();
        t.encode(&mut out, &mut Resched::none()).unwrap();
        let (back, used) = SymbolTable::decode(&out, &mut Resched::none()).unwrap();
        assert_eq!(used, out.len());
        assert_eq!(lines(&back), lines(&t));
        assert!(back.object_info(ObjectId(1)).unplaced);
        assert_eq!(back.by_name("init_once").count(), 2);
        // Every truncation and every single-byte change is caught or decodes to a valid table.
        for cut in 0..out.len() {
            assert!(
                SymbolTable::decode(&out[..cut], &mut Resched::none()).is_err(),
                "cut {cut}"
            );
        }
        for i in 0..out.len() {
            let mut d = out.clone();
            d[i] ^= 0xa5;
            if let Ok((t2, _)) = SymbolTable::decode(&d, &mut Resched::none()) {
                let _ = lines(&t2);
            }
        }
    }

    /// A buffer whose first byte is 8-aligned (a `Vec<u64>`'s bytes), holding `bytes` at `at`.
    fn backing(bytes: &[u8], at: usize) -> crate::Backing {
        struct Aligned(Vec<u64>, usize);
        impl AsRef<[u8]> for Aligned {
            fn as_ref(&self) -> &[u8] {
                &bytemuck::cast_slice::<u64, u8>(&self.0)[..self.1]
            }
        }
        let len = at + bytes.len();
        let mut words = vec![0u64; len.div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[at..len].copy_from_slice(bytes);
        std::sync::Arc::new(Aligned(words, len))
    }

    #[test]
    fn a_table_read_in_place_equals_the_copy_and_damage_is_an_error() {
        let t = table();
        let mut out = Vec::new();
        t.encode(&mut out, &mut Resched::none()).unwrap();
        // At an aligned offset the records are read in place; at the others they are copied.
        for at in [0usize, 8, 1, 3, 5] {
            let b = backing(&out, at);
            let (back, used) = SymbolTable::decode_in_place(&b, at, &mut Resched::none()).unwrap();
            assert_eq!(used, out.len());
            assert_eq!(lines(&back), lines(&t), "at {at}");
            assert_eq!(
                matches!(back.syms, Records::Mapped(..)),
                at % 8 == 0,
                "records in place at {at}"
            );
            assert!(matches!(back.names, Names::Mapped(..)));
            assert_eq!(back.by_name("init_once").count(), 2);
        }
        let b = backing(&out, 0);
        assert!(SymbolTable::decode_in_place(&b, out.len() + 1, &mut Resched::none()).is_err());
        // Damage in place is caught as in a copy: same verdict, same table.
        for i in 0..out.len() {
            let mut d = out.clone();
            d[i] ^= 0xa5;
            let copy = SymbolTable::decode(&d, &mut Resched::none());
            let b = backing(&d, 0);
            let mapped = SymbolTable::decode_in_place(&b, 0, &mut Resched::none());
            match (copy, mapped) {
                (Ok((c, _)), Ok((m, _))) => assert_eq!(lines(&c), lines(&m), "byte {i}"),
                (Err(_), Err(_)) => {}
                (c, m) => panic!("byte {i}: copy {:?} vs in place {:?}", c.is_ok(), m.is_ok()),
            }
        }
    }

    /// A table with repeated names, and names that collide in few slots.
    fn many_names() -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        for i in 0..300u64 {
            let name = format!("f{}", i % 97);
            b.push(ObjectId::VMLINUX, 0x1000 + i * 16, b't', &name)
                .unwrap();
        }
        b.build()
    }

    fn chains(t: &SymbolTable) -> Vec<Vec<u64>> {
        (0..100)
            .map(|i| t.by_name(&format!("f{i}")).map(|s| s.addr).collect())
            .collect()
    }

    #[test]
    fn a_name_index_read_in_place_answers_as_one_built() {
        let t = many_names();
        let mut all = Vec::new();
        t.encode(&mut all, &mut Resched::none()).unwrap();
        let pad = (8 - all.len() % 8) % 8;
        all.resize(all.len() + pad, 0);
        let at = all.len();
        t.encode_name_index(&mut all, &mut Resched::none()).unwrap();
        let b = backing(&all, 0);
        let (back, _) = SymbolTable::decode_in_place(&b, 0, &mut Resched::none()).unwrap();
        assert!(back.attach_name_index(&b, at..all.len()));
        assert!(back.name_indexed());
        assert_eq!(chains(&back), chains(&t));
        assert_eq!(back.distinct_names(), 97);
        assert_eq!(back.by_name("f99").count(), 0);
        // Not an index for this table: wrong range, wrong size, a built one already there.
        let (other, _) = SymbolTable::decode_in_place(&b, 0, &mut Resched::none()).unwrap();
        assert!(!other.attach_name_index(&b, at..all.len() - 4));
        assert!(!other.attach_name_index(&b, at + 4..all.len()));
        assert!(!back.attach_name_index(&b, at..all.len()));
        let small = table();
        assert!(!small.attach_name_index(&b, at..all.len()));
        // Damage anywhere in it gives answers (maybe wrong), never a panic or an endless walk.
        for i in (at..all.len()).step_by(3) {
            let mut d = all.clone();
            d[i] ^= 0xa5;
            let b = backing(&d, 0);
            let (damaged, _) = SymbolTable::decode_in_place(&b, 0, &mut Resched::none()).unwrap();
            if damaged.attach_name_index(&b, at..d.len()) {
                for c in chains(&damaged) {
                    assert!(c.len() <= 300, "byte {i}");
                }
            }
        }
    }
}
