//! The running kernel: positions of every name and the address lookup of every symbol start
//! agree with a straight reading of /proc/kallsyms. Skips (and says why) when the file is not
//! readable with real addresses.

use std::collections::HashMap;
use std::path::Path;

use klpsym_core::resched::Resched;
use klpsym_core::{find_object_symbol, LookupRequest, LookupVerdict, SymbolizeOutcome};
use klpsym_io::{load, LoadOptions};

#[test]
fn every_name_and_every_symbol_start_agree_with_proc_kallsyms() {
    let path = Path::new("/proc/kallsyms");
    let Ok(text) = std::fs::read_to_string(path) else {
        klpsym_testkit::lab::skip("the live /proc/kallsyms", "not readable");
        return;
    };
    let k = load(path, &LoadOptions::default(), &mut Resched::none()).unwrap();
    if k.table.addresses_hidden() {
        klpsym_testkit::lab::skip(
            "the live /proc/kallsyms",
            "addresses are hidden (run as root with kptr_restrict <= 1)",
        );
        return;
    }
    // A straight reading. (The table is read again by `load`; compare only if both reads agree.)
    if std::fs::read_to_string(path).unwrap() != text {
        klpsym_testkit::lab::skip(
            "the live /proc/kallsyms",
            "it changed between two reads (a module loaded meanwhile)",
        );
        return;
    }
    let mut positions: HashMap<(String, String), Vec<u64>> = HashMap::new();
    let mut first_at: HashMap<u64, String> = HashMap::new();
    let mut lines = 0;
    for line in text.lines() {
        lines += 1;
        let mut parts = line.splitn(3, ' ');
        let addr = u64::from_str_radix(parts.next().unwrap(), 16).unwrap();
        let _ty = parts.next().unwrap();
        let rest = parts.next().unwrap();
        let (name, obj) = match rest.split_once('\t') {
            Some((n, m)) => (n, m.trim_matches(|c| c == '[' || c == ']')),
            None => (rest, "vmlinux"),
        };
        positions
            .entry((obj.to_string(), name.to_string()))
            .or_default()
            .push(addr);
        first_at.entry(addr).or_insert_with(|| name.to_string());
    }
    assert_eq!(k.table.len(), lines);
    for ((obj, name), addrs) in &positions {
        let object = if obj == "vmlinux" {
            None
        } else {
            Some(obj.as_str())
        };
        for (i, &a) in addrs.iter().enumerate() {
            let o = find_object_symbol(
                &k.table,
                &LookupRequest {
                    name,
                    object,
                    sympos: i as u64 + 1,
                },
            );
            if a == 0 {
                assert_eq!(o.verdict, LookupVerdict::NotFound, "{obj} {name}");
                continue;
            }
            assert_eq!(o.verdict, LookupVerdict::Found, "{obj} {name} #{}", i + 1);
            assert_eq!(o.address, Some(a), "{obj} {name} #{}", i + 1);
        }
        let o = find_object_symbol(
            &k.table,
            &LookupRequest {
                name,
                object,
                sympos: 0,
            },
        );
        if addrs.len() > 1 {
            assert_eq!(o.verdict, LookupVerdict::Ambiguous, "{obj} {name}");
        }
    }
    for (&addr, name) in &first_at {
        match k.table.symbolize(addr) {
            SymbolizeOutcome::Found(s) => {
                assert_eq!(s.offset, 0);
                assert_eq!(s.symbol.name, name, "at {addr:#x}");
            }
            other => panic!("{addr:#x}: {other:?}"),
        }
    }
    eprintln!(
        "checked {} names and {} addresses",
        positions.len(),
        first_at.len()
    );
}
