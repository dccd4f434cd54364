//! Outputs of the independent tools the lab's tests judge klpsym by (llvm-dwarfdump,
//! readelf, addr2line), kept between runs.
//!
//! A tool run over a `-dbg` vmlinux takes seconds each time (llvm-dwarfdump's `--lookup`
//! reads the whole file), and the tests ask the same questions of the same files every run.
//! With `KLPSYM_TEST_TOOL_CACHE` set (scripts/test.sh: the lab cache's `test-cache/tools`),
//! an output is kept under a key made of the input's identity (its GNU build id, given by
//! the caller), the tool's own `--version` and the exact arguments: another input, another
//! build of the tool or another question runs the tool again. Without the variable the tool
//! runs every time.

use std::path::PathBuf;
use std::process::Command;

/// `program args…`'s standard output, from the cache when `identity` (the input's identity,
/// e.g. its build id in hex), the tool's version and `args` were asked before. Panics, as a
/// test helper, when the tool cannot run or fails.
pub fn tool_output(program: &str, args: &[&str], identity: &str) -> String {
    let dir = std::env::var_os("KLPSYM_TEST_TOOL_CACHE").map(PathBuf::from);
    tool_output_in(dir, program, args, identity)
}

fn tool_output_in(dir: Option<PathBuf>, program: &str, args: &[&str], identity: &str) -> String {
    let Some(dir) = dir else {
        return run(program, args);
    };
    let version = run(program, &["--version"]);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [program, version.as_str(), identity]
        .into_iter()
        .chain(args.iter().copied())
    {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let file = dir.join(format!("{program}-{identity}-{:032x}.out", h.digest128()));
    if let Ok(out) = std::fs::read_to_string(&file) {
        return out;
    }
    let out = run(program, args);
    // Written whole, then renamed: a run stopped half-way leaves no half output.
    let tmp = dir.join(format!(".{}.{}", std::process::id(), h.digest128()));
    if std::fs::create_dir_all(&dir).is_ok() && std::fs::write(&tmp, &out).is_ok() {
        let _ = std::fs::rename(&tmp, &file);
    }
    let _ = std::fs::remove_file(&tmp);
    out
}

fn run(program: &str, args: &[&str]) -> String {
    let o = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs (scripts/test.sh installs it): {e}"));
    assert!(
        o.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_output_is_read_back_and_another_question_runs_again() {
        let dir = std::env::temp_dir().join(format!("klpsym-tools-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = |args: &[&str], id: &str| tool_output_in(Some(dir.clone()), "echo", args, id);
        let first = out(&["one"], "id");
        assert_eq!(first, "one\n");
        // The kept file answers the same question (its content changed to tell them apart).
        let kept: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(kept.len(), 1);
        std::fs::write(kept[0].path(), "kept\n").unwrap();
        assert_eq!(out(&["one"], "id"), "kept\n");
        // Another identity or other arguments run the tool.
        assert_eq!(out(&["one"], "other"), "one\n");
        assert_eq!(out(&["two"], "id"), "two\n");
        // Without a folder the tool runs every time.
        assert_eq!(tool_output_in(None, "echo", &["one"], "id"), "one\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
