//! Many kernels at once, as users give them (a folder of packages with a broken file among
//! them): one input that cannot be read is its own error, and every other kernel still opens.
//! Before, the first package that could not be read failed the whole folder.

use klpsym::{CacheDir, Options};
use klpsym_testkit::packages::{deb, Comp};

fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("ffffffff81000000 T _text\n");
    for i in 0..50u64 {
        text += &format!("{:016x} t fn_{i}\n", 0xffff_ffff_8100_1000 + i * 0x40);
    }
    std::fs::write(dir.path().join("a-kallsyms.txt"), text).unwrap();
    // A package cut short, and a debug package (by its name) cut short too.
    let files: [(&str, &[u8]); 1] = [("./boot/config-1.0.0-1-amd64", b"CONFIG_MODULES=y\n")];
    let d = deb(Comp::Plain, &files);
    std::fs::write(dir.path().join("b-broken_1.0_amd64.deb"), &d[..d.len() / 2]).unwrap();
    std::fs::write(
        dir.path()
            .join("linux-image-1.0.0-1-amd64-dbg_1.0_amd64.deb"),
        &d[..d.len() / 2],
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a kernel\n").unwrap();
    dir
}

fn errors(opened: &[klpsym::Opened]) -> Vec<String> {
    opened
        .iter()
        .filter_map(|o| {
            o.kernel
                .as_ref()
                .err()
                .map(|e| format!("{}: {e}", o.source.file_name().unwrap().to_string_lossy()))
        })
        .collect()
}

#[test]
fn a_broken_input_is_its_own_error_and_the_others_open() {
    let dir = folder();
    let opts = Options::new().cache(CacheDir::Off);
    let opened = klpsym::open_all(&[dir.path().to_path_buf()], &opts).unwrap();
    let good: Vec<_> = opened.iter().filter(|o| o.kernel.is_ok()).collect();
    assert_eq!(good.len(), 1, "{:?}", errors(&opened));
    assert_eq!(
        good[0].kernel.as_ref().unwrap().table().len(),
        51,
        "the kallsyms text"
    );
    let errs = errors(&opened);
    assert_eq!(errs.len(), 3, "{errs:?}");
    for name in ["b-broken_1.0", "-dbg_1.0", "notes.txt"] {
        assert!(errs.iter().any(|e| e.contains(name)), "{name}: {errs:?}");
    }
}

/// A verb that needs no source files passes a debug package over unread (a Debian `-dbg`
/// package is about 1 GiB, over the default input limit): it is not even an error then.
#[test]
fn debug_packages_are_read_only_when_asked() {
    let dir = folder();
    let opts = Options {
        debug_packages: false,
        ..Options::new().cache(CacheDir::Off)
    };
    let opened = klpsym::open_all(&[dir.path().to_path_buf()], &opts).unwrap();
    let errs = errors(&opened);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(!errs.iter().any(|e| e.contains("-dbg_")), "{errs:?}");
}
