//! Property tests: every index answers exactly what a naive linear scan over the symbols in
//! kernel order answers, on random tables with duplicates, aliases and several modules.

use klpsym_core::{
    find_object_symbol, LookupRequest, LookupVerdict, ObjectId, ObjectKind, SymbolTable,
    SymbolTableBuilder, SymbolizeOutcome, SIZE_UNKNOWN,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Row {
    object: u8,
    addr: u64,
    name: u8,
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    // Few names and addresses so duplicates and aliases are common.
    prop::collection::vec(
        (0u8..4, 0u64..64, 0u8..12).prop_map(|(object, a, name)| Row {
            object,
            addr: 0x1000 + a * 8,
            name,
        }),
        0..120,
    )
}

fn build(rows: &[Row]) -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    for r in rows {
        let oid = if r.object == 0 {
            ObjectId::VMLINUX
        } else {
            b.object(&format!("mod{}", r.object), ObjectKind::Module)
        };
        b.push(oid, r.addr, b't', &format!("sym{}", r.name))
            .unwrap();
    }
    b.build()
}

fn obj_name(o: u8) -> String {
    if o == 0 {
        "vmlinux".into()
    } else {
        format!("mod{o}")
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn lookups_match_the_kernel_walk(rows in rows(), name in 0u8..13, object in 0u8..5, sympos in 0u64..5) {
        let t = build(&rows);
        let name_s = format!("sym{name}");
        let oname = obj_name(object);
        let o = find_object_symbol(&t, &LookupRequest { name: &name_s, object: Some(&oname), sympos });
        // Naive: the matches in the object, in input order.
        let matches: Vec<usize> = rows.iter().enumerate()
            .filter(|(_, r)| r.name == name && r.object == object)
            .map(|(i, _)| i)
            .collect();
        prop_assert_eq!(o.candidates.iter().map(|s| s.0 as usize).collect::<Vec<_>>(), matches.clone());
        let expected = if matches.is_empty() {
            LookupVerdict::NotFound
        } else if sympos == 0 && matches.len() > 1 {
            LookupVerdict::Ambiguous
        } else if sympos > 0 && (matches.len() as u64) < sympos {
            LookupVerdict::PositionNotFound
        } else {
            LookupVerdict::Found
        };
        prop_assert_eq!(o.verdict, expected);
        if expected == LookupVerdict::Found {
            let idx = if sympos == 0 { 0 } else { sympos as usize - 1 };
            prop_assert_eq!(o.address, Some(rows[matches[idx]].addr));
        }
    }

    #[test]
    fn address_lookups_match_a_scan(rows in rows(), probe in 0x0ff0u64..0x1210) {
        let t = build(&rows);
        let got = t.symbolize(probe);
        // Naive: highest address <= probe, first in input order among those.
        let best = rows.iter().enumerate()
            .filter(|(_, r)| r.addr <= probe)
            .max_by(|(i, a), (j, b)| a.addr.cmp(&b.addr).then(j.cmp(i)));
        match best {
            None => prop_assert_eq!(got, SymbolizeOutcome::BeforeFirst),
            Some((i, r)) => {
                // Size: next higher address of the same object.
                let next = rows.iter().filter(|x| x.object == r.object && x.addr > r.addr).map(|x| x.addr).min();
                let size = next.map_or(SIZE_UNKNOWN, |n| n - r.addr);
                let inside = if size == SIZE_UNKNOWN { probe == r.addr } else { probe - r.addr < size };
                match got {
                    SymbolizeOutcome::Found(s) => {
                        prop_assert!(inside);
                        prop_assert_eq!(s.symbol.id.0 as usize, i);
                        prop_assert_eq!(s.offset, probe - r.addr);
                        prop_assert_eq!(s.size, size);
                    }
                    SymbolizeOutcome::Outside { nearest, size: sz } => {
                        prop_assert!(!inside);
                        prop_assert_eq!(nearest.id.0 as usize, i);
                        prop_assert_eq!(sz, size);
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
        }
    }

    #[test]
    fn batch_symbolization_matches_single_calls(rows in rows(), probes in prop::collection::vec(0x0ff0u64..0x1210, 0..64)) {
        let t = build(&rows);
        let mut out = Vec::new();
        t.symbolize_batch(&probes, &mut out);
        prop_assert_eq!(out.len(), probes.len());
        for (p, o) in probes.iter().zip(&out) {
            prop_assert_eq!(*o, t.symbolize(*p));
        }
    }

    #[test]
    fn by_name_matches_a_scan(rows in rows(), name in 0u8..13) {
        let t = build(&rows);
        let n = format!("sym{name}");
        let got: Vec<usize> = t.by_name(&n).map(|s| s.id.0 as usize).collect();
        let want: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| r.name == name).map(|(i, _)| i).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn first_with_prefix_matches_a_scan(rows in rows(), name in 0u8..13) {
        let t = build(&rows);
        let prefix = format!("sym{name}");
        let got = t
            .first_with_prefix(&prefix, &mut klpsym_core::resched::Resched::none())
            .unwrap()
            .map(|s| s.id.0 as usize);
        let want = rows.iter().position(|r| format!("sym{}", r.name).starts_with(&prefix));
        prop_assert_eq!(got, want);
    }
}
