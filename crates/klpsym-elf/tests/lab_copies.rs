//! Every copy of a function klpsym finds in a Debian `-dbg` vmlinux, held against an
//! independent DWARF reader, llvm-dwarfdump, on every amd64 lab kernel: for a spread of static
//! functions that the compiler inlined somewhere, `llvm-dwarfdump --lookup` names the
//! function's unit; the whole unit is dumped (`--debug-info=UNIT --show-children`) and read here on its own terms (entries by
//! offset and indentation, `DW_AT_abstract_origin`/`DW_AT_specification` chains followed by
//! offset); the function is the `DW_TAG_subprogram` with code one of whose ranges starts at
//! its symbol; every `DW_TAG_inlined_subroutine` and `DW_TAG_subprogram` with code whose chain
//! ends where the function's does is one copy, its caller the innermost enclosing
//! subprogram with code. The two lists must be the same, copy for copy (its kind, entry and
//! caller's entry): at least 50 functions and 30 inlined copies per kernel, 300 inlined copies
//! in all. A function klpsym finds inlined nowhere is compared too when its unit is dumped
//! for a neighbour, so a copy klpsym missed would show.

use std::collections::HashMap;

use klpsym_elf::{CopyPlace, DebugLines};
use klpsym_resched::resched::Resched;
use klpsym_testkit::lab;

/// One entry of the dump.
#[derive(Debug, Default, Clone)]
struct Die {
    tag: String,
    depth: usize,
    origin: Option<u64>,
    low_pc: Option<u64>,
    entry_pc: Option<u64>,
    ranges: Vec<(u64, u64)>,
    has_ranges_attr: bool,
    high_pc: Option<u64>,
}

impl Die {
    fn code(&self) -> bool {
        self.low_pc.is_some() || self.has_ranges_attr
    }

    /// Its code's ranges: `[low_pc, high_pc)` or the range list, empty and zero ones left out.
    fn ranges(&self) -> Vec<(u64, u64)> {
        let mut r = self.ranges.clone();
        if let (Some(l), Some(h)) = (self.low_pc, self.high_pc) {
            r.push((l, h));
        }
        r.retain(|x| x.0 != 0 && x.1 > x.0);
        r
    }

    /// Its entry: `DW_AT_entry_pc`, else `DW_AT_low_pc`, else its first range.
    fn entry(&self) -> Option<u64> {
        self.entry_pc
            .filter(|&a| a != 0)
            .or(self.low_pc.filter(|&a| a != 0))
            .or_else(|| self.ranges().first().map(|r| r.0))
    }
}

fn hex_in(s: &str) -> Option<u64> {
    let i = s.find("0x")?;
    let h: String = s[i + 2..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    u64::from_str_radix(&h, 16).ok()
}

/// The entries of a dump, by offset, in order.
fn parse_dump(text: &str) -> Vec<(u64, Die)> {
    let mut out: Vec<(u64, Die)> = Vec::new();
    let mut in_ranges = false;
    for line in text.lines() {
        if in_ranges {
            let t = line.trim();
            if t.starts_with('[') {
                let mut it = t.trim_start_matches('[').split(", ");
                let a = it.next().and_then(hex_in);
                let b = it.next().and_then(hex_in);
                if let (Some(a), Some(b), Some(d)) = (a, b, out.last_mut()) {
                    d.1.ranges.push((a, b));
                }
            }
            if t.ends_with("))") || !t.starts_with('[') {
                in_ranges = false;
            }
            if t.starts_with('[') {
                continue;
            }
        }
        if let Some((off, rest)) = line.split_once(": ") {
            if off.starts_with("0x") && rest.trim_start().starts_with("DW_TAG_") {
                let spaces = rest.len() - rest.trim_start().len();
                out.push((
                    hex_in(off).unwrap(),
                    Die {
                        tag: rest.trim().to_string(),
                        depth: spaces / 2,
                        ..Die::default()
                    },
                ));
                continue;
            }
            if off.starts_with("0x") && rest.trim() == "NULL" {
                continue;
            }
        }
        let t = line.trim_start();
        let Some(d) = out.last_mut().map(|d| &mut d.1) else {
            continue;
        };
        let value = |t: &str| t.split_once('(').and_then(|(_, v)| hex_in(v));
        if t.starts_with("DW_AT_abstract_origin") || t.starts_with("DW_AT_specification") {
            if d.origin.is_none() {
                d.origin = value(t);
            }
        } else if t.starts_with("DW_AT_low_pc") {
            d.low_pc = value(t);
        } else if t.starts_with("DW_AT_high_pc") {
            d.high_pc = value(t);
        } else if t.starts_with("DW_AT_entry_pc") {
            d.entry_pc = value(t);
        } else if t.starts_with("DW_AT_ranges") {
            d.has_ranges_attr = true;
            in_ranges = !t.ends_with(')');
        }
    }
    out
}

/// llvm-dwarfdump's answer on the vmlinux of build id `id` (kept between runs when the lab
/// keeps tool outputs: klpsym_testkit::tools).
fn dwarfdump(args: &[&str], id: &str) -> String {
    klpsym_testkit::tools::tool_output("llvm-dwarfdump", args, id)
}

/// (kind, entry, caller's entry) of every copy: sorted.
type Copies = Vec<(&'static str, u64, Option<u64>)>;

/// The copies of the function whose `DW_TAG_subprogram` is at `at` in the dumped unit.
fn reader_copies(dies: &[(u64, Die)], at: u64) -> Copies {
    let by_off: HashMap<u64, &Die> = dies.iter().map(|(o, d)| (*o, d)).collect();
    let root = |mut o: u64| -> u64 {
        for _ in 0..16 {
            match by_off.get(&o).and_then(|d| d.origin) {
                Some(n) if by_off.contains_key(&n) => o = n,
                _ => break,
            }
        }
        o
    };
    let want = root(at);
    let mut out = Vec::new();
    // The enclosing subprograms with code, by depth.
    let mut stack: Vec<(usize, Option<u64>)> = Vec::new();
    for (off, d) in dies {
        while stack.last().is_some_and(|s| s.0 >= d.depth) {
            stack.pop();
        }
        let subprogram = d.tag == "DW_TAG_subprogram";
        let inlined = d.tag == "DW_TAG_inlined_subroutine";
        if (subprogram || inlined) && d.code() && root(*off) == want {
            if let Some(e) = d.entry() {
                if subprogram {
                    out.push(("out_of_line", e, None));
                } else {
                    let caller = stack.iter().rev().find_map(|s| s.1);
                    out.push(("inlined", e, caller));
                }
            }
        }
        if subprogram && d.code() {
            stack.push((d.depth, d.entry()));
        } else {
            stack.push((d.depth, None));
        }
    }
    out.sort();
    out
}

#[test]
fn inlined_copies_agree_with_llvm_dwarfdump() {
    let kernels: Vec<_> = lab::lab_kernels()
        .into_iter()
        .filter(|k| k.value("ARCH") == "amd64")
        .filter(|k| k.get("VMLINUX_DBG").is_some())
        .collect();
    if kernels.is_empty() {
        lab::skip(
            "copies against llvm-dwarfdump",
            "no amd64 lab kernel with a -dbg vmlinux (run scripts/test.sh)",
        );
        return;
    }
    let mut failures = Vec::new();
    let mut all_inlined = 0;
    for k in &kernels {
        let path = k.path("VMLINUX_DBG");
        let file = path.to_str().unwrap();
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let id: String = object::File::parse(&*bytes)
            .ok()
            .and_then(|f| object::Object::build_id(&f).ok().flatten())
            .unwrap_or_else(|| panic!("{}: no GNU build id", path.display()))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let elf = klpsym_elf::vmlinux_kallsyms(&bytes, None).expect("vmlinux parses");
        // Static functions of one definition, in address order.
        let mut count: HashMap<&str, usize> = HashMap::new();
        for e in elf.entries.iter() {
            *count.entry(e.name).or_default() += 1;
        }
        let statics: Vec<(u64, String)> = elf
            .entries
            .iter()
            .filter(|e| e.kind == b't' && count[e.name] == 1 && !e.name.contains('.'))
            .map(|e| (e.addr, e.name.to_string()))
            .collect();
        drop(count);
        drop(elf);
        let lines = DebugLines::vmlinux(std::sync::Arc::new(bytes)).expect("DWARF");
        let rs = &mut Resched::none();
        assert!(
            !lines.refers_across_units(rs).unwrap(),
            "{}: a gcc kernel's DWARF refers within units",
            k.name
        );
        let (mut functions, mut inlined, mut tried) = (0usize, 0usize, 0usize);
        let mut dumps: HashMap<u64, Vec<(u64, Die)>> = HashMap::new();
        for (addr, name) in statics.iter().step_by(29) {
            if functions >= 80 && inlined >= 60 {
                break;
            }
            tried += 1;
            let Some(f) = lines.copies_at(*addr, None, rs).unwrap() else {
                continue;
            };
            assert!(f.incomplete.is_empty(), "{name}: {:?}", f.incomplete);
            let ours_inlined = f
                .copies
                .iter()
                .filter(|c| c.place == CopyPlace::Inlined)
                .count();
            // The reader's unit at the address (`--lookup`).
            let look = dwarfdump(&[&format!("--lookup={addr:#x}"), file], &id);
            let unit = look
                .lines()
                .find(|l| l.contains(": Compile Unit:"))
                .and_then(hex_in)
                .unwrap_or_else(|| panic!("{name}: no unit in {look}"));
            // A function klpsym finds inlined somewhere is always compared; one it finds
            // inlined nowhere, whenever its unit is dumped already (then a copy klpsym missed
            // shows too).
            if ours_inlined == 0 && !dumps.contains_key(&unit) {
                continue;
            }
            let cu_die = look
                .lines()
                .find(|l| l.starts_with("0x") && l.trim_end().ends_with("DW_TAG_compile_unit"))
                .and_then(hex_in)
                .unwrap();
            let dies = dumps.entry(unit).or_insert_with(|| {
                parse_dump(&dwarfdump(
                    &[
                        &format!("--debug-info={cu_die:#x}"),
                        "--show-children",
                        file,
                    ],
                    &id,
                ))
            });
            // The function at the symbol: the subprogram with code one of whose ranges
            // starts there.
            let Some(at) = dies
                .iter()
                .find(|(_, d)| {
                    d.tag == "DW_TAG_subprogram" && d.ranges().iter().any(|r| r.0 == *addr)
                })
                .map(|(o, _)| *o)
            else {
                failures.push(format!(
                    "{}: {name}: llvm-dwarfdump shows no subprogram at {addr:#x}",
                    k.name
                ));
                continue;
            };
            let theirs = reader_copies(dies, at);
            let mut ours: Copies = f
                .copies
                .iter()
                .map(|c| match c.place {
                    CopyPlace::OutOfLine => ("out_of_line", c.entry, None),
                    CopyPlace::Inlined => ("inlined", c.entry, c.caller.as_ref().map(|c| c.entry)),
                })
                .collect();
            ours.sort();
            if ours != theirs {
                failures.push(format!(
                    "{}: {name} ({}): klpsym {ours:x?}\n    llvm-dwarfdump {theirs:x?}",
                    k.name, f.unit
                ));
            }
            functions += 1;
            inlined += ours_inlined;
            // Units are dumped once (neighbouring functions share them), a few kept.
            if dumps.len() > 16 {
                dumps.clear();
            }
        }
        eprintln!(
            "{}: {functions} functions ({tried} tried), {inlined} inlined copies, each as llvm-dwarfdump reads it",
            k.name
        );
        if functions < 50 || inlined < 30 {
            failures.push(format!(
                "{}: only {functions} functions and {inlined} inlined copies compared",
                k.name
            ));
        }
        all_inlined += inlined;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        all_inlined >= 300,
        "only {all_inlined} inlined copies compared on all kernels"
    );
}

#[test]
fn the_dump_reader_follows_origins_and_nesting() {
    // A unit as llvm-dwarfdump prints it: f inlined into g directly and through h.
    let dump = "\
0x0000000c: DW_TAG_compile_unit
              DW_AT_name\t(\"a.c\")

0x00000020:   DW_TAG_subprogram
                DW_AT_name\t(\"f\")

0x00000030:   DW_TAG_subprogram
                DW_AT_name\t(\"h\")

0x00000040:     DW_TAG_inlined_subroutine
                  DW_AT_abstract_origin\t(0x00000020 \"f\")

0x00000050:   DW_TAG_subprogram
                DW_AT_name\t(\"g\")
                DW_AT_low_pc\t(0x0000000000401000)
                DW_AT_high_pc\t(0x0000000000401040)

0x00000060:     DW_TAG_inlined_subroutine
                  DW_AT_abstract_origin\t(0x00000020 \"f\")
                  DW_AT_low_pc\t(0x0000000000401004)
                  DW_AT_high_pc\t(0x0000000000401008)

0x00000070:     DW_TAG_inlined_subroutine
                  DW_AT_abstract_origin\t(0x00000030 \"h\")
                  DW_AT_ranges\t(0x00000010
                     [0x0000000000401010, 0x0000000000401018)
                     [0x0000000000401020, 0x0000000000401028))

0x00000080:       DW_TAG_inlined_subroutine
                    DW_AT_abstract_origin\t(0x00000040 \"f\")
                    DW_AT_entry_pc\t(0x0000000000401012)
                    DW_AT_ranges\t(0x00000020
                       [0x0000000000401012, 0x0000000000401016))

0x00000090:       NULL

0x000000a0:   DW_TAG_subprogram
                DW_AT_abstract_origin\t(0x00000020 \"f\")
                DW_AT_low_pc\t(0x0000000000402000)
                DW_AT_high_pc\t(0x0000000000402010)
";
    let dies = parse_dump(dump);
    assert_eq!(dies.len(), 9);
    assert_eq!((dies[7].1.depth, dies[8].1.depth), (3, 1));
    let got = reader_copies(&dies, 0xa0);
    assert_eq!(
        got,
        vec![
            ("inlined", 0x401004, Some(0x401000)),
            ("inlined", 0x401012, Some(0x401000)),
            ("out_of_line", 0x402000, None),
        ]
    );
}
