//! One definition of a name with its position: the one shape every answer that lists
//! definitions uses (`sympos`, `lookup`, a check's ambiguity, a binding).
//!
//! Numbers stay numbers: addresses and sizes are `u64`; JSON renders them as `0x`-prefixed hex
//! (a u64 does not survive a JSON number in most readers) through [`hex`].

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::table::{SymbolId, SymbolTable, SIZE_UNKNOWN};

/// One definition of a name in one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// 1-based position among the name's definitions in its object, in kallsyms order: the
    /// `old_sympos` (or the `,N` of a klp symbol) that names it.
    pub position: u64,
    /// Its address; `None` when the source hides addresses. For an unplaced module symbol
    /// ([`Candidate::unplaced`]) an offset in its section.
    pub address: Option<u64>,
    /// The kallsyms type letter (`t`, `T`, `d`...).
    pub kind: char,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
    /// The object: `vmlinux` or a module name.
    pub object: String,
    /// True when `address` is an offset in the symbol's section: a module read from its `.ko`
    /// and not placed, which has no load address yet.
    pub unplaced: bool,
    /// The source file of its translation unit (DWARF: `fs/inode.c`; ELF FILE symbols:
    /// `inode.c`), when the source tells.
    pub file: Option<String>,
    /// The declaration line in `decl_file` (DWARF), when known.
    pub line: Option<u64>,
    /// The file holding `line`: `file` itself, or a header for a `static inline` copy.
    pub decl_file: Option<String>,
    /// The symbol in the table it was read from.
    pub id: SymbolId,
}

impl Candidate {
    /// How its address reads in text: `0xffffffff81000000`, `+0x150` for an unplaced module
    /// symbol, `(hidden)` when the source hides addresses.
    pub fn address_text(&self) -> String {
        match self.address {
            None => "(hidden)".to_string(),
            Some(a) if self.unplaced => format!("+{a:#x}"),
            Some(a) => hex(a),
        }
    }

    /// `fs/inode.c:432`, `fs/inode.c (include/linux/fs.h:12)` for a `static inline` copy
    /// declared in a header, the file alone without a line; `None` without a file.
    pub fn file_text(&self) -> Option<String> {
        let f = self.file.as_deref()?;
        Some(file_line_text(f, self.decl_file.as_deref(), self.line))
    }
}

/// `fs/inode.c:432`, `fs/inode.c (include/linux/fs.h:12)` for a `static inline` copy declared
/// in a header, or the file alone.
pub fn file_line_text(file: &str, decl_file: Option<&str>, line: Option<u64>) -> String {
    match (decl_file, line) {
        (Some(d), Some(l)) if crate::table::file_matches(d, file) => format!("{d}:{l}"),
        (Some(d), Some(l)) => format!("{file} ({d}:{l})"),
        _ => file.to_string(),
    }
}

/// Describes `ids` (one object's matches in kernel order) as candidates, positions from 1.
pub fn candidates(table: &SymbolTable, ids: &[SymbolId]) -> Vec<Candidate> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| candidate(table, id, i as u64 + 1))
        .collect()
}

/// Symbol `id` of `table` as the candidate at `position`.
pub fn candidate(table: &SymbolTable, id: SymbolId, position: u64) -> Candidate {
    let s = table.symbol(id);
    let info = table.object_info(s.object);
    let hidden = table.addresses_hidden();
    let size = if hidden || info.unplaced {
        SIZE_UNKNOWN
    } else {
        table.size(id)
    };
    Candidate {
        position,
        address: (!hidden).then_some(s.addr),
        kind: s.kind,
        size: (size != SIZE_UNKNOWN).then_some(size),
        object: info.name.clone(),
        unplaced: info.unplaced,
        file: table.file(id).map(str::to_string),
        line: None,
        decl_file: None,
        id,
    }
}

/// The JSON shape (docs/json.md): `{"position", "address", "type", "size", "object",
/// "unplaced", "relative", "file", "line", "decl_file"}`; `relative` is `unplaced`'s first
/// name, kept for readers of older output.
impl Serialize for Candidate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_fields(s, false)
    }
}

impl Candidate {
    /// The JSON shape, with `"kind"` (the type letter's name in a check's problems) added
    /// when `with_kind`.
    fn serialize_fields<S: Serializer>(&self, s: S, with_kind: bool) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Candidate", 10 + usize::from(with_kind))?;
        st.serialize_field("position", &self.position)?;
        st.serialize_field("address", &self.address.map(hex))?;
        st.serialize_field("type", &self.kind.to_string())?;
        if with_kind {
            st.serialize_field("kind", &self.kind)?;
        }
        st.serialize_field("size", &self.size.map(|v| format!("{v:#x}")))?;
        st.serialize_field("object", &self.object)?;
        st.serialize_field("unplaced", &self.unplaced)?;
        st.serialize_field("relative", &self.unplaced)?;
        st.serialize_field("file", &self.file)?;
        st.serialize_field("line", &self.line)?;
        st.serialize_field("decl_file", &self.decl_file)?;
        st.end()
    }
}

/// Serializes a check problem's candidates as docs/json.md gives them there (the candidate's
/// shape with `"kind"`, the type letter, as that list first named it).
pub fn serialize_problem_candidates<S: Serializer>(
    list: &[Candidate],
    s: S,
) -> Result<S::Ok, S::Error> {
    struct WithKind<'a>(&'a Candidate);
    impl Serialize for WithKind<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.serialize_fields(s, true)
        }
    }
    s.collect_seq(list.iter().map(WithKind))
}

/// `0x`-prefixed, zero-padded hex, as JSON and text carry addresses: `0xffffffff81000000`.
pub fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// Bytes as JSON and text carry them: two lowercase hex digits each, in memory order, without
/// a prefix (`00002081`).
pub fn hex_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Serde helpers: numbers kept as `u64` in Rust, rendered as JSON strings of hex.
pub mod hex_serde {
    use serde::Serializer;

    /// An address: `"0xffffffff81000000"` (16 digits).
    pub fn addr<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(*v))
    }

    /// An optional address: `"0xffffffff81000000"` or `null`.
    pub fn addr_opt<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.serialize_str(&super::hex(*a)),
            None => s.serialize_none(),
        }
    }

    /// A list of addresses.
    pub fn addr_list<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|a| super::hex(*a)))
    }

    /// An optional size or offset: `"0x10"` or `null`.
    pub fn num_opt<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.serialize_str(&format!("{a:#x}")),
            None => s.serialize_none(),
        }
    }

    /// A size or offset: `"0x10"`.
    pub fn num<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }

    /// Optional bytes, in memory order ([`hex_bytes`](super::hex_bytes)): `"00002081"` or
    /// `null`.
    pub fn bytes_opt<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&super::hex_bytes(b)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c() -> Candidate {
        Candidate {
            position: 2,
            address: Some(0xffffffff81000010),
            kind: 't',
            size: Some(0x10),
            object: "vmlinux".into(),
            unplaced: false,
            file: Some("fs/inode.c".into()),
            line: Some(432),
            decl_file: Some("fs/inode.c".into()),
            id: SymbolId(7),
        }
    }

    #[test]
    fn json_keeps_the_documented_shape_with_numbers_as_hex() {
        let v = serde_json::to_value(c()).unwrap();
        assert_eq!(v["address"], "0xffffffff81000010");
        assert_eq!(v["size"], "0x10");
        assert_eq!(v["type"], "t");
        // `unplaced`, and its deprecated older name beside it.
        assert_eq!(v["unplaced"], false);
        assert_eq!(v["relative"], v["unplaced"]);
        assert!(v.get("kind").is_none());
        assert!(v.get("id").is_none());
        #[derive(Serialize)]
        struct P {
            #[serde(serialize_with = "serialize_problem_candidates")]
            c: Vec<Candidate>,
        }
        let p = serde_json::to_value(P { c: vec![c()] }).unwrap();
        assert_eq!(p["c"][0]["kind"], "t");
        assert_eq!(p["c"][0]["position"], 2);
    }

    #[test]
    fn bytes_are_two_lowercase_digits_each_in_memory_order() {
        assert_eq!(hex_bytes(&[0, 0, 0x20, 0x81]), "00002081");
        assert_eq!(hex_bytes(&[0xAB, 0x0c]), "ab0c");
        assert_eq!(hex_bytes(&[]), "");
        #[derive(Serialize)]
        struct B {
            #[serde(serialize_with = "hex_serde::bytes_opt")]
            b: Option<Vec<u8>>,
        }
        let j = |b| serde_json::to_string(&B { b }).unwrap();
        assert_eq!(j(Some(vec![0xff, 1])), r#"{"b":"ff01"}"#);
        assert_eq!(j(None), r#"{"b":null}"#);
    }

    #[test]
    fn address_text_says_unplaced_and_hidden() {
        let mut x = c();
        assert_eq!(x.address_text(), "0xffffffff81000010");
        x.unplaced = true;
        x.address = Some(0x150);
        assert_eq!(x.address_text(), "+0x150");
        x.address = None;
        assert_eq!(x.address_text(), "(hidden)");
        assert_eq!(c().file_text().as_deref(), Some("fs/inode.c:432"));
    }
}
