//! BTF bytes holding the structs a test names: the target's type information as
//! `/sys/kernel/btf/vmlinux` carries it, for the klp struct layouts.

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;

/// A struct to write with [`build_btf`]: name, size, members (name, byte offset).
pub type StructSpec<'a> = (&'a str, u32, &'a [(&'a str, u32)]);

/// Builds BTF bytes: an `int` named `long`, then each struct with its members (each of
/// that int type).
pub fn build_btf(structs: &[StructSpec<'_>]) -> Vec<u8> {
    let mut strings = vec![0u8];
    let mut add = |s: &str| {
        let o = strings.len() as u32;
        strings.extend_from_slice(s.as_bytes());
        strings.push(0);
        o
    };
    let mut types = Vec::new();
    // type 1: an int, so members have a type to point at
    let int_name = add("long");
    for v in [int_name, 1 << 24, 8, 64] {
        types.extend_from_slice(&v.to_le_bytes());
    }
    for (n, size, members) in structs {
        let no = add(n);
        for v in [no, (KIND_STRUCT << 24) | members.len() as u32, *size] {
            types.extend_from_slice(&v.to_le_bytes());
        }
        for (mn, off) in members.iter() {
            let mo = add(mn);
            for v in [mo, 1, off * 8] {
                types.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
    out.extend_from_slice(&[1, 0]);
    for v in [
        24u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&types);
    out.extend_from_slice(&strings);
    out
}
