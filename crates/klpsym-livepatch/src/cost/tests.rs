use std::collections::HashMap;

use klpsym_core::ObjectKind;

use super::*;

fn walks(names: &[&'static str]) -> Walks<'static> {
    let vmlinux: Vec<&str> = names.to_vec();
    let mut positions: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, n) in vmlinux.iter().enumerate() {
        positions.entry(n).or_default().push(i as u32);
    }
    // Brute force: every name of the table and a few absent ones.
    let mut ranks = HashMap::new();
    for x in vmlinux.iter().copied().chain(["zz", "", "0", "dupa"]) {
        let less = vmlinux.iter().filter(|y| **y < x).count() as u32;
        let equal = vmlinux.iter().filter(|y| **y == x).count() as u32;
        ranks.insert(x.to_string(), (less, equal));
    }
    Walks {
        vmlinux_len: vmlinux.len(),
        positions,
        ranks,
        modules: vec![("ext4".into(), vec!["a", "x", "b", "x"])],
        loading: Vec::new(),
    }
}

/// The kernel's `kallsyms_lookup_names()` over a table really sorted: entries touched.
fn sorted_search(table: &[&str], name: &str) -> u64 {
    let mut sorted = table.to_vec();
    sorted.sort();
    let n = sorted.len() as i64;
    let (mut low, mut high, mut probes) = (0i64, n - 1, 0u64);
    while low <= high {
        let mid = low + (high - low) / 2;
        probes += 1;
        match name.cmp(sorted[mid as usize]) {
            std::cmp::Ordering::Greater => low = mid + 1,
            std::cmp::Ordering::Less => high = mid - 1,
            std::cmp::Ordering::Equal => {
                let (mut lo, mut hi) = (mid, mid);
                while lo > 0 && sorted[lo as usize - 1] == name {
                    lo -= 1;
                }
                while hi + 1 < n && sorted[hi as usize + 1] == name {
                    hi += 1;
                }
                return probes + (hi - lo) as u64 + u64::from(lo > 0) + u64::from(hi + 1 < n);
            }
        }
    }
    probes
}

#[test]
fn ranks_count_as_byte_order_does() {
    // Names around the eight-byte prefix: shared prefixes longer and shorter than eight,
    // names that end at seven, eight and nine bytes, NUL and high bytes.
    const POOL: &[&[u8]] = &[
        b"",
        b"a",
        b"abcdefg",
        b"abcdefgh",
        b"abcdefghi",
        b"abcdefgha",
        b"abcdefgg",
        b"abcdefg\0",
        b"abcdefg\0z",
        b"abcdefgh\xff",
        b"abcdefgi",
        b"\xff",
        b"zzzzzzzzzz",
        b"abcdefghij_long_name",
        b"abcdefghij_long_namf",
    ];
    let mut seed = 0x853c49e6748fea9bu64;
    for len in [0usize, 1, 7, 30, 200] {
        let table: Vec<&[u8]> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                POOL[(seed % POOL.len() as u64) as usize]
            })
            .collect();
        // Every name wanted, as strings (the NUL and 0xff ones as lossless UTF-8 where
        // they are; the rest left out).
        let mut wanted: Vec<&str> = POOL
            .iter()
            .filter_map(|n| std::str::from_utf8(n).ok())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let got = rank_names(table.iter().copied(), &wanted, &mut Resched::none()).unwrap();
        for (w, (less, eq)) in wanted.iter().zip(got) {
            let want_less = table.iter().filter(|y| **y < w.as_bytes()).count() as u32;
            let want_eq = table.iter().filter(|y| **y == w.as_bytes()).count() as u32;
            assert_eq!((less, eq), (want_less, want_eq), "{w:?} in {len} names");
        }
    }
}

#[test]
fn ranks_give_the_sorted_tables_binary_search() {
    // Tables of every size up to 40 over a small alphabet (many duplicates), each name
    // and some absent ones looked up: the visits equal a search of the sorted table.
    const POOL: &[&str] = &["a", "b", "bb", "c", "d", "e", "f", "g", "zz"];
    let mut seed = 0x2545f4914f6cdd1du64;
    for len in 0..40 {
        let table: Vec<&'static str> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                POOL[(seed % 8) as usize]
            })
            .collect();
        let wanted: std::collections::HashSet<&str> = POOL.iter().copied().collect();
        let mut sorted_wanted: Vec<&str> = wanted.iter().copied().collect();
        sorted_wanted.sort_unstable();
        let ranks = rank_names(
            table.iter().map(|n| n.as_bytes()),
            &sorted_wanted,
            &mut Resched::none(),
        )
        .unwrap();
        let mut w = walks(&table);
        w.ranks = sorted_wanted
            .iter()
            .zip(ranks)
            .map(|(n, r)| (n.to_string(), r))
            .collect();
        for name in POOL {
            let mut m = meter(Preemption::Voluntary);
            assert_eq!(
                w.at((6, 12), None, &[], &look("vmlinux", name, 1), &mut m),
                sorted_search(&table, name),
                "{table:?} {name}"
            );
        }
    }
}

#[test]
fn walks_read_through_the_name_index_equal_the_full_listing() {
    use klpsym_core::{ObjectId, SymbolTableBuilder};
    let mut b = SymbolTableBuilder::new();
    let mut addr = 0x1000;
    let mut push = |b: &mut SymbolTableBuilder, o: ObjectId, n: &str| {
        addr += 16;
        b.push(o, addr, b't', n).unwrap();
    };
    for i in 0..40 {
        push(&mut b, ObjectId::VMLINUX, &format!("f{}", i % 13));
    }
    // Modules newest first, as /proc/kallsyms lists them; one declared with no symbols.
    let empty = b.object("empty", ObjectKind::Module);
    let _ = empty;
    for m in ["xfs", "ext4"] {
        let o = b.object(m, ObjectKind::Module);
        for i in 0..5 {
            push(&mut b, o, &format!("{m}_{}", i % 3));
        }
    }
    let t = b.build();
    let wanted: std::collections::HashSet<&str> = (0..15)
        .map(|i| {
            [
                "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12",
                "nope", "xfs_1",
            ][i]
        })
        .collect();
    type View = (usize, Vec<(String, Vec<u32>)>, Vec<(String, Vec<String>)>);
    fn view(w: &Walks<'_>) -> View {
        let mut p: Vec<(String, Vec<u32>)> = w
            .positions
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        p.sort();
        let m = w
            .modules
            .iter()
            .map(|(n, s)| (n.clone(), s.iter().map(|x| x.to_string()).collect()))
            .collect();
        (w.vmlinux_len, p, m)
    }
    let mut r = Resched::none();
    // More than 8 names and no index: every name is listed.
    let full = Walks::new(&t, false, &wanted, &mut r).unwrap();
    let full_sorted = Walks::new(&t, true, &wanted, &mut r).unwrap();
    t.build_name_index(&mut r).unwrap();
    let fast = Walks::new(&t, false, &wanted, &mut r).unwrap();
    let fast_sorted = Walks::new(&t, true, &wanted, &mut r).unwrap();
    assert_eq!(view(&fast_sorted), view(&full_sorted));
    assert_eq!(fast_sorted.ranks, full_sorted.ranks);
    // f0 is at 0, 13, 26, 39 of 40; the names below it: none ("f0" < "f1" < "f10"...).
    assert_eq!(fast_sorted.ranks["f0"], (0, 4));
    assert_eq!(fast_sorted.ranks["nope"].1, 0);
    assert_eq!(view(&fast), view(&full));
    assert_eq!(view(&fast).2.len(), 2, "the empty module is not walked");
    assert_eq!(view(&fast).2[0].0, "xfs");
    assert_eq!(view(&fast).1[0], ("f0".to_string(), vec![0, 13, 26, 39]));
}

fn meter(p: Preemption) -> Meter {
    Meter {
        preemption: p,
        run: 0,
        longest: 0,
        total: 0,
        callbacks: 0,
    }
}

fn look<'a>(object: &'a str, name: &'a str, sympos: u64) -> Lookup<'a> {
    Lookup {
        object,
        name,
        sympos,
    }
}

impl Walks<'_> {
    /// The entries one lookup visits on version `v`.
    fn at(
        &self,
        v: (u32, u32),
        sublevel: Option<u32>,
        list: &[(String, usize)],
        l: &Lookup<'_>,
        m: &mut Meter,
    ) -> u64 {
        walk(self, v, sublevel, list, l, m)
    }
}

const NAMES: &[&str] = &["a", "dup", "b", "c", "dup", "d", "u", "e"];

#[test]
fn linear_walks_stop_where_the_callback_does() {
    let w = walks(NAMES);
    let list = vec![("ext4".to_string(), 4)];
    let mut m = meter(Preemption::Voluntary);
    // unique: the whole table (8); 6.1 has no module tail.
    assert_eq!(
        w.at((6, 1), None, &list, &look("vmlinux", "u", 0), &mut m),
        8
    );
    // sympos 0 on a duplicate: stops at the second match (index 4).
    assert_eq!(
        w.at((6, 1), None, &list, &look("vmlinux", "dup", 0), &mut m),
        5
    );
    assert_eq!(
        w.at((6, 1), None, &list, &look("vmlinux", "dup", 1), &mut m),
        2
    );
    // missing: whole table.
    assert_eq!(
        w.at((6, 1), None, &list, &look("vmlinux", "zz", 0), &mut m),
        8
    );
    // 6.1 reschedules after every entry but the one a walk stops at: a stopped walk and
    // the first entry of the next make the longest run.
    assert_eq!(m.longest, 2);
    // 5.10 before .220: the module tail after an unstopped walk, no point inside.
    let mut m = meter(Preemption::Voluntary);
    assert_eq!(
        w.at((5, 10), Some(219), &list, &look("vmlinux", "u", 0), &mut m),
        12
    );
    assert_eq!(
        w.at(
            (5, 10),
            Some(219),
            &list,
            &look("vmlinux", "dup", 0),
            &mut m
        ),
        5
    );
    // module_mutex per lookup: the longest run is one lookup.
    assert_eq!(m.longest, 12);
    // 5.10.220+: no tail, and no point between vmlinux lookups.
    let mut m = meter(Preemption::Voluntary);
    assert_eq!(
        w.at((5, 10), Some(223), &list, &look("vmlinux", "u", 0), &mut m),
        8
    );
    assert_eq!(
        w.at((5, 10), Some(223), &list, &look("vmlinux", "u", 0), &mut m),
        8
    );
    assert_eq!(m.longest, 16);
}

#[test]
fn name_sorted_lookups_cost_a_binary_search() {
    let w = walks(NAMES);
    let list = vec![];
    let mut m = meter(Preemption::Voluntary);
    // sorted: a b c d dup dup e u (8), bounds 0..=7. "u": mid 3 (d), 5 (dup), 6 (e),
    // 7 (u) = 4 probes; then one entry before (e), none after (the end): 5.
    assert_eq!(
        w.at((6, 12), None, &list, &look("vmlinux", "u", 0), &mut m),
        5
    );
    // "dup": mid 3 (d), 5 (dup) = 2 probes; back over 4 (dup) to 3 (d, differs), forward
    // to 6 (e, differs): 3 more.
    assert_eq!(
        w.at((6, 12), None, &list, &look("vmlinux", "dup", 0), &mut m),
        5
    );
    // missing: the probes only (mid 3, 5, 6, 7).
    assert_eq!(
        w.at((6, 12), None, &list, &look("vmlinux", "zz", 0), &mut m),
        4
    );
    // The search has no point; each match's callback is followed by one.
    assert_eq!(m.longest, 5);
}

#[test]
fn module_walks_follow_each_versions_order_and_stop() {
    let w = walks(NAMES);
    let list = vec![("patch".to_string(), 10), ("ext4".to_string(), 4)];
    let mut m = meter(Preemption::Voluntary);
    // 6.1: the patch's 10 symbols first, then ext4 up to the second "x" (index 3).
    assert_eq!(w.at((6, 1), None, &list, &look("ext4", "x", 0), &mut m), 14);
    // unique in ext4 ("a"): every module to the end.
    assert_eq!(w.at((6, 1), None, &list, &look("ext4", "a", 0), &mut m), 14);
    // sympos 1: stops at index 1.
    assert_eq!(w.at((6, 1), None, &list, &look("ext4", "x", 1), &mut m), 12);
    // 6.2+: only ext4.
    assert_eq!(w.at((6, 12), None, &list, &look("ext4", "x", 1), &mut m), 2);
    assert_eq!(w.at((6, 12), None, &list, &look("ext4", "a", 0), &mut m), 4);
    // 5.10.220+: the walk stops inside ext4 (index 1) but would go on through the modules
    // after it; with ext4 first it walks ext4 to the stop, then the patch to its end.
    let list2 = vec![("ext4".to_string(), 4), ("patch".to_string(), 10)];
    assert_eq!(
        w.at((5, 10), Some(223), &list2, &look("ext4", "x", 1), &mut m),
        12
    );
    // 6.1 stops there.
    assert_eq!(w.at((6, 1), None, &list2, &look("ext4", "x", 1), &mut m), 2);
}

#[test]
fn preemption_models_from_config() {
    let cfg = |on: &'static [&'static str]| move |o: &str| on.contains(&o);
    assert_eq!(
        Preemption::from_config(cfg(&["CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT_DYNAMIC"])),
        Some(Preemption::Voluntary)
    );
    assert_eq!(
        Preemption::from_config(cfg(&["CONFIG_PREEMPT_LAZY", "CONFIG_PREEMPT_DYNAMIC"])),
        Some(Preemption::Lazy)
    );
    assert_eq!(Preemption::from_config(cfg(&[])), None);
    assert_eq!(Preemption::assumed((7, 2)), Preemption::Lazy);
    assert_eq!(Preemption::assumed((5, 10)), Preemption::Voluntary);
}
