//! Property tests: any valid kallsyms text parses and dumps back byte for byte; any mutation of
//! it either still round-trips or is refused with a line number, never a panic.

use klpsym_core::resched::Resched;
use klpsym_core::write_kallsyms;
use klpsym_sources::parse_text;
use proptest::prelude::*;

fn line() -> impl Strategy<Value = String> {
    (
        any::<u64>(),
        prop::sample::select(vec![
            'T', 't', 'D', 'd', 'R', 'r', 'B', 'b', 'W', 'w', 'A', 'a', 'V', 'u',
        ]),
        "[A-Za-z_][A-Za-z0-9_.$]{0,40}",
        prop::option::of(prop::sample::select(vec![
            "nf_tables",
            "ext4",
            "bpf",
            "__builtin__ftrace",
        ])),
    )
        .prop_map(|(addr, kind, name, module)| match module {
            None => format!("{addr:016x} {kind} {name}\n"),
            Some(m) => format!("{addr:016x} {kind} {name}\t[{m}]\n"),
        })
}

fn table_text() -> impl Strategy<Value = String> {
    prop::collection::vec(line(), 1..80).prop_map(|mut lines| {
        // vmlinux lines first, then module lines grouped per module, as the kernel lists them.
        lines.sort_by_key(|l| l.split('\t').nth(1).map(str::to_string));
        lines.concat()
    })
}

fn dump(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let p = parse_text(bytes, &mut Resched::none()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    write_kallsyms(&p.table, &mut out, &mut Resched::none()).map_err(|e| e.to_string())?;
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn valid_text_round_trips(text in table_text()) {
        let out = dump(text.clone().into_bytes()).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn mutated_text_round_trips_or_is_refused_with_a_line(text in table_text(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = text.into_bytes();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        match dump(bytes.clone()) {
            Ok(out) => {
                // Accepted input must come back unchanged, except that hex digits are
                // written in lower case.
                prop_assert_eq!(out, bytes.to_ascii_lowercase_hex());
            }
            Err(e) => prop_assert!(e.starts_with("line ") || e.starts_with("binary data") || e.starts_with("empty"), "{}", e),
        }
    }
}

trait LowerHex {
    fn to_ascii_lowercase_hex(&self) -> Vec<u8>;
}

impl LowerHex for Vec<u8> {
    /// Lower-cases the address column of every line (the only normalization dump does).
    fn to_ascii_lowercase_hex(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for line in self.split_inclusive(|&b| b == b'\n') {
            let sp = line.iter().position(|&b| b == b' ').unwrap_or(0);
            out.extend(line[..sp].iter().map(u8::to_ascii_lowercase));
            out.extend_from_slice(&line[sp..]);
        }
        // A last line without its newline gets one.
        if out.last() != Some(&b'\n') {
            out.push(b'\n');
        }
        out
    }
}
