//! /proc/kallsyms and System.map text (klpsym_sources::parse_text).
//!
//! Invariants: no panic; parsing stays within the allocation budget
//! (klpsym_fuzz::with_budget); a parsed input dumps back to its own bytes when it is already in
//! the canonical form (ends with a newline, lower-case hex addresses); dumping is idempotent;
//! the table holds one symbol per line; the same text fed in pieces (TextStream, as a
//! /proc/kallsyms read arrives) parses to the same table, or fails as the whole does.
#![no_main]

use klpsym_core::resched::Resched;
use klpsym_fuzz::{dump, with_budget};
use klpsym_sources::{detect, parse_text, TextStream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let kind = detect(data);
    let parsed = with_budget(data.len(), 0, || {
        parse_text(data.to_vec(), &mut Resched::none())
    });
    // In pieces whose size the input's first byte chooses.
    let piece = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut stream = TextStream::new();
    let mut fed = Ok(());
    for c in data.chunks(piece) {
        fed = stream.feed(c, &mut Resched::none());
        if fed.is_err() {
            break;
        }
    }
    let streamed = fed.and_then(|()| stream.finish(&mut Resched::none()));
    assert_eq!(
        streamed.as_ref().map(|p| dump(&p.table)).ok(),
        parsed.as_ref().map(|p| dump(&p.table)).ok(),
        "the text fed in pieces of {piece} parses otherwise"
    );
    let Ok(parsed) = parsed else {
        return;
    };
    assert_eq!(parsed.kind, kind, "parse_text and detect disagree");
    let lines = data.split(|&b| b == b'\n').count() - usize::from(data.ends_with(b"\n"));
    assert_eq!(parsed.table.len(), lines, "one symbol per line");
    let out = dump(&parsed.table);
    let canonical = data.ends_with(b"\n")
        && data.split(|&b| b == b'\n').all(|l| {
            l.iter()
                .take_while(|&&c| c != b' ')
                .all(|c| !c.is_ascii_uppercase())
        });
    if canonical {
        assert!(out == data, "dump differs from a canonical input");
    }
    let again = parse_text(out.clone(), &mut Resched::none()).expect("a dump parses again");
    assert!(dump(&again.table) == out, "dump is not idempotent");
});
