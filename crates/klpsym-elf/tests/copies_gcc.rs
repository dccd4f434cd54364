//! Every copy of a function from the DWARF gcc writes (`-g -O2`): small programs whose static
//! functions are inlined into some callers and kept out of line for others (their address
//! taken), cloned (`.constprop`, `.isra`), split (`.cold`), defined under one name in two
//! files, inlined through another inline function, inlined across files by LTO
//! (`DW_FORM_ref_addr`), and a relocatable object read as a module's debug file is. What gcc
//! made is read from `nm` (the symbols) and from the objects' own disassembly where a call
//! is what tells; the expected callers are those of the sources written here. Skips with a
//! message where gcc is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use klpsym_elf::{CopiesIndex, CopyPlace, DebugLines, FunctionCopies};
use klpsym_resched::resched::Resched;

/// helper is inlined into inl_caller and, through middle, into outer; its address is taken,
/// so it also stays out of line. clonee is called with a constant and through a pointer it
/// only reads: gcc clones it. splitme calls a cold function in a loop: gcc splits that path
/// off (`splitme.cold`). b.c defines another static helper, and a main that calls everything
/// (what LTO keeps).
const A: &str = r#"
extern int sink(int);
static int helper(int x)
{
	return sink(x * 7 + 3);
}
int inl_caller(int x) { return helper(x) + 1; }
static inline int middle(int x) { return helper(x) * 2; }
int outer(int x) { return middle(x) - 1; }
int (*helper_ptr)(int) = helper;

static int __attribute__((noinline)) clonee(const int *p, int k)
{
	return sink(*p * k + k);
}
int c1(int v) { return clonee(&v, 3); }
int c2(int v) { return clonee(&v, 3) + 1; }

extern void __attribute__((cold)) report(int);
int __attribute__((noinline)) splitme(const int *p, int n)
{
	int i, s = 0;

	for (i = 0; i < n; i++) {
		if (__builtin_expect(p[i] < 0, 0)) {
			report(p[i]);
			report(i);
			continue;
		}
		s += sink(p[i]);
	}
	return s;
}
"#;

const B: &str = r#"
extern int sink(int);
static int helper(int x)
{
	return sink(x - 5);
}
int b_caller(int x) { return helper(x) + 2; }
int (*b_ptr)(int) = helper;
int sink(int x) { return x ^ 0x55; }
void report(int x) { sink(x); }
extern int inl_caller(int), outer(int), c1(int), c2(int), splitme(const int *, int);
extern int (*helper_ptr)(int);
int main(void)
{
	int v[2] = { 1, -1 };

	return inl_caller(1) + outer(2) + c1(3) + c2(4) + splitme(v, 2) + b_caller(5) +
	       helper_ptr(6) + b_ptr(7);
}
"#;

fn run(dir: &Path, prog: &str, args: &[&str]) -> Option<String> {
    match Command::new(prog).current_dir(dir).args(args).output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => {
            klpsym_testkit::lab::skip(
                &format!("copies in an object {prog} built"),
                &format!(
                    "{prog} {args:?} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
            );
            None
        }
        Err(e) => {
            klpsym_testkit::lab::skip(
                &format!("copies in an object {prog} built"),
                &format!("{prog}: {e}"),
            );
            None
        }
    }
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("klpsym-copies-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.c"), A).unwrap();
    std::fs::write(d.join("b.c"), B).unwrap();
    d
}

/// `nm`'s text symbols: name -> addresses, in symbol-table order.
fn symbols(dir: &Path, file: &str) -> BTreeMap<String, Vec<u64>> {
    let out = run(dir, "nm", &[file]).expect("nm runs where gcc did");
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 && matches!(f[1], "t" | "T") {
            m.entry(f[2].to_string())
                .or_default()
                .push(u64::from_str_radix(f[0], 16).unwrap());
        }
    }
    m
}

fn lines_of(path: &Path) -> DebugLines {
    let bytes: Arc<Vec<u8>> = Arc::new(std::fs::read(path).unwrap());
    DebugLines::vmlinux(bytes).expect("DWARF")
}

/// The name of the symbol at `addr`.
fn symbol_at(syms: &BTreeMap<String, Vec<u64>>, addr: u64) -> Option<&str> {
    syms.iter()
        .find(|(_, a)| a.contains(&addr))
        .map(|(n, _)| n.as_str())
}

fn inlined_callers(f: &FunctionCopies, syms: &BTreeMap<String, Vec<u64>>) -> Vec<String> {
    let mut v: Vec<String> = f
        .copies
        .iter()
        .filter(|c| c.place == CopyPlace::Inlined)
        .map(|c| {
            let caller = c.caller.as_ref().expect("an inlined copy has a caller");
            let sym = symbol_at(syms, caller.entry).unwrap_or("?");
            // The symbol at the caller's entry is the function DWARF names (or its clone).
            assert!(
                caller
                    .name
                    .as_deref()
                    .is_some_and(|n| sym == n || sym.starts_with(&format!("{n}."))),
                "caller {caller:?} at a symbol named {sym}"
            );
            sym.to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn copies_of_static_functions_by_address_and_by_name() {
    let d = dir("plain");
    let Some(_) = run(
        &d,
        "gcc",
        &["-g", "-O2", "-fno-pie", "-no-pie", "-o", "t", "a.c", "b.c"],
    ) else {
        return;
    };
    let syms = symbols(&d, "t");
    let lines = lines_of(&d.join("t"));
    let rs = &mut Resched::none();
    assert!(!lines.refers_across_units(rs).unwrap());
    // Two helpers: a.c's and b.c's.
    let helpers = &syms["helper"];
    assert_eq!(helpers.len(), 2, "{syms:?}");
    let mut units = Vec::new();
    for &h in helpers {
        let f = lines
            .copies_at(h, None, rs)
            .unwrap()
            .expect("a function there");
        assert!(f.incomplete.is_empty(), "{:?}", f.incomplete);
        assert_eq!(f.name, "helper");
        let out: Vec<u64> = f
            .copies
            .iter()
            .filter(|c| c.place == CopyPlace::OutOfLine)
            .map(|c| c.entry)
            .collect();
        assert_eq!(out, [h], "{f:#?}");
        let callers = inlined_callers(&f, &syms);
        match f.unit.as_str() {
            "a.c" => {
                assert_eq!(callers, ["inl_caller", "outer"], "{f:#?}");
                let through: Vec<&Vec<String>> = f
                    .copies
                    .iter()
                    .filter(|c| c.place == CopyPlace::Inlined)
                    .map(|c| &c.through)
                    .collect();
                assert!(through.contains(&&vec!["middle".to_string()]), "{f:#?}");
                // Call sites: helper is called on line 7 (inl_caller) and 8 (middle).
                let mut sites: Vec<u64> = f
                    .copies
                    .iter()
                    .filter_map(|c| c.call_site.as_ref())
                    .map(|s| {
                        assert_eq!(s.file, "a.c");
                        s.line
                    })
                    .collect();
                sites.sort();
                assert_eq!(sites, [7, 8], "{f:#?}");
                assert_eq!(f.decl.as_ref().map(|d| d.line), Some(3));
            }
            "b.c" => assert_eq!(callers, ["b_caller"], "{f:#?}"),
            u => panic!("helper in unit {u}"),
        }
        units.push(f.unit.clone());
    }
    units.sort();
    assert_eq!(units, ["a.c", "b.c"]);

    // By name: both definitions, each with its copies, the same as by address.
    let named = lines.copies_named("helper", None, rs).unwrap();
    assert_eq!(named.len(), 2, "{named:#?}");
    for f in &named {
        let by_addr = lines
            .copies_at(
                f.copies
                    .iter()
                    .find(|c| c.place == CopyPlace::OutOfLine)
                    .unwrap()
                    .entry,
                None,
                rs,
            )
            .unwrap()
            .unwrap();
        assert_eq!(by_addr.copies, f.copies);
        assert_eq!(by_addr.definition, f.definition);
    }
    // The index finds the same units.
    let index = lines.copies_index(rs).unwrap();
    assert_eq!(index.units_of("helper").len(), 2);
    assert_eq!(index.units_of("no_such_function").len(), 0);
    assert_eq!(
        lines
            .copies_named("helper", Some(&index), rs)
            .unwrap()
            .len(),
        2
    );
    // An inline function that has no out-of-line copy: found by name, inlined into outer.
    let middle = lines.copies_named("middle", Some(&index), rs).unwrap();
    assert_eq!(middle.len(), 1);
    assert_eq!(inlined_callers(&middle[0], &syms), ["outer"]);
    assert!(!middle[0]
        .copies
        .iter()
        .any(|c| c.place == CopyPlace::OutOfLine));
    // The index reads back as written, and a damaged one is refused.
    let bytes = index.encode(rs).unwrap();
    assert_eq!(
        CopiesIndex::decode(&bytes, rs).unwrap().as_ref(),
        Some(&index)
    );
    assert_eq!(
        CopiesIndex::decode(&bytes[..bytes.len() - 1], rs).unwrap(),
        None
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn clones_and_cold_parts_are_copies_of_their_function() {
    let d = dir("clones");
    let Some(_) = run(
        &d,
        "gcc",
        &["-g", "-O2", "-fno-pie", "-no-pie", "-o", "t", "a.c", "b.c"],
    ) else {
        return;
    };
    let syms = symbols(&d, "t");
    let lines = lines_of(&d.join("t"));
    let rs = &mut Resched::none();
    // Every symbol gcc made of clonee (clonee itself may be gone): each an out-of-line copy
    // of the one definition, entered at its symbol.
    let made: Vec<(&String, u64)> = syms
        .iter()
        .filter(|(n, _)| n.starts_with("clonee."))
        .flat_map(|(n, a)| a.iter().map(move |&a| (n, a)))
        .collect();
    assert!(!made.is_empty(), "gcc made no clone of clonee: {syms:?}");
    let named = lines.copies_named("clonee", None, rs).unwrap();
    assert_eq!(named.len(), 1, "{named:#?}");
    let entries: Vec<u64> = named[0]
        .copies
        .iter()
        .filter(|c| c.place == CopyPlace::OutOfLine)
        .map(|c| c.entry)
        .collect();
    for (n, a) in &made {
        if n.ends_with(".cold") {
            continue;
        }
        assert!(entries.contains(a), "{n} at {a:#x} not among {entries:x?}");
        let f = lines.copies_at(*a, None, rs).unwrap().unwrap();
        assert_eq!(f.definition, named[0].definition, "{n}");
    }
    // splitme's cold part (when gcc split one off) lies in one of its copy's ranges.
    match syms.get("splitme.cold") {
        Some(cold) => {
            let f = lines
                .copies_at(syms["splitme"][0], None, rs)
                .unwrap()
                .unwrap();
            let copy = &f.copies[0];
            assert!(copy.ranges.len() >= 2, "{copy:?}");
            assert!(copy.ranges.iter().any(|r| r.0 == cold[0]), "{copy:?}");
        }
        None => klpsym_testkit::lab::skip(
            "a .cold part among a function's ranges",
            "gcc split no splitme.cold here",
        ),
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn lto_inlines_across_units_and_the_index_finds_them() {
    let d = dir("lto");
    // b.c's sink is inlined into a.c's functions by LTO: the units LTO writes refer to the
    // units of the sources (DW_FORM_ref_addr).
    let Some(_) = run(
        &d,
        "gcc",
        &[
            "-g", "-O2", "-flto", "-fno-pie", "-no-pie", "-o", "t", "a.c", "b.c",
        ],
    ) else {
        return;
    };
    let syms = symbols(&d, "t");
    let lines = lines_of(&d.join("t"));
    let rs = &mut Resched::none();
    assert!(
        lines.refers_across_units(rs).unwrap(),
        "gcc's LTO DWARF refers across units"
    );
    // Without an index the answer says it may miss copies in other units.
    let alone = lines.copies_named("sink", None, rs).unwrap();
    assert!(alone.iter().all(|f| !f.incomplete.is_empty()), "{alone:#?}");
    let index = lines.copies_index(rs).unwrap();
    assert!(index.references() > 0);
    let found = lines.copies_named("sink", Some(&index), rs).unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert!(f.incomplete.is_empty(), "{:?}", f.incomplete);
    assert_eq!(f.unit, "b.c");
    // Every inlined copy sits in a function LTO kept: a.c's (as their clones and
    // `.lto_priv` copies) and main, each named by DWARF after a source function.
    let callers = inlined_callers(f, &syms);
    assert!(!callers.is_empty(), "{f:#?}");
    assert!(
        callers.iter().any(|c| c != "main"),
        "inlined across units into a.c's functions: {callers:?}"
    );
    // The same copies by address where LTO kept a clone of a function: a.c's helper's
    // out-of-line copy (renamed `.lto_priv.N`) is found across units too.
    for (n, a) in syms
        .iter()
        .filter(|(n, _)| n.starts_with("helper.lto_priv."))
    {
        let h = lines.copies_at(a[0], Some(&index), rs).unwrap().expect(n);
        assert_eq!(h.name, "helper", "{n}");
        assert!(h.incomplete.is_empty(), "{:?}", h.incomplete);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_relocatable_object_places_its_copies_in_its_sections() {
    let d = dir("module");
    let Some(_) = run(&d, "gcc", &["-g", "-O2", "-c", "-o", "a.o", "a.c"]) else {
        return;
    };
    let bytes = std::fs::read(d.join("a.o")).unwrap();
    let lines = DebugLines::module(&bytes).expect("DWARF");
    assert!(lines.is_module());
    let rs = &mut Resched::none();
    let (at, section) = lines.place_symbol("helper", 0, None).expect("helper");
    assert!(section.starts_with(".text"), "{section}");
    let f = lines
        .copies_at(at, None, rs)
        .unwrap()
        .expect("helper's copies");
    assert_eq!(f.unit, "a.c");
    let mut callers: Vec<&str> = f
        .copies
        .iter()
        .filter(|c| c.place == CopyPlace::Inlined)
        .map(|c| {
            lines
                .symbol_at(c.caller.as_ref().unwrap().entry)
                .expect("a symbol holds the caller")
                .0
        })
        .collect();
    callers.sort();
    assert_eq!(callers, ["inl_caller", "outer"]);
    // Each inlined copy lies inside its caller's symbol.
    for c in f.copies.iter().filter(|c| c.place == CopyPlace::Inlined) {
        let caller = lines.symbol_at(c.caller.as_ref().unwrap().entry).unwrap();
        for r in &c.ranges {
            let (name, sec, _) = lines.symbol_at(r.0).expect("code in a symbol");
            assert!(
                name == caller.0 || name.starts_with(&format!("{}.", caller.0)),
                "{name}"
            );
            assert!(sec.starts_with(".text"));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}
