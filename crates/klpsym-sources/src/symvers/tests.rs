use super::*;

fn parse(text: &str) -> Result<Exports, SymversError> {
    parse_symvers_text(
        text.as_bytes().to_vec(),
        "Module.symvers".into(),
        &mut Resched::none(),
    )
}

fn e(crc: u32, module: &str, ns: Option<&str>) -> Export<'static> {
    Export {
        crc: Some(crc),
        module: Box::leak(module.to_string().into_boxed_str()),
        namespace: ns.map(|n| &*Box::leak(n.to_string().into_boxed_str())),
    }
}

#[test]
fn reads_the_kernels_format() {
    let x = parse(
        "0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
             0x0000abcd\tusb_foo\tdrivers/usb/core/usbcore\tEXPORT_SYMBOL_GPL\tUSB_STORAGE\n\
             0xffffffff\told\tvmlinux\tEXPORT_SYMBOL\n",
    )
    .unwrap();
    let m = &x.symbols;
    assert_eq!(m.len(), 3);
    assert_eq!(m.get("printk"), Some(e(0x12345678, "vmlinux", None)));
    assert_eq!(
        m.get("usb_foo"),
        Some(e(0xabcd, "drivers/usb/core/usbcore", Some("USB_STORAGE")))
    );
    assert_eq!(m.get("old"), Some(e(0xffffffff, "vmlinux", None)));
    assert_eq!(m.get("prin"), None);
    assert_eq!(m.get("printk2"), None);
    assert_eq!(m.get(""), None);
    let names: Vec<&str> = m.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["printk", "usb_foo", "old"]);
    assert_eq!(x.source, "Module.symvers");
}

#[test]
fn a_later_line_replaces_an_earlier_one() {
    let m = parse("0x1\ta\tvmlinux\tT\n0x2\tb\tvmlinux\tT\n0x3\ta\tmod\tT\tNS\n")
        .unwrap()
        .symbols;
    assert_eq!(m.len(), 2);
    assert_eq!(m.get("a"), Some(e(3, "mod", Some("NS"))));
    assert_eq!(m.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn bad_lines_are_named_in_order() {
    let err = |t: &[u8]| {
        parse_symvers_text(t.to_vec(), "S".into(), &mut Resched::none())
            .unwrap_err()
            .to_string()
    };
    let s = err(b"0x1\ta\tvmlinux\tT\n0x2\tb\tvmlinux\n");
    assert!(s.contains("line 2: fewer than 4 fields"), "{s}");
    let s = err(b"0x1\ta\tvmlinux\tT\nzz\tb\tvmlinux\tT\n");
    assert!(s.contains("line 2: the CRC is not hex"), "{s}");
    let s = err(b"0x1\ta\tvmlinux\tT\n\n0x2\t\xff\tvmlinux\tT\n");
    assert!(s.contains("line 3: not UTF-8"), "{s}");
    // An earlier line's error comes first, whatever follows.
    let s = err(b"0x1\ta\n0x2\t\xff\tvmlinux\tT\n");
    assert!(s.contains("line 1: fewer than 4 fields"), "{s}");
    // Empty lines and a missing final newline are fine.
    let m = parse("\n0x1\ta\tvmlinux\tT").unwrap().symbols;
    assert_eq!(m.get("a"), Some(e(1, "vmlinux", None)));
    assert!(parse("").unwrap().symbols.is_empty());
}

/// Inserts, replacements and lookups agree with a HashMap's, through growth from empty
/// and from a capacity, on names that collide in the low hash bits often (short names).
#[test]
fn agrees_with_a_map() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for cap in [0, 10, 5000] {
        let mut ours = ExportMap::with_capacity(cap);
        if cap == 0 {
            ours = ExportMap::default();
        }
        let mut model = std::collections::HashMap::new();
        let mut order = Vec::new();
        for _ in 0..3000 {
            let name = format!("s{}", next() % 2000);
            let crc = next() as u32;
            let module = ["vmlinux", "a/b", "c"][(next() % 3) as usize];
            let ns = (next() % 4 == 0).then_some("NS");
            ours.insert(
                &name,
                Export {
                    crc: Some(crc),
                    module,
                    namespace: ns,
                },
            );
            if model.insert(name.clone(), (crc, module, ns)).is_none() {
                order.push(name);
            }
        }
        assert_eq!(ours.len(), model.len());
        for i in 0..2100 {
            let n = format!("s{i}");
            let want = model.get(&n).map(|&(crc, module, namespace)| Export {
                crc: Some(crc),
                module,
                namespace,
            });
            assert_eq!(ours.get(&n), want, "{n}");
        }
        assert_eq!(
            ours.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
            order
        );
        let back: ExportMap = serde_json::from_str(&serde_json::to_string(&ours).unwrap()).unwrap();
        assert!(back.iter().eq(ours.iter()));
    }
}

fn backing(b: Vec<u8>) -> Backing {
    std::sync::Arc::new(b)
}

/// Encoded and read in place (at an odd offset of a larger buffer), a map answers as it
/// did: every name, absent names, iteration order; a map with no symbols too.
#[test]
fn a_map_read_in_place_answers_the_same() {
    let mut built = parse(
        "0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
             0x0000abcd\tusb_foo\tdrivers/usb/core/usbcore\tEXPORT_SYMBOL_GPL\tUSB\n",
    )
    .unwrap()
    .symbols;
    for i in 0..500 {
        let ns = (i % 3 == 0).then_some("NS");
        let crc = (i % 5 != 0).then_some(i as u32);
        built.insert(
            &format!("sym_{i}"),
            Export {
                crc,
                module: "vmlinux",
                namespace: ns,
            },
        );
    }
    for map in [built, ExportMap::default(), ExportMap::with_capacity(40)] {
        let mut b = vec![7u8; 3];
        assert!(map.encode(&mut b, &mut Resched::none()).unwrap());
        let end = b.len();
        b.extend_from_slice(b"tail");
        let v = ExportMap::view(&backing(b), 3..end).expect("a view");
        assert_eq!(v.len(), map.len());
        assert!(v.iter().eq(map.iter()));
        for (n, e) in map.iter() {
            assert_eq!(v.get(n), Some(e), "{n}");
        }
        for absent in ["", "sym_500", "printk2", "usb_fo"] {
            assert_eq!(v.get(absent), None);
        }
        // Encoding the view again gives a map that answers the same.
        let mut again = Vec::new();
        assert!(v.encode(&mut again, &mut Resched::none()).unwrap());
        let n = again.len();
        let w = ExportMap::view(&backing(again), 0..n).unwrap();
        assert!(w.iter().eq(map.iter()));
        // A range that does not hold a whole encoding is refused.
        let mut b = Vec::new();
        map.encode(&mut b, &mut Resched::none()).unwrap();
        let n = b.len();
        assert!(ExportMap::view(&backing(b.clone()), 0..n - 1).is_none());
        assert!(ExportMap::view(&backing(b), 1..n).is_none());
    }
}

/// A Module.symvers' index read over the file's own bytes answers as the parsed map does
/// (a replaced line included); over a text of another length it is refused.
#[test]
fn an_index_over_its_text_answers_the_same() {
    let text = "0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
                    0x0000abcd\tusb_foo\tdrivers/usb/core/usbcore\tEXPORT_SYMBOL_GPL\tUSB\n\
                    0x00000001\tprintk\tvmlinux\tEXPORT_SYMBOL_GPL\n";
    let map = parse(text).unwrap().symbols;
    let mut index = vec![9u8; 5];
    assert!(map.encode_index(&mut index, &mut Resched::none()).unwrap());
    let end = index.len();
    // Smaller than the encoding with its text by exactly the text.
    let mut whole = Vec::new();
    assert!(map.encode(&mut whole, &mut Resched::none()).unwrap());
    assert_eq!(whole.len(), end - 5 + text.len());
    let (t, i) = (backing(text.as_bytes().to_vec()), backing(index));
    let v = ExportMap::view_index(&t, &i, 5..end).expect("a view");
    assert!(v.iter().eq(map.iter()));
    assert_eq!(v.get("printk"), Some(e(1, "vmlinux", None)));
    assert_eq!(
        v.get("usb_foo"),
        Some(e(0xabcd, "drivers/usb/core/usbcore", Some("USB")))
    );
    assert_eq!(v.get("usb_fo"), None);
    let shorter = backing(text.as_bytes()[1..].to_vec());
    assert!(ExportMap::view_index(&shorter, &i, 5..end).is_none());
    assert!(ExportMap::view_index(&t, &i, 5..end - 1).is_none());
}

/// Every byte of an encoding flipped in turn: no panic and no endless probe, whatever
/// it then answers.
#[test]
fn a_damaged_encoding_never_panics() {
    let mut map = ExportMap::default();
    for i in 0..12 {
        map.insert(
            &format!("s{i}"),
            Export {
                crc: Some(i),
                module: "m",
                namespace: Some("N"),
            },
        );
    }
    let mut good = Vec::new();
    assert!(map.encode(&mut good, &mut Resched::none()).unwrap());
    for at in 0..good.len() {
        for bit in [0x01u8, 0x80, 0xff] {
            let mut b = good.clone();
            b[at] ^= bit;
            let n = b.len();
            if let Some(v) = ExportMap::view(&backing(b), 0..n) {
                let _ = v.iter().count();
                for i in 0..14 {
                    let _ = v.get(&format!("s{i}"));
                }
            }
        }
    }
    // Every slot full (no empty one to end a probe): a miss still ends.
    let mut b = good.clone();
    let nslots = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let n = b.len();
    for k in 0..nslots {
        let at = n - nslots * 4 + k * 4;
        b[at..at + 4].copy_from_slice(&0xff00_0001u32.to_le_bytes());
    }
    let v = ExportMap::view(&backing(b), 0..n).unwrap();
    assert_eq!(v.get("absent"), None);
}
