//! Which definition each symbol of a patch binds, and whether it is the one the patch was
//! built for: a position still in range on another build can name another function, and the
//! patch then loads and patches the wrong code. Two builds of a module here differ as point
//! releases do: the second has one more copy of a static function, in a file compiled first.

use klpsym::{AsBuilt, CacheDir, CheckOptions, Identity, Options, Patch};
use klpsym_testkit::elf::{At, Fixture};
use klpsym_testkit::module::{build_module, ModSpec, ObjSpec};
use object::{Architecture, SectionKind};

/// A module `nf_tables` whose static `helper` is defined once in each of `files`, in order.
fn build(files: &[&str]) -> Vec<u8> {
    let mut f = Fixture::new(Architecture::X86_64);
    f.section(".modinfo", SectionKind::ReadOnlyData, b"name=nf_tables\0");
    let text = f.section(".text", SectionKind::Text, &[]);
    for (i, file) in files.iter().enumerate() {
        f.sym(file, At::Abs, 0, 'l', 'F');
        f.sym("helper", At::Sec(text), 0x40 * i as u64, 'l', 'f');
    }
    f.sym("nft_export_fn", At::Sec(text), 0x800, 'g', 'f');
    f.bytes()
}

fn patch(sympos: u64) -> Vec<u8> {
    build_module(&ModSpec {
        objects: vec![ObjSpec {
            name: Some("nf_tables"),
            funcs: vec![("helper", sympos)],
        }],
        ..ModSpec::default()
    })
}

#[test]
fn a_position_that_names_another_definition_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().cache(CacheDir::Off);
    let built = dir.path().join("built.ko");
    std::fs::write(&built, build(&["a.c", "b.c"])).unwrap();
    let next = dir.path().join("next.ko");
    std::fs::write(&next, build(&["c.c", "a.c", "b.c"])).unwrap();
    let lp = dir.path().join("lp.ko");
    // Built for b.c's helper: position 2 on the built-for module.
    std::fs::write(&lp, patch(2)).unwrap();
    let p = Patch::read(&lp, &opts).unwrap();
    let target = klpsym::open(&next, &opts).unwrap();
    let same = klpsym::open(&built, &opts).unwrap();
    let copts = CheckOptions {
        built_for: Some(built.clone()),
        ..CheckOptions::default()
    };
    let run = klpsym::check(&p, &[&same, &target], &copts).unwrap();

    let b = &run.results[0].bindings[0];
    assert_eq!(
        b.identity,
        Some(Identity {
            file: "b.c".into(),
            rank: 1
        })
    );
    assert_eq!(b.as_built, Some(AsBuilt::Same));

    // On the next build position 2 is a.c's helper: the patch would load and replace it.
    let b = &run.results[1].bindings[0];
    assert_eq!(b.bound.as_ref().unwrap().position, 2);
    assert_eq!(b.identity.as_ref().unwrap().file, "a.c");
    assert_eq!(
        b.as_built,
        Some(AsBuilt::Moved {
            built_for: Identity {
                file: "b.c".into(),
                rank: 1
            },
            intended_position: 3
        })
    );
    assert!(run.results[1].binds_another());
    assert!(run.binds_another());

    // A build without b.c: the definition is gone, though position 2 is still in range.
    let gone = dir.path().join("gone.ko");
    std::fs::write(&gone, build(&["c.c", "a.c"])).unwrap();
    let k = klpsym::open(&gone, &opts).unwrap();
    let run = klpsym::check(&p, &[&k], &copts).unwrap();
    assert!(matches!(
        run.results[0].bindings[0].as_built,
        Some(AsBuilt::Gone { .. })
    ));

    // Without a built-for kernel nothing is compared, and nothing is said to be wrong; but
    // nothing is proven either: the bindings are listed as unchecked, the verdict is not
    // `accepted` and the run is incomplete (what `--strict` fails on).
    let run = klpsym::check(&p, &[&target], &CheckOptions::default()).unwrap();
    assert_eq!(run.results[0].bindings[0].as_built, None);
    assert!(!run.binds_another());
    let r = &run.results[0];
    assert!(
        r.unchecked
            .iter()
            .any(|u| u.subject == "bindings" && u.why.contains("no built-for kernel")),
        "{:?}",
        r.unchecked
    );
    assert_ne!(r.verdict(), klpsym::PatchVerdictKind::Accepted);
    assert!(run.incomplete());
}

/// Without a patch: how a name's definitions move between two builds, matched by identity.
#[test]
fn drift_between_two_builds_names_what_moved_and_what_is_new() {
    use klpsym::DriftStatus::*;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().cache(CacheDir::Off);
    let a = dir.path().join("a.ko");
    std::fs::write(&a, build(&["a.c", "b.c", "d.c"])).unwrap();
    let b = dir.path().join("b.ko");
    std::fs::write(&b, build(&["c.c", "a.c", "b.c"])).unwrap();
    let (ka, kb) = (
        klpsym::open(&a, &opts).unwrap(),
        klpsym::open(&b, &opts).unwrap(),
    );
    let d = klpsym::drift(&ka, &kb, "helper", "nf_tables").unwrap();
    type Row = (
        Option<String>,
        Option<u64>,
        Option<u64>,
        klpsym::DriftStatus,
    );
    let rows: Vec<Row> = d
        .rows
        .iter()
        .map(|r| {
            (
                r.identity.as_ref().map(|i| i.file.clone()),
                r.from_position,
                r.to_position,
                r.status,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (Some("a.c".into()), Some(1), Some(2), Moved),
            (Some("b.c".into()), Some(2), Some(3), Moved),
            (Some("d.c".into()), Some(3), None, Gone),
            (Some("c.c".into()), None, Some(1), New),
        ]
    );
    assert!(d.moved());
    let same = klpsym::drift(&ka, &ka, "helper", "nf_tables").unwrap();
    assert!(same.rows.iter().all(|r| r.status == Same));
    assert!(!same.moved());
}

/// A module object whose module is not loaded binds in the module's own `.ko` (its package's
/// here), with identities from its FILE symbols; and the module itself is compared with the
/// one of the kernel the patch was built for: other sources (another srcversion: an
/// out-of-tree rebuild, kpatch#1435's case) are the headline, as a binding of another
/// definition is.
#[test]
fn a_module_object_binds_in_its_ko_and_another_module_build_is_the_headline() {
    use klpsym_testkit::packages::{deb, Comp};
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().cache(CacheDir::Off);
    let module = |srcversion: &str| {
        let mut f = Fixture::new(Architecture::X86_64);
        let info = format!("name=nf_tables\0srcversion={srcversion}\0");
        f.section(".modinfo", SectionKind::ReadOnlyData, info.as_bytes());
        let text = f.section(".text", SectionKind::Text, &[]);
        for (i, file) in ["a.c", "b.c"].iter().enumerate() {
            f.sym(file, At::Abs, 0, 'l', 'F');
            f.sym("helper", At::Sec(text), 0x40 * i as u64, 'l', 'f');
        }
        f.mcount_sites(text, &[0, 0x40]);
        f.bytes()
    };
    let kallsyms = b"ffffffff81000000 T _text\nffffffff81000100 T klp_enable_patch\nffffffff81000200 T _etext\n";
    let package = |name: &str, srcversion: &str| {
        let ko = module(srcversion);
        let files: [(&str, &[u8]); 2] = [
            ("./boot/vmlinuz-1.0.0-1-amd64", kallsyms),
            ("./lib/modules/1.0.0-1-amd64/kernel/net/nf_tables.ko", &ko),
        ];
        let p = dir.path().join(name);
        std::fs::write(&p, deb(Comp::Xz, &files)).unwrap();
        p
    };
    let built = package("built_1.0_amd64.deb", "0123456789ABCDEF0123456");
    let same = package("same_1.0_amd64.deb", "0123456789ABCDEF0123456");
    let rebuilt = package("rebuilt_1.0_amd64.deb", "FEDCBA9876543210FEDCBA9");
    let lp = dir.path().join("lp.ko");
    std::fs::write(&lp, patch(2)).unwrap();
    let p = Patch::read(&lp, &opts).unwrap();
    let copts = CheckOptions {
        built_for: Some(built),
        ..CheckOptions::default()
    };
    let k_same = klpsym::open(&same, &opts).unwrap();
    let k_rebuilt = klpsym::open(&rebuilt, &opts).unwrap();
    let run = klpsym::check(&p, &[&k_same, &k_rebuilt], &copts).unwrap();
    assert!(run.failed.is_empty(), "{:?}", run.failed);
    for r in &run.results {
        let b = &r.bindings[0];
        assert_eq!(b.object, "nf_tables");
        assert_eq!(b.bound.as_ref().map(|c| c.position), Some(2), "{b:?}");
        assert_eq!(b.identity.as_ref().map(|i| i.file.as_str()), Some("b.c"));
        assert_eq!(b.as_built, Some(AsBuilt::Same));
    }
    let m = &run.results[0].modules[0];
    assert_eq!(m.as_built, klpsym::ModuleAsBuilt::Same, "{m:?}");
    assert!(!run.results[0].binds_another());
    assert_ne!(
        run.results[0].verdict(),
        klpsym::PatchVerdictKind::BindsAnotherDefinition
    );
    let m = &run.results[1].modules[0];
    assert!(m.differs(), "{m:?}");
    assert_eq!(
        run.results[1].verdict(),
        klpsym::PatchVerdictKind::BindsAnotherDefinition
    );
}

/// A table that knows source files by base name only (ELF FILE symbols) cannot confirm a
/// path: `sympos --file DIR/b.c` lists the definitions of every `b.c` and says the path is
/// not confirmed (the command exits 1); the base name itself is an answer.
#[test]
fn a_path_matched_by_base_name_only_is_not_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().cache(CacheDir::Off);
    let m = dir.path().join("nf_tables.ko");
    std::fs::write(&m, build(&["a.c", "b.c"])).unwrap();
    let k = klpsym::open(&m, &opts).unwrap();

    let d = k.sympos("helper", None, Some("net/netfilter/b.c")).unwrap();
    assert!(d.base_name_only);
    assert_eq!((d.count, d.all), (1, 2));
    assert_eq!(d.candidates[0].position, 2);
    assert!(d.file_note.as_deref().unwrap().contains("base name only"));

    let d = k.sympos("helper", None, Some("b.c")).unwrap();
    assert!(!d.base_name_only && d.file_note.is_none());
    assert_eq!(d.count, 1);

    let d = k.sympos("helper", None, Some("no/such/c.c")).unwrap();
    assert_eq!(d.count, 0);
}
