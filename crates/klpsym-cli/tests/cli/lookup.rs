//! `lookup`, `sympos` and `search`: positions, modules, ambiguity and what a missing name has instead.

use crate::*;

#[test]
fn lookup_ambiguous_prints_the_kernel_message_and_exits_1() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--kernel", &k]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(
            "livepatch: unresolvable ambiguity for symbol 'init_once' in object '(null)'\n"
        ),
        "{out}"
    );
    // candidates with positions 1..3, in kallsyms order
    assert!(out.contains("   1  0xffffffff81000100"), "{out}");
    assert!(out.contains("   3  0xffffffff81000280"), "{out}");
    assert!(
        !out.contains("0xffffffffc0000000"),
        "module symbols are not vmlinux candidates: {out}"
    );
}

#[test]
fn lookup_positions_and_modules() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--sympos", "2", "--kernel", &k]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o)
            .starts_with("ffffffff81000200 t init_once (position 2 of 3 in vmlinux, size 0x80)"),
        "{}",
        stdout(&o)
    );
    let o = run(&["lookup", "init_once", "-p", "4", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with(
        "livepatch: symbol position 4 for symbol 'init_once' in object 'vmlinux' not found"
    ));
    let o = run(&["lookup", "helper", "--object", "nf-tables.ko", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with(
        "livepatch: unresolvable ambiguity for symbol 'helper' in object 'nf_tables'"
    ));
    let o = run(&["lookup", "init_once", "--object", "nf_tables", "-k", &k]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run(&["lookup", "nothing_here", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("livepatch: symbol 'nothing_here' not found in symbol table"));
    let o = run(&["lookup", "helper", "--object", "ext4", "-k", &k]);
    assert!(
        stdout(&o).contains("not in this symbol table"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn lookup_json_has_the_documented_fields() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["lookup", "init_once", "--json", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["name"], "init_once");
    assert_eq!(v["object"], "vmlinux");
    let r = &v["results"][0];
    assert_eq!(r["verdict"], "ambiguous");
    assert_eq!(
        r["message"],
        "livepatch: unresolvable ambiguity for symbol 'init_once' in object '(null)'"
    );
    assert_eq!(r["candidates"].as_array().unwrap().len(), 3);
    assert_eq!(r["candidates"][1]["position"], 2);
    assert_eq!(r["candidates"][1]["address"], "0xffffffff81000200");
    assert_eq!(r["candidates"][1]["size"], "0x80");
}

#[test]
fn sympos_lists_every_object() {
    let f = Fixture::new();
    let k = sample(&f);
    let o = run(&["sympos", "init_once", "-k", &k]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.starts_with("init_once: 4 definition(s)"), "{out}");
    assert!(
        out.contains("   1  0xffffffffc0000000  t     0x40        nf_tables"),
        "{out}"
    );
    let o = run(&[
        "sympos",
        "init_once",
        "--object",
        "nf_tables",
        "--json",
        "-k",
        &k,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["count"], 1);
    let o = run(&["sympos", "absent", "-k", &k]);
    assert_eq!(o.status.code(), Some(1));
}

const VARIANTS: &str = "\
ffffffff81000000 T _text
ffffffff81000100 t init_once
ffffffff81000200 t show_map.isra.0
ffffffff81000300 t show_map.cold
ffffffff81000400 t m_show
ffffffff81000500 t m_show
ffffffff81000600 T _etext
ffffffffc0000000 t show_map.isra.0\t[ext4]
";

#[test]
fn search_finds_names_by_glob_and_substring() {
    let f = Fixture::new();
    let k = f.file("v.txt", VARIANTS.as_bytes()).display().to_string();
    let o = run(&["search", "show*", "--kernel", &k]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.starts_with("2 name(s) matching glob 'show*'"), "{out}");
    assert!(
        out.contains("show_map.isra.0      2  vmlinux ext4"),
        "{out}"
    );
    let o = run(&["search", "show", "--kernel", &k, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "substring");
    assert_eq!(
        v["results"][0]["names"], 3,
        "m_show, show_map.isra.0, show_map.cold"
    );
    assert_eq!(v["results"][0]["matches"][2]["name"], "m_show");
    assert_eq!(v["results"][0]["matches"][2]["count"], 2);
    let o = run(&["search", "m_sh?w", "--kernel", &k, "--object", "ext4"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

/// A missing name: its compiler-made variants, and where they are.
#[test]
fn a_missing_name_points_at_its_compiler_made_variants() {
    let f = Fixture::new();
    let k = f.file("v.txt", VARIANTS.as_bytes()).display().to_string();
    let o = run(&["lookup", "show_map", "--kernel", &k]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out.contains("compiler-made variant: show_map.isra.0 [vmlinux]"),
        "{out}"
    );
    assert!(
        out.contains("compiler-made variant: show_map.cold [vmlinux]"),
        "{out}"
    );
    let o = run(&["lookup", "show_map", "--kernel", &k, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["variants"].as_array().unwrap().len(), 3);
}

/// A kernel that loads no livepatch (here: a whole vmlinux table without klp_enable_patch) is
/// said to, once per kernel on stderr and in the JSON, by lookup and sympos alike; the answer
/// itself is still the lookup code's.
#[test]
fn lookup_and_sympos_say_when_a_kernel_loads_no_livepatch() {
    let f = Fixture::new();
    let mut text = String::new();
    for i in 0..1500u64 {
        text.push_str(&format!(
            "{:016x} t fn_{i}\n",
            0xffff_ffff_8100_0000u64 + i * 16
        ));
    }
    let k = f.file("nolp.txt", text.as_bytes()).display().to_string();
    for verb in ["lookup", "sympos"] {
        let o = run(&[verb, "fn_3", "--kernel", &k]);
        assert!(o.status.success(), "{verb}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            err.matches("loads no livepatch").count(),
            1,
            "{verb}: {err}"
        );
        assert!(stdout(&o).contains("fn_3"), "{verb}");
        let o = run(&[verb, "fn_3", "--kernel", &k, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            v["results"][0]["livepatch_unsupported"]
                .as_str()
                .is_some_and(|s| s.contains("klp_enable_patch")),
            "{verb}: {v}"
        );
    }
}

/// `search` answers the author's other questions: only the names a patch must give a
/// position for (`--duplicates`), in name order (`--sort`), without the `__pfx_`/`__cfi_`
/// twins every function has on kernels built with padding or kCFI (`--fold`).
#[test]
fn search_lists_duplicates_sorted_and_folds_twins() {
    let f = Fixture::new();
    let text = "\
ffffffff81000000 T _text
ffffffff81000100 t __pfx_zeta
ffffffff81000110 t zeta
ffffffff81000200 t __cfi_alpha
ffffffff81000210 t alpha
ffffffff81000300 t __pfx_zeta
ffffffff81000310 t zeta
ffffffff81000400 t alpha_unique
";
    let k = f.file("k.txt", text.as_bytes()).display().to_string();
    let o = run(&["search", "*", "-k", &k, "--duplicates", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["results"][0]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["__pfx_zeta", "zeta"]);
    let o = run(&["search", "*", "-k", &k, "--duplicates", "--fold", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["results"][0]["matches"];
    assert_eq!(m.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(m[0]["name"], "zeta");
    assert_eq!(m[0]["twins"][0], "__pfx_zeta");
    let o = run(&["search", "*a*", "-k", &k, "--sort", "--fold"]);
    let out = stdout(&o);
    let listed: Vec<&str> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, ["alpha", "alpha_unique", "zeta"], "{out}");
    assert!(out.contains("(+ __cfi_alpha)"), "{out}");
}
