//! `klpsym addr` held to the kernel's own `%pS` and `%pB`: the lab's `symbolize` case
//! (lab/livepatch/cases/symbolize) prints, in the guest, `KLPSYM <%px> <%pS> <%pB>` for each
//! address around cmdline_proc_show's start and end, vmlinux's `_end` (the last byte before
//! it, `_end` itself and past it) and the case module's own functions (its last function
//! ends the module's text). klpsym is given what a user has: the kernel's image, the
//! module's file, and where /proc/kallsyms showed the module; it must print the same text,
//! or the number where the kernel prints the number.

mod common;
use common::livepatch_kernels;

use std::path::Path;
use std::process::Command;

/// (address, %pS, %pB) of each `out=KLPSYM` line. A module symbol's ` [module]` belongs to
/// the text before it.
fn kernel_lines(oracle: &str) -> Vec<(String, String, String)> {
    oracle
        .lines()
        .filter_map(|l| l.strip_prefix("out=KLPSYM "))
        .filter_map(|l| {
            let mut words: Vec<String> = Vec::new();
            for w in l.split_whitespace() {
                match words.last_mut() {
                    Some(prev) if w.starts_with('[') => {
                        prev.push(' ');
                        prev.push_str(w);
                    }
                    _ => words.push(w.to_string()),
                }
            }
            (words.len() == 3).then(|| (words[0].clone(), words[1].clone(), words[2].clone()))
        })
        .collect()
}

/// `klpsym addr --json` answers for `addrs`, as the kernel would print each: the text, or the
/// number (`0x...`) when there is no symbol.
fn klpsym_texts(
    cdir: &Path,
    vmlinuz: &Path,
    addrs: &[String],
    return_addresses: bool,
) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klpsym"));
    cmd.arg("addr")
        .arg("-k")
        .arg(vmlinuz)
        .arg("--modules")
        .arg(cdir);
    cmd.args(["--loaded", "klp_symbolize", "--place-from"]);
    cmd.arg(cdir.join("kallsyms-modules.txt")).arg("--json");
    if return_addresses {
        cmd.arg("--return-addresses");
    }
    let out = cmd.args(addrs).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["results"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| match a["text"].as_str() {
            Some(t) => t.to_string(),
            None => {
                let n = u64::from_str_radix(
                    a["address"].as_str().unwrap().trim_start_matches("0x"),
                    16,
                )
                .unwrap();
                format!("{n:#x}")
            }
        })
        .collect()
}

#[test]
fn addr_prints_what_the_kernels_percent_ps_and_pb_print() {
    let mut failures = Vec::new();
    let mut judged = 0;
    for k in livepatch_kernels() {
        let cdir = k.path("LIVEPATCH_DIR").join("symbolize");
        let oracle = std::fs::read_to_string(cdir.join("oracle.txt"))
            .unwrap_or_else(|e| panic!("{}: symbolize: {e}", k.name));
        let lines = kernel_lines(&oracle);
        // Three addresses around each of cmdline_proc_show, the next symbol, _end and the
        // module's two functions.
        if lines.len() < 15 {
            failures.push(format!(
                "{}: the guest printed {} KLPSYM lines, not 15",
                k.name,
                lines.len()
            ));
            continue;
        }
        assert!(
            lines.iter().any(|(_, s, _)| s.ends_with("[klp_symbolize]")),
            "{}: no module address among {lines:?}",
            k.name
        );
        assert!(
            lines.iter().any(|(_, s, _)| s.starts_with("0x")),
            "{}: no address past the kernel among {lines:?}",
            k.name
        );
        let addrs: Vec<String> = lines.iter().map(|(a, _, _)| a.clone()).collect();
        let ps = klpsym_texts(&cdir, &k.path("VMLINUZ"), &addrs, false);
        let pb = klpsym_texts(&cdir, &k.path("VMLINUZ"), &addrs, true);
        for (i, (a, want_s, want_b)) in lines.iter().enumerate() {
            if &ps[i] != want_s {
                failures.push(format!(
                    "{}: {a}: %pS {want_s}, klpsym addr {}",
                    k.name, ps[i]
                ));
            }
            if &pb[i] != want_b {
                failures.push(format!(
                    "{}: {a}: %pB {want_b}, klpsym addr --return-addresses {}",
                    k.name, pb[i]
                ));
            }
            judged += 2;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if judged == 0 {
        klpsym_testkit::lab::skip("%pS and %pB", "no lab kernel ran the livepatch oracle");
    } else {
        eprintln!("{judged} %pS/%pB strings of the kernels printed the same by klpsym addr");
    }
}
