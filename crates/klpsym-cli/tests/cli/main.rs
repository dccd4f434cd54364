//! Integration tests: run the `klpsym` binary the way a user does. One test binary; the tests
//! live in a file per theme, the helpers here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_klpsym"))
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn file(&self, name: &str, content: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut c = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SAMPLE: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 t init_once
ffffffff81000140 T do_thing
ffffffff81000200 t init_once
ffffffff81000280 t init_once
ffffffff81000300 T _etext
ffffffffc0000000 t init_once\t[nf_tables]
ffffffffc0000040 T nft_do_chain\t[nf_tables]
ffffffffc0000080 t helper\t[nf_tables]
ffffffffc0000100 t helper\t[nf_tables]
ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]
";

fn sample(f: &Fixture) -> String {
    f.file("kallsyms.txt", SAMPLE.as_bytes())
        .display()
        .to_string()
}

mod addr;
mod conventions;
mod kernels;
mod lookup;
