//! Relocation arithmetic judged by real kernels: lab/reloc-oracle.sh loads ordinary modules
//! whose section `.klpsym_reloc` carries relocations of every type klpsym computes (and
//! modules with one relocation the kernel refuses), and records the bytes the kernel wrote,
//! where it placed each section (/sys/module/<m>/sections) and what it logged. `klpsym check
//! --sections-from` must predict the bytes of every relocation, and for the refused modules
//! the verdict, errno and the exact lines.
//!
//! The refused modules are never placed, so their lines are compared as klpsym words them
//! without a place: exact for x86_64 before 6.3 (the lab's x86 kernel is 6.1), whose
//! nonzero-place message prints S + A and a hashed pointer; from 6.3 that message prints
//! S + A - P (and from 6.19 the place itself), which needs the placement a refused module
//! never gets.
//!
//! The kernels boot with `nokaslr`, so the image's link addresses are the ones the modules
//! met. Kernels whose lab.env has RELOC_DIR judge (x86_64 on one amd64 kernel, every arm64
//! kernel); the others are named on stderr.

mod common;
use common::{json, lab_kernels, run};

use std::collections::BTreeSet;
use std::path::Path;

/// The types each architecture's load case must cover.
const X86_64: &[&str] = &[
    "R_X86_64_64",
    "R_X86_64_32S",
    "R_X86_64_PC32",
    "R_X86_64_PLT32",
    "R_X86_64_PC64",
];
const AARCH64: &[&str] = &[
    "R_AARCH64_ABS64",
    "R_AARCH64_PREL64",
    "R_AARCH64_PREL32",
    "R_AARCH64_CALL26",
    "R_AARCH64_JUMP26",
    "R_AARCH64_ADR_PREL_PG_HI21",
    "R_AARCH64_ADD_ABS_LO12_NC",
    "R_AARCH64_LDST8_ABS_LO12_NC",
    "R_AARCH64_LDST16_ABS_LO12_NC",
    "R_AARCH64_LDST32_ABS_LO12_NC",
    "R_AARCH64_LDST64_ABS_LO12_NC",
    "R_AARCH64_LDST128_ABS_LO12_NC",
    "R_AARCH64_MOVW_UABS_G0_NC",
    "R_AARCH64_MOVW_UABS_G1_NC",
    "R_AARCH64_MOVW_UABS_G2_NC",
    "R_AARCH64_MOVW_UABS_G3",
];

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The kernel's lines as klpsym words them: the x86 "loc %p" is a hashed pointer.
fn normalize(line: &str) -> String {
    match line.find(", loc ") {
        Some(i) => {
            let rest = &line[i + 6..];
            let end = rest.find(',').unwrap_or(rest.len());
            format!("{}, loc <hashed %p>{}", &line[..i], &rest[end..])
        }
        None => line.to_string(),
    }
}

/// How many relocations the module loader applies from each relocation section of `ko`, as
/// binutils' `readelf -SW -rW` lists them: the `.rela*`/`.rel*` sections whose target
/// section (`sh_info`) is allocated (apply_relocations() skips the others, debug sections'
/// among them). An independent count to hold klpsym's list to.
fn readelf_applied_counts(ko: &Path) -> std::collections::BTreeMap<String, usize> {
    let out = std::process::Command::new("readelf")
        .args(["-SW", "-rW"])
        .arg(ko)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed here: {e}"));
    assert!(out.status.success(), "readelf -S -r {}", ko.display());
    let text = String::from_utf8_lossy(&out.stdout);
    // Section headers: index -> (name, flags, info).
    let mut sections = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix('[') else {
            continue;
        };
        let Some((idx, rest)) = rest.split_once(']') else {
            continue;
        };
        let Ok(idx) = idx.trim().parse::<usize>() else {
            continue;
        };
        // Name Type Address Off Size ES Flg Lk Inf Al (Flg may be empty).
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 9 {
            continue;
        }
        let (name, info) = (
            f[0].to_string(),
            f[f.len() - 2].parse::<usize>().unwrap_or(0),
        );
        let flags = if f.len() == 10 { f[6] } else { "" };
        sections.insert(idx, (name, flags.to_string(), info));
    }
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("Relocation section '") else {
            continue;
        };
        let (name, rest) = rest.split_once('\'').expect("a quoted name");
        let n: usize = rest
            .split_whitespace()
            .skip_while(|w| *w != "contains")
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("readelf: no entry count in {line:?}"));
        let target_alloc = sections
            .values()
            .find(|(n2, _, _)| n2 == name)
            .and_then(|(_, _, info)| sections.get(info))
            .is_some_and(|(_, flags, _)| flags.contains('A'));
        if target_alloc {
            counts.insert(name.to_string(), n);
        }
    }
    counts
}

/// The errno a case recorded: a number or a name.
fn errno_name(raw: &str) -> String {
    match raw.trim() {
        "0" => "0".into(),
        "8" => "ENOEXEC".into(),
        "22" => "EINVAL".into(),
        "2" => "ENOENT".into(),
        other => other.trim_start_matches('-').to_string(),
    }
}

#[test]
fn check_predicts_the_bytes_real_kernels_relocate() {
    let mut judged = 0;
    let mut failures = Vec::new();
    for k in &lab_kernels() {
        let Some(dir) = k.get("RELOC_DIR") else {
            eprintln!(
                "{}: no relocation oracle in the lab for this kernel",
                k.name
            );
            continue;
        };
        let (types, f) = judge(Path::new(dir), &k.path("VMLINUZ"));
        let arch_types = if k.value("ARCH") == "arm64" {
            AARCH64
        } else {
            X86_64
        };
        for t in arch_types {
            if !types.contains(*t) {
                failures.push(format!("{}: no {t} relocation was judged", k.name));
            }
        }
        failures.extend(f.into_iter().map(|f| format!("{}: {f}", k.name)));
        eprintln!(
            "{}: {} relocation types judged: {}",
            k.name,
            types.len(),
            types.iter().cloned().collect::<Vec<_>>().join(" ")
        );
        judged += 1;
    }
    assert!(
        failures.is_empty(),
        "{} differences between klpsym and the kernels:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if judged == 0 {
        klpsym_testkit::lab::skip("the relocation oracle", "no lab kernel has one (RELOC_DIR)");
    }
}

/// One kernel's cases, predicted from its image as packaged (its symbols, version and module
/// loader facts): (relocation types whose bytes matched, differences).
fn judge(dir: &Path, vmlinuz: &Path) -> (BTreeSet<String>, Vec<String>) {
    let mut types = BTreeSet::new();
    let mut failures = Vec::new();
    let mut cases: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("module.ko").exists())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "{}: no cases", dir.display());
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let errno = errno_name(&read(&case.join("errno")));
        let ko = case.join("module.ko");
        let mut args = vec![
            "check".to_string(),
            ko.display().to_string(),
            "--kernel".into(),
            vmlinuz.display().to_string(),
            "--json".into(),
            "--explain".into(),
        ];
        let sections = tempfile::tempdir().unwrap();
        if errno == "0" {
            for l in read(&case.join("sections")).lines() {
                let (n, a) = l.split_once(' ').expect("NAME ADDR");
                std::fs::write(sections.path().join(n), format!("{a}\n")).unwrap();
            }
            args.push("--sections-from".into());
            args.push(sections.path().display().to_string());
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let v = json(&run(&argv));
        let r = &v["results"][0]["report"];
        let kind = r["verdict"]["kind"].as_str().unwrap_or("?").to_string();
        if errno == "0" {
            if kind != "ordinary_module" {
                failures.push(format!(
                    "{name}: the kernel loaded it, klpsym says {kind}: {}",
                    r["problems"]
                ));
                continue;
            }
            // Every relocation the loader applies is listed, as many per section as readelf
            // counts (judging only the listed ones would pass a list that dropped some).
            let mut listed = std::collections::BTreeMap::new();
            for x in r["ordinary_relocations"].as_array().unwrap() {
                *listed
                    .entry(x["section"].as_str().unwrap_or("?").to_string())
                    .or_insert(0usize) += 1;
            }
            let counted = readelf_applied_counts(&ko);
            if counted.is_empty() || listed != counted {
                failures.push(format!(
                    "{name}: readelf counts {counted:?} relocations the loader applies, klpsym lists {listed:?}"
                ));
            }
            let block = std::fs::read(case.join("block.bin")).unwrap();
            let mut seen = 0;
            for x in r["ordinary_relocations"].as_array().unwrap() {
                let status = x["status"].as_str().unwrap();
                let tname = x["type_name"].as_str().unwrap().to_string();
                if status != "applied" && status != "none" {
                    failures.push(format!(
                        "{name}: {} [{}] {tname}: {status} ({})",
                        x["section"], x["index"], x["note"]
                    ));
                    continue;
                }
                if status == "none" || x["target_section"] != ".klpsym_reloc" {
                    continue;
                }
                seen += 1;
                let off = x["offset"].as_u64().unwrap() as usize;
                let Some(want) = x["bytes"].as_str().filter(|b| !b.is_empty()) else {
                    failures.push(format!(
                        "{name}: .klpsym_reloc+{off:#x} {tname}: no bytes predicted ({})",
                        x["note"]
                    ));
                    continue;
                };
                let got: String = block
                    .get(off..off + want.len() / 2)
                    .unwrap_or_default()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                if got == want {
                    types.insert(tname);
                } else {
                    failures.push(format!(
                        "{name}: .klpsym_reloc+{off:#x} {tname} {}: klpsym {want}, the kernel {got}",
                        x["symbol"]
                    ));
                }
            }
            if seen == 0 {
                failures.push(format!("{name}: no relocation into .klpsym_reloc"));
            }
        } else {
            if kind != "refused_at_load" {
                failures.push(format!(
                    "{name}: the kernel refused it ({errno}), klpsym says {kind}"
                ));
                continue;
            }
            let predicted = r["verdict"]["errno"]
                .as_i64()
                .map(|e| errno_name(&e.to_string()));
            if predicted.as_deref() != Some(errno.as_str()) {
                failures.push(format!("{name}: errno {errno}, klpsym {predicted:?}"));
            }
            let kernel: Vec<String> =
                match klpsym_testkit::klog::bracketed(read(&case.join("dmesg")).lines()) {
                    Ok(lines) => lines
                        .iter()
                        .filter(|l| !klpsym_testkit::klog::is_taint_notice(l))
                        .map(|l| normalize(l))
                        .collect(),
                    Err(e) => {
                        failures.push(format!("{name}: the guest's log of the load: {e}"));
                        continue;
                    }
                };
            let klpsym: Vec<String> = r["kernel_log"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["line"].as_str().unwrap().to_string())
                .collect();
            if kernel != klpsym {
                failures.push(format!(
                    "{name}: the kernel logged {kernel:?}, klpsym predicts {klpsym:?}"
                ));
            }
        }
    }
    (types, failures)
}
