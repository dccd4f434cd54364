//! `klpsym check` against the real kernel: for every case the lab's livepatch oracle
//! (lab/livepatch-oracle.sh) built, loaded in the Debian kernel under QEMU and recorded, klpsym's
//! prediction from the package files alone must match what the kernel did: accepted or refused
//! (and when), the exact `livepatch:` error lines in order, and the addresses the kernel used.
//!
//! Every kernel of the lab matrix judges (KLPSYM_TEST_LAB_KERNELS from scripts/test.sh: per
//! kernel its oracle output, vmlinuz and module tree). Skips (saying so) without them unless
//! KLPSYM_REQUIRE_LAB is set. The oracle's record is read in record.rs, judged in judge.rs.

#[path = "../common/mod.rs"]
mod common;
mod judge;
mod record;

use common::livepatch_kernels;
use judge::{check, judge, patch_file};
use record::{not_applicable, read_oracle};

use std::path::Path;
use std::process::Command;

#[test]
fn check_predicts_what_every_lab_kernel_did() {
    let kernels = livepatch_kernels();
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    let mut summary_lines = Vec::new();
    for k in &kernels {
        let (compared, relocs_checked, visits, f) = judge(
            &k.path("LIVEPATCH_DIR"),
            &k.path("VMLINUZ"),
            &k.path("MODULES_DIR"),
            &k.path("CONFIG"),
            &k.path("KALLSYMS_NOMOD"),
            &k.path("LAB_DIR").join("lab.env"),
            k.version(),
        );
        failures.extend(f.into_iter().map(|f| format!("{}: {f}", k.name)));
        // Every case of lab/livepatch/cases is in the index: compared, or not applicable to
        // this kernel (judge() fails any other skip).
        let cases = std::fs::read_dir(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/livepatch/cases"),
        )
        .map(|d| d.count())
        .unwrap_or(0);
        let applicable = cases - not_applicable(&k.path("LIVEPATCH_DIR"));
        if compared != applicable {
            failures.push(format!(
                "{}: {compared} cases compared of {applicable} applicable ({cases} in lab/livepatch/cases)",
                k.name
            ));
        }
        if relocs_checked < 4 {
            failures.push(format!(
                "{}: only {relocs_checked} relocation addresses compared",
                k.name
            ));
        }
        summary.push(format!(
            "{}: {compared} cases, {relocs_checked} relocation targets",
            k.name
        ));
        summary_lines.push(format!(
            "release={} suite={} arch={} compared={compared} relocations={relocs_checked} visits={visits}",
            k.value("RELEASE"),
            k.value("SUITE"),
            k.value("ARCH")
        ));
    }
    assert!(
        failures.is_empty(),
        "{} differences between klpsym and the kernels:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for s in summary {
        eprintln!("{s}: klpsym's predictions match the kernel");
    }
    // For scripts/lab-tables.sh (README's verified-against table): what was judged, written
    // only when every kernel agreed.
    if let Some(path) = std::env::var_os("KLPSYM_TEST_SUMMARY") {
        // Appended: other lab tests write their lines to the same file (scripts/test.sh
        // empties it before the run).
        use std::io::Write;
        let mut text = summary_lines.join("\n");
        text.push('\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .unwrap();
    }
}

/// binutils' addr2line's file for `addr` in `elf` (the line table's file of the function's
/// first instruction, with the build's source root stripped the way faddr2line strips it),
/// when it names one.
fn addr2line_file(elf: &Path, addr: u64) -> Option<String> {
    let out = Command::new("addr2line")
        .arg("-e")
        .arg(elf)
        .arg(format!("{addr:#x}"))
        .output()
        .unwrap_or_else(|e| panic!("addr2line (binutils) is needed here: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let (file, _) = text.lines().next()?.rsplit_once(':')?;
    (file != "??").then(|| file.to_string())
}

/// Identity needs source files: against each lab kernel's debug vmlinux (its -dbg package's),
/// every replaced vmlinux function of the ambiguous cases binds the definition the kernel
/// patched, names the source file binutils' addr2line gives that address (the truth, read
/// from the line table, not from klpsym), and is as built against the same kernel. Position
/// 1 and 2 of `m_show` are two definitions in two files: their identities differ. Each case
/// is one the kernel accepts (case.conf expect=accepted): one it refused is a failure, never
/// a pass, and a kernel without its -dbg vmlinux is a recorded skip.
#[test]
fn bindings_name_the_source_file_of_what_the_kernel_patched() {
    let mut judged = 0;
    let mut failures = Vec::new();
    for k in livepatch_kernels() {
        let Some(dbg) = k.get("VMLINUX_DBG").filter(|v| !v.is_empty()) else {
            klpsym_testkit::lab::skip(
                &format!("{}: bindings against a debug vmlinux", k.name),
                "the kernel has no -dbg vmlinux in the lab",
            );
            continue;
        };
        let dir = k.path("LIVEPATCH_DIR");
        let mut files = Vec::new();
        for case in ["ambiguous-pos1", "ambiguous-pos2"] {
            let cdir = dir.join(case);
            let oracle = read_oracle(&cdir);
            if oracle.verdict != "accepted" || !oracle.broken.is_empty() {
                failures.push(format!(
                    "{}: {case}: the kernel's record is {} {:?}: nothing to judge a binding by",
                    k.name, oracle.verdict, oracle.broken
                ));
                continue;
            }
            let index = std::fs::read_to_string(dir.join("index.txt")).unwrap();
            let patch = index
                .lines()
                .find(|l| l.split_whitespace().next() == Some(case))
                .and_then(|l| l.split_whitespace().find_map(|x| x.strip_prefix("patch=")))
                .expect("the case's patch in index.txt")
                .to_string();
            let ko = patch_file(&cdir, &patch);
            let args: Vec<&std::ffi::OsStr> = vec![
                ko.as_os_str(),
                "-k".as_ref(),
                dbg.as_ref(),
                "--built-for".as_ref(),
                dbg.as_ref(),
            ];
            let (_, v) = check(&args);
            let Some(b) = v["results"][0]["bindings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["source"] == "function" && b["name"] == "m_show")
                .cloned()
            else {
                failures.push(format!("{}: {case}: no binding of m_show: {v}", k.name));
                continue;
            };
            let Some(&want) = oracle
                .addrs
                .get(&("vmlinux".to_string(), "m_show".to_string()))
            else {
                failures.push(format!(
                    "{}: {case}: the guest recorded no address of m_show",
                    k.name
                ));
                continue;
            };
            let got = b["bound"]["address"].as_str().unwrap_or_default();
            if got != format!("{want:#x}") {
                failures.push(format!(
                    "{}: {case}: the kernel patched {want:#x}, klpsym binds {got}",
                    k.name
                ));
            }
            let file = b["identity"]["file"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match addr2line_file(Path::new(dbg), want) {
                Some(truth) if !file.is_empty() && (truth == file || truth.ends_with(&format!("/{file}"))) => {}
                truth => failures.push(format!(
                    "{}: {case}: addr2line puts {want:#x} in {truth:?}, klpsym's identity names {file:?}: {b}",
                    k.name
                )),
            }
            if b["as_built"]["status"] != "same" {
                failures.push(format!("{}: {case}: as built against itself: {b}", k.name));
            }
            files.push(file);
        }
        if files.len() != 2 || files[0] == files[1] {
            failures.push(format!(
                "{}: two positions of m_show, two definitions in two files; klpsym names {files:?}",
                k.name
            ));
        }
        judged += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if judged == 0 {
        klpsym_testkit::lab::skip(
            "bindings against a debug vmlinux",
            "no lab kernel with a livepatch oracle and a -dbg vmlinux",
        );
    }
}
