//! Struct layouts of `klp_patch`, `klp_object` and `klp_func` from the target's BTF.
//!
//! BTF (Documentation/bpf/btf.rst) is what `/sys/kernel/btf/vmlinux` holds and what the
//! image's `.BTF` section holds: a 24-byte header (magic 0xeB9F, version, flags, hdr_len,
//! type_off/len, str_off/len relative to the header's end), a type section of variable-length
//! records (12-byte `btf_type` + kind-specific tail), and a string section. Only what is
//! needed to find three structs and their members is decoded; every record is bounds-checked
//! and unknown kinds stop the walk with an error (their length is unknown).

use crate::layouts::StructLayouts;

pub use klpsym_elf::btf::{find_structs, BtfError, BtfStruct};

/// The livepatch struct layouts from BTF bytes.
pub fn layouts_from_btf(btf: &[u8]) -> Result<StructLayouts, BtfError> {
    let f = find_structs(btf, &KLP_STRUCTS)?;
    layouts_from_structs(&f)
}

/// The structs [`layouts_from_structs`] reads, in its order.
pub const KLP_STRUCTS: [&str; 3] = ["klp_patch", "klp_object", "klp_func"];

/// The livepatch struct layouts from the structs of [`KLP_STRUCTS`], found (in that order)
/// by [`find_structs`] in a target's BTF.
pub fn layouts_from_structs(f: &[Option<BtfStruct>]) -> Result<StructLayouts, BtfError> {
    if f.len() != KLP_STRUCTS.len() {
        return Err(BtfError::Malformed(format!(
            "{} structs given, {} expected",
            f.len(),
            KLP_STRUCTS.len()
        )));
    }
    let get = |i: usize, n: &str| {
        f[i].clone()
            .ok_or_else(|| BtfError::Missing(format!("struct {n}")))
    };
    let (p, o, fu) = (
        get(0, "klp_patch")?,
        get(1, "klp_object")?,
        get(2, "klp_func")?,
    );
    let l = StructLayouts {
        patch_objs: p.offset("klp_patch", "objs")?,
        object_name: o.offset("klp_object", "name")?,
        object_funcs: o.offset("klp_object", "funcs")?,
        object_size: o.size,
        func_old_name: fu.offset("klp_func", "old_name")?,
        func_new_func: fu.offset("klp_func", "new_func")?,
        func_old_sympos: fu.offset("klp_func", "old_sympos")?,
        func_size: fu.size,
        source: "btf",
    };
    if !l.is_consistent() {
        return Err(BtfError::Malformed(format!("inconsistent layouts {l:?}")));
    }
    Ok(l)
}
