//! One kernel's modules from several places at once (#48): a package's or a module tree's,
//! and a folder of out-of-tree modules.

use klpsym::{CacheDir, Loaded, Options};
use klpsym_testkit::module::{build_module, ModSpec};

fn folder_with(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let spec = ModSpec {
        name,
        ..ModSpec::default()
    };
    std::fs::write(d.path().join(format!("{name}.ko")), build_module(&spec)).unwrap();
    d
}

#[test]
fn an_out_of_tree_folder_joins_the_tree_s_modules() {
    let dir = tempfile::tempdir().unwrap();
    let kallsyms = dir.path().join("kallsyms");
    std::fs::write(
        &kallsyms,
        "ffffffff81000000 T _text\nffffffff81000100 T klp_enable_patch\n",
    )
    .unwrap();
    let (tree, oot) = (folder_with("dummy"), folder_with("oot_drv"));
    let mut opts = Options::new()
        .cache(CacheDir::Off)
        .modules(tree.path())
        .modules(oot.path());
    opts.loaded = Some(Loaded::Names(vec!["oot-drv".into(), "dummy".into()]));
    let k = klpsym::open(&kallsyms, &opts).unwrap();
    for m in ["dummy", "oot_drv"] {
        assert!(k.table().object_by_name(m).is_some(), "{m} composed");
    }
    let t = k.module_tree().unwrap().expect("a tree");
    assert_eq!(t.len(), 2);
    // The tree alone does not hold the out-of-tree module: an error naming it.
    let mut one = Options::new().cache(CacheDir::Off).modules(tree.path());
    one.loaded = opts.loaded.clone();
    let e = klpsym::open(&kallsyms, &one).unwrap_err();
    assert!(e.to_string().contains("oot"), "{e}");
}
