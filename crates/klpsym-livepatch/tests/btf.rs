//! Struct layouts read from BTF, against BTF written by the test kit.

use klpsym_livepatch::btf::{layouts_from_btf, BtfError};
use klpsym_testkit::btf::build_btf;

fn sample(func_size: u32) -> Vec<u8> {
    build_btf(&[
        (
            "klp_func",
            func_size,
            &[
                ("old_name", 0),
                ("new_func", 8),
                ("old_sympos", 16),
                ("nop", 148),
            ],
        ),
        ("unrelated", 4, &[("x", 0)]),
        (
            "klp_object",
            168,
            &[("name", 0), ("funcs", 8), ("callbacks", 16)],
        ),
        ("klp_patch", 200, &[("mod", 0), ("objs", 8), ("states", 16)]),
    ])
}

#[test]
fn reads_layouts() {
    let l = layouts_from_btf(&sample(152)).unwrap();
    assert_eq!(
        (l.func_size, l.object_size, l.patch_objs, l.func_old_sympos),
        (152, 168, 8, 16)
    );
    assert_eq!(l.source, "btf");
    assert_eq!(layouts_from_btf(&sample(160)).unwrap().func_size, 160);
}

#[test]
fn rejects_broken_btf() {
    assert!(matches!(
        layouts_from_btf(b"nope"),
        Err(BtfError::Malformed(_))
    ));
    let mut b = sample(152);
    b.truncate(40);
    assert!(matches!(layouts_from_btf(&b), Err(BtfError::Malformed(_))));
    let only = build_btf(&[("klp_func", 152, &[("old_name", 0)])]);
    assert!(matches!(layouts_from_btf(&only), Err(BtfError::Missing(_))));
    // unknown kind
    let mut b = sample(152);
    b[24 + 7] = 31; // kind byte of type 1 -> 31
    assert!(layouts_from_btf(&b).is_err());
}
