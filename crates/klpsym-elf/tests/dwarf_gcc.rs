//! Source files and declaration lines from DWARF that gcc writes, plain and compressed
//! (`-gz=zlib`; `objcopy --compress-debug-sections=zstd`), on a small static executable whose
//! two files each define a static `helper`: the duplicated-name case in miniature. The
//! expected files and lines are those of the sources written here; readelf confirms that the
//! sections are compressed. Skips with a message where gcc or objcopy is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use klpsym_resched::resched::Resched;

const A: &str = "static volatile int counter = 1; static int __attribute__((noinline)) helper(int x) { return x + counter; }\nint a_entry(int x) { return helper(x); }\n";
const B: &str = "static volatile int counter = 3;\n\nstatic int __attribute__((noinline)) helper(int x)\n{\n\treturn x * counter;\n}\nint _start(void) { extern int a_entry(int); return helper(a_entry(2)); }\n";
/// A file of data alone (no code: no address range of its unit).
const C: &str = "int c_data = 5;\n";

fn tool(dir: &Path, prog: &str, args: &[&str]) -> bool {
    match Command::new(prog).current_dir(dir).args(args).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            klpsym_testkit::lab::skip(
                &format!("DWARF of an object {prog} built"),
                &format!(
                    "{prog} {args:?} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
            );
            false
        }
        Err(e) => {
            klpsym_testkit::lab::skip(
                &format!("DWARF of an object {prog} built"),
                &format!("{prog}: {e}"),
            );
            false
        }
    }
}

/// Builds the executable in a fresh directory; `None` (and a message) without the tools.
fn build(name: &str, gz: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("klpsym-dwarf-gcc-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.c"), A).unwrap();
    std::fs::write(dir.join("b.c"), B).unwrap();
    std::fs::write(dir.join("c.c"), C).unwrap();
    let gz = format!("-gz={gz}");
    tool(
        &dir,
        "gcc",
        &[
            "-g",
            "-O1",
            &gz,
            "-nostdlib",
            "-static",
            "-o",
            "t",
            "a.c",
            "b.c",
            "c.c",
        ],
    )
    .then(|| dir.join("t"))
}

/// `helper`'s addresses in symbol-table order, and the ELF's bytes.
fn helpers(path: &Path) -> (Vec<u64>, Vec<u8>) {
    (nm(path, " t helper"), std::fs::read(path).unwrap())
}

/// The addresses of the symbols whose `nm` line ends with `tail`, in symbol-table order.
fn nm(path: &Path, tail: &str) -> Vec<u64> {
    let o = Command::new("nm").arg(path).output().expect("nm runs");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.ends_with(tail))
        .map(|l| u64::from_str_radix(&l[..16], 16).unwrap())
        .collect()
}

fn check(path: &Path, compressed: bool) {
    let (addrs, data) = helpers(path);
    assert_eq!(addrs.len(), 2, "two static helpers");
    let sections = Command::new("readelf")
        .arg("-S")
        .arg(path)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout).into_owned();
    let info = sections
        .lines()
        .skip_while(|l| !l.contains(".debug_info"))
        .nth(1)
        .unwrap_or("");
    assert_eq!(info.contains(" C "), compressed, "{sections}");
    let rs = &mut Resched::none();
    let cus = klpsym_elf::cu_paths(&data, rs)
        .unwrap()
        .expect("compilation units");
    let files: Vec<&str> = addrs.iter().map(|&a| cus.path_of(a).unwrap()).collect();
    assert_eq!(files, ["a.c", "b.c"]);
    // Data: the unit defining a variable at the address (#48: `saved_command_line`).
    let counters = nm(path, " d counter");
    assert_eq!(counters.len(), 2, "two static counters");
    let mut files: Vec<&str> = counters.iter().map(|&a| cus.path_of(a).unwrap()).collect();
    files.sort_unstable();
    assert_eq!(files, ["a.c", "b.c"]);
    let c = nm(path, " D c_data");
    assert_eq!(c.len(), 1);
    assert_eq!(cus.path_of(c[0]), Some("c.c"));
    // Inside a variable, not at it: nothing (a data symbol is its variable's address).
    assert_eq!(cus.path_of(c[0] + 1), None);
    let lines = klpsym_elf::decl_lines(&data, &addrs, rs).unwrap();
    let got: Vec<(String, u64)> = lines
        .into_iter()
        .map(|l| l.map(|l| (l.file, l.line)).expect("a line"))
        .collect();
    // a.c declares it on line 1, b.c on line 3 (two blank lines first).
    assert_eq!(got, [("a.c".to_string(), 1), ("b.c".to_string(), 3)]);
}

#[test]
fn files_and_lines_from_plain_zlib_and_zstd_debug_sections() {
    let Some(plain) = build("plain", "none") else {
        return;
    };
    check(&plain, false);
    let Some(zlib) = build("zlib", "zlib") else {
        return;
    };
    check(&zlib, true);
    let zstd = plain.with_file_name("t-zstd");
    let (p, z) = (plain.display().to_string(), zstd.display().to_string());
    if tool(
        plain.parent().unwrap(),
        "objcopy",
        &["--compress-debug-sections=zstd", &p, &z],
    ) {
        check(&zstd, true);
    }
    for d in [plain.parent().unwrap(), zlib.parent().unwrap()] {
        let _ = std::fs::remove_dir_all(d);
    }
}
