use super::*;
use crate::object::ObjectKind;

fn sample() -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0x1000, b'T', "_text").unwrap();
    b.push(v, 0x1000, b'T', "start").unwrap();
    b.push(v, 0x1010, b't', "dup").unwrap();
    b.push(v, 0x1040, b't', "dup").unwrap();
    let m = b.object("mod_a", ObjectKind::Module);
    b.push(m, 0x9000, b't', "dup").unwrap();
    b.push(m, 0x8000, b'T', "exported").unwrap();
    b.build()
}

#[test]
fn objects_and_order() {
    let t = sample();
    assert_eq!(t.objects().len(), 2);
    assert_eq!(t.object_info(ObjectId(1)).name, "mod_a");
    assert_eq!(t.object_info(ObjectId(1)).symbol_count, 2);
    assert_eq!(t.object_info(ObjectId::VMLINUX).symbol_count, 4);
    let dups: Vec<_> = t.by_name("dup").map(|s| s.addr).collect();
    assert_eq!(dups, vec![0x1010, 0x1040, 0x9000]);
    let in_mod: Vec<_> = t.by_name_in("dup", ObjectId(1)).map(|s| s.addr).collect();
    assert_eq!(in_mod, vec![0x9000]);
    assert!(!t.addresses_hidden());
}

#[test]
fn variants_asked_a_few_at_a_time_walk_then_index_alike() {
    let make = || {
        let mut b = SymbolTableBuilder::new();
        let v = ObjectId::VMLINUX;
        for (i, n) in [
            "f.isra.0",
            "f",
            "g.cold",
            "f.part.1",
            "fx.isra.0",
            "f.",
            ".f",
        ]
        .iter()
        .enumerate()
        {
            b.push(v, 0x1000 + i as u64, b't', n).unwrap();
        }
        let m = b.object("m", ObjectKind::Module);
        b.push(m, 0x9000, b't', "f.cold").unwrap();
        b.build()
    };
    // The stem index's answers, on a table of its own.
    let reference = make();
    reference.build_stem_index(&mut Resched::none()).unwrap();
    let t = make();
    let mut walked_rounds = 0;
    for round in 0..STEM_WALKS + 3 {
        let before = t.stem_index.get().is_none();
        let got = t.variants_of_with("f", &mut Resched::none()).unwrap();
        let want: Vec<SymbolId> = reference.variants_of("f").map(|s| s.id).collect();
        assert_eq!(got, want, "round {round}");
        assert_eq!(
            want.len(),
            4,
            "f.isra.0, f.part.1, f. and the module's f.cold"
        );
        walked_rounds += usize::from(before && t.stem_index.get().is_none());
        for name in ["g", "fx", "", "f.isra", "nope"] {
            let want: Vec<SymbolId> = reference.variants_of(name).map(|s| s.id).collect();
            let got = t.variants_of_with(name, &mut Resched::none()).unwrap();
            assert_eq!(got, want, "round {round}, {name:?}");
        }
    }
    assert_eq!(
        walked_rounds, 2,
        "{STEM_WALKS} walks (6 names a round), then the index"
    );
    assert!(t.stem_index.get().is_some());
}

#[test]
fn sizes_follow_the_next_address_of_the_same_object() {
    let t = sample();
    // _text and start are aliases at 0x1000: both end at 0x1010.
    assert_eq!(t.size(SymbolId(0)), 0x10);
    assert_eq!(t.size(SymbolId(1)), 0x10);
    assert_eq!(t.size(SymbolId(2)), 0x30);
    // last of vmlinux: unknown
    assert_eq!(t.size(SymbolId(3)), SIZE_UNKNOWN);
    // module symbols in symtab order, not address order: exported (0x8000) ends at dup (0x9000)
    assert_eq!(t.size(SymbolId(5)), 0x1000);
    assert_eq!(t.size(SymbolId(4)), SIZE_UNKNOWN);
}

#[test]
fn source_files_are_kept_per_symbol() {
    let mut b = SymbolTableBuilder::new();
    b.push(ObjectId::VMLINUX, 0x10, b't', "a").unwrap();
    b.push(ObjectId::VMLINUX, 0x20, b't', "b").unwrap();
    b.set_last_file("fs/inode.c");
    b.push(ObjectId::VMLINUX, 0x30, b't', "c").unwrap();
    b.set_last_file("fs/inode.c");
    let t = b.build();
    assert!(t.has_files());
    assert_eq!(t.file(SymbolId(0)), None);
    assert_eq!(t.file(SymbolId(1)), Some("fs/inode.c"));
    assert_eq!(t.file(SymbolId(2)), Some("fs/inode.c"));
    assert!(!SymbolTableBuilder::new().build().has_files());
}

#[test]
fn source_size_fills_in_for_the_last_symbol() {
    let mut b = SymbolTableBuilder::new();
    b.push(ObjectId::VMLINUX, 0x10, b'T', "a").unwrap();
    b.push(ObjectId::VMLINUX, 0x20, b'T', "b").unwrap();
    b.set_last_size(8);
    let t = b.build();
    assert_eq!(t.size(SymbolId(0)), 0x10);
    assert_eq!(t.size(SymbolId(1)), 8);
}

#[test]
fn a_non_utf8_arena_keeps_its_names() {
    let mut arena = b"\xff\xfeabc".to_vec();
    arena.extend_from_slice(b"def");
    let mut b = SymbolTableBuilder::with_name_arena(arena, 2);
    b.push_arena_name(ObjectId::VMLINUX, 1, b'T', 2, 3).unwrap();
    b.push_arena_name(ObjectId::VMLINUX, 2, b'T', 5, 3).unwrap();
    let t = b.build();
    assert_eq!(t.iter().map(|s| s.name).collect::<Vec<_>>(), ["abc", "def"]);
}

#[test]
fn all_zero_addresses_are_hidden() {
    let mut b = SymbolTableBuilder::new();
    b.push(ObjectId::VMLINUX, 0, b'T', "a").unwrap();
    b.push(ObjectId::VMLINUX, 0, b'T', "b").unwrap();
    assert!(b.build().addresses_hidden());
    assert!(!SymbolTableBuilder::new().build().addresses_hidden());
}

#[test]
fn free_with_reaches_points_and_can_be_cancelled() {
    let indexed = || {
        let mut b = SymbolTableBuilder::new();
        for i in 0..50_000u64 {
            b.push(ObjectId::VMLINUX, 0x1000 + i * 16, b't', &format!("f{i}"))
                .unwrap();
        }
        let t = b.build();
        t.build_indexes(&mut Resched::none()).unwrap();
        t
    };
    let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
    indexed().free_with(&mut r).unwrap();
    assert!(r.stats().items >= 8, "{:?}", r.stats());
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut r = Resched::none()
        .with_interval(std::time::Duration::ZERO)
        .with_cancel_flag(flag);
    assert_eq!(indexed().free_with(&mut r), Err(Cancelled));
}

mod walks {
    use super::*;
    use proptest::prelude::*;

    /// Symbols over three objects (one of section offsets), few names so names repeat,
    /// addresses in any order (some objects unsorted) with aliases.
    fn tables() -> impl Strategy<Value = Vec<(u8, u16, u8, u8)>> {
        prop::collection::vec((0u8..3, 0u16..64, 0u8..12, 0u8..3), 1..80)
    }

    fn build(spec: &[(u8, u16, u8, u8)]) -> SymbolTable {
        let mut b = SymbolTableBuilder::new();
        let m = b.object("mod_a", ObjectKind::Module);
        let r = b.object("mod_r", ObjectKind::Module);
        b.set_unplaced(r, true);
        for &(o, addr, name, dotted) in spec {
            let obj = [ObjectId::VMLINUX, m, r][o as usize];
            let name = match dotted {
                1 => format!("f{}.isra.0", name % 4),
                2 => format!(".Lf{}.1", name % 4),
                _ => format!("f{name}"),
            };
            b.push(obj, 0x1000 + u64::from(addr) * 16, b't', &name)
                .unwrap();
        }
        b.build()
    }

    proptest! {
        #[test]
        fn walks_answer_as_the_indexes_do(spec in tables()) {
            let indexed = build(&spec);
            let mut walked = build(&spec);
            walked.scan_until_indexed(Resched::none());
            let odd = ["", ".", ".Lf1", "f1.isra", "f1.isra.0", "f1."].map(String::from);
            for name in (0..13u8).map(|n| format!("f{n}")).chain(odd) {
                let a: Vec<_> = indexed.by_name(&name).map(|s| s.id).collect();
                let b: Vec<_> = walked.by_name(&name).map(|s| s.id).collect();
                prop_assert_eq!(&a, &b);
                for o in 0..3u32 {
                    let a: Vec<_> = indexed.by_name_in(&name, ObjectId(o)).map(|s| s.id).collect();
                    let b: Vec<_> = walked.by_name_in(&name, ObjectId(o)).map(|s| s.id).collect();
                    prop_assert_eq!(a, b);
                }
                let a: Vec<_> = indexed.variants_of(&name).map(|s| s.id).collect();
                let b: Vec<_> = walked.variants_of(&name).map(|s| s.id).collect();
                prop_assert_eq!(a, b);
            }
            for s in indexed.iter() {
                prop_assert_eq!(indexed.size(s.id), walked.size(s.id), "size of {:?}", s.id);
            }
            // Nothing was built for the walks; building ends them with the same answers.
            prop_assert!(walked.name_index.get().is_none() && walked.addr_index.get().is_none());
            prop_assert!(walked.driver.lock().unwrap().as_ref().unwrap().stats().items > 0);
            walked.build_indexes(&mut Resched::none()).unwrap();
            for s in indexed.iter() {
                prop_assert_eq!(indexed.size(s.id), walked.size(s.id));
            }
        }
    }
}

/// Regression: `--file drivers/cpuidle/sysfs.c` on a table that knows only ELF FILE base
/// names matched `sysfs.c` as if the path were known, and so did a path that does not exist.
#[test]
fn a_path_against_a_base_name_is_only_a_base_name_match() {
    assert_eq!(file_match("fs/inode.c", "inode.c"), FileMatch::Exact);
    assert_eq!(file_match("fs/inode.c", "fs/inode.c"), FileMatch::Exact);
    assert_eq!(file_match("inode.c", "inode.c"), FileMatch::Exact);
    assert_eq!(file_match("fs/inode.c", "proc/inode.c"), FileMatch::No);
    assert_eq!(file_match("fs/xinode.c", "inode.c"), FileMatch::No);
    assert_eq!(
        file_match("sysfs.c", "drivers/cpuidle/sysfs.c"),
        FileMatch::BaseName
    );
    assert_eq!(
        file_match("sysfs.c", "no/such/dir/sysfs.c"),
        FileMatch::BaseName
    );
    assert_eq!(
        file_match("drivers/acpi/sysfs.c", "drivers/cpuidle/sysfs.c"),
        FileMatch::No
    );
    assert_eq!(file_match("sysfs.c", "xsysfs.c"), FileMatch::No);
    assert_eq!(file_match("inode.c", ""), FileMatch::No);
}
