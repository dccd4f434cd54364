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
    assert_eq!(errs.len(), 2, "{errs:?}");
    for name in ["b-broken_1.0", "-dbg_1.0"] {
        assert!(errs.iter().any(|e| e.contains(name)), "{name}: {errs:?}");
    }
}

/// Regression: a note beside the kernels of a folder was read as a kallsyms file and failed
/// the run ("line 1: bad hex address"); it is passed over, and said so.
#[test]
fn what_is_not_a_kernel_part_is_passed_over_with_a_note() {
    let dir = folder();
    let set = klpsym::KernelSet::open(
        &[dir.path().to_path_buf()],
        &Options::new().cache(CacheDir::Off),
    )
    .unwrap();
    let notes: Vec<&str> = set.notes().iter().map(|n| n.text.as_str()).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("notes.txt") && notes[0].contains("passed over"),
        "{notes:?}"
    );
    let (kernels, failed, first) = set.into_parts();
    assert_eq!(kernels.len(), 1);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(first.is_some());
    // Named directly, the same file is read, and what is wrong with it said.
    let named = klpsym::open(
        dir.path().join("notes.txt"),
        &Options::new().cache(CacheDir::Off),
    );
    assert!(named.is_err());
}
