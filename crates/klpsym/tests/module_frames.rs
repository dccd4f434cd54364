//! A module's frame in a pasted oops (`name+0xoff/0xsize [module]`) decoded without a
//! placement (#48), from the module's debug file, as decode_stacktrace.sh decodes it; the
//! module here is a gcc-built object with DWARF (skips, saying so, without gcc).

use std::process::Command;

use klpsym::{CacheDir, NoSymbol, Options, Trace};

const SRC: &str = "int frame_counter;\n\
static int __attribute__((noinline)) frame_helper(int x)\n{\n\tframe_counter += x;\n\treturn x * 3;\n}\n\
int frame_entry(int x) { return frame_helper(x) + 1; }\n";

#[test]
fn a_module_frame_decodes_from_its_debug_file_without_a_placement() {
    let dir = tempfile::tempdir().unwrap();
    let mods = dir.path().join("mods");
    std::fs::create_dir_all(&mods).unwrap();
    std::fs::write(dir.path().join("frame.c"), SRC).unwrap();
    let built = Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g", "-O1", "-c", "frame.c", "-o"])
        .arg(mods.join("frame.ko"))
        .output();
    match built {
        Ok(o) if o.status.success() => {}
        other => {
            klpsym_testkit::lab::skip(
                "a module frame from its debug file",
                &format!("gcc: {other:?}"),
            );
            return;
        }
    }
    let kallsyms = dir.path().join("kallsyms");
    std::fs::write(
        &kallsyms,
        "ffffffff81000000 T _text\nffffffff81000100 T do_thing\n",
    )
    .unwrap();
    let k = klpsym::open(
        &kallsyms,
        &Options::new().cache(CacheDir::Off).modules(&mods),
    )
    .unwrap();
    let trace = Trace::read(
        " frame_helper+0x4/0x20 [frame]\n do_thing+0x4/0x10 [frame]\n ffffffffc0001000\n"
            .as_bytes(),
        false,
    )
    .unwrap();
    let (mut answers, _) = k.answer_trace(&trace, false);
    k.add_source_lines(&mut answers, false).unwrap();
    // The module's own function: no address, its place from the debug file.
    let a = &answers[0];
    assert_eq!(a.reason, Some(NoSymbol::ModuleNotPlaced), "{a:?}");
    assert_eq!(a.address, None);
    assert_eq!(a.module.as_deref(), Some("frame"));
    let f = a.source.first().expect("a place");
    assert_eq!(f.function.as_deref(), Some("frame_helper"));
    assert_eq!(
        f.file.as_deref().map(|p| p.ends_with("frame.c")),
        Some(true),
        "{f:?}"
    );
    assert!(matches!(f.line, Some(2..=6)), "{f:?}");
    // A name the module's debug file does not define: an error, not a guess.
    let b = &answers[1];
    assert!(
        b.error
            .as_deref()
            .is_some_and(|e| e.contains("no debug file")),
        "{b:?}"
    );
    // A bare address in no placed module: the number, as before.
    assert!(!answers[2].found);
    let mut text = Vec::new();
    klpsym::render::trace(&mut text, &trace, &answers, false).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("frame_helper+0x4/0x20 [frame] => frame_helper+0x4/0x20 [frame] (module not placed: no address)"),
        "{text}"
    );
}
