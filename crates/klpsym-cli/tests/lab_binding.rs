//! Bindings judged by two builds of one series: the lab's `built_for=` cases
//! (lab/livepatch/cases/bind-*) are built and converted for one build (bookworm-backports'
//! 6.12, +deb12, gcc-12), loaded there, and loaded unchanged on another (trixie's 6.12, +deb13,
//! gcc-14) with finit_module(2)'s MODULE_INIT_IGNORE_MODVERSIONS|MODULE_INIT_IGNORE_VERMAGIC
//! (the two builds' module_layout CRCs differ). A flavour pair (bind-flavour: built for
//! trixie's 6.12 -amd64, loaded on the same release's -cloud-amd64) is loaded with a plain
//! finit_module(2): the two flavours share the CRCs the module asks. Each case's
//! replacement prints the address every klp relocation produced on the kernel it ran on.
//!
//! The truths are independent of klpsym: the definition an address belongs to is the
//! STT_FILE entry before its symbol in that build's debug vmlinux, as binutils' `readelf -s`
//! lists it; "moved" is the two builds' files differing. `klpsym check --built-for` must name,
//! for every relocation symbol, the address the kernel produced, the file of the definition
//! there, and "same" exactly when the built-for build's definition is in the same file.

mod common;
use common::livepatch_kernels;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `reloc NAME HEX` lines of an oracle.txt (the addresses the patched code saw), when the
/// kernel accepted the case; `Err` says why there is nothing to judge.
fn relocs(cdir: &Path) -> Result<BTreeMap<String, u64>, String> {
    let text = std::fs::read_to_string(cdir.join("oracle.txt"))
        .map_err(|e| format!("{}: {e}", cdir.display()))?;
    if let Some(why) = text.lines().find_map(|l| l.strip_prefix("skipped=")) {
        return Err(format!("skipped: {why}"));
    }
    if !text.lines().any(|l| l == "verdict=accepted") {
        return Err("the kernel did not accept it".into());
    }
    let map: BTreeMap<String, u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("reloc "))
        .filter_map(|l| {
            let (n, a) = l.split_once(' ')?;
            Some((n.to_string(), u64::from_str_radix(a.trim(), 16).ok()?))
        })
        .collect();
    if map.is_empty() {
        return Err("no reloc line: the exercise did not run".into());
    }
    Ok(map)
}

/// Every symbol of `elf`'s .symtab with the STT_FILE entry before it, as `readelf -sW` lists
/// them: (name, value) -> file.
fn stt_files(elf: &Path) -> BTreeMap<(String, u64), String> {
    let out = Command::new("readelf")
        .arg("-sW")
        .arg(elf)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed here: {e}"));
    assert!(out.status.success(), "readelf -s {}", elf.display());
    let mut map = BTreeMap::new();
    let mut file = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        if f[3] == "FILE" {
            file = f[7].to_string();
        } else if let Ok(v) = u64::from_str_radix(f[1], 16) {
            map.entry((f[7].to_string(), v)).or_insert(file.clone());
        }
    }
    map
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

#[test]
fn built_for_predicts_the_definition_each_build_binds() {
    let kernels = livepatch_kernels();
    let cases_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/livepatch/cases");
    let mut cases: Vec<(String, String)> = std::fs::read_dir(&cases_dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let conf = std::fs::read_to_string(cases_dir.join(&name).join("case.conf")).ok()?;
            let suite = conf.lines().find_map(|l| l.strip_prefix("built_for="))?;
            Some((name, suite.to_string()))
        })
        .collect();
    cases.sort();
    assert!(
        !cases.is_empty(),
        "no built_for= case in lab/livepatch/cases"
    );
    let mut failures = Vec::new();
    let (mut judged, mut moved, mut same, mut cross) = (0, 0, 0, 0);
    let mut symtabs: BTreeMap<PathBuf, BTreeMap<(String, u64), String>> = BTreeMap::new();
    // The flavour pairs' other halves (trixie's -cloud-amd64) load cases too; a case names
    // its kernels by lab id (SUITE, or SUITE/FLAVOUR).
    let flavours = klpsym_testkit::lab::flavour_kernels();
    let (mut plain, mut plain_moved) = (0, 0);
    let all: Vec<&klpsym_testkit::lab::LabKernel> = kernels.iter().chain(&flavours).collect();
    // Bindings judged on a kernel loaded unforced (another flavour), per case.
    let mut plain_by_case: BTreeMap<String, usize> = BTreeMap::new();
    for &k in &all {
        let Some(dbg) = k.get("VMLINUX_DBG").map(PathBuf::from) else {
            klpsym_testkit::lab::skip(
                &format!("{}: bindings across builds", k.name),
                "the kernel has no -dbg vmlinux in the lab",
            );
            continue;
        };
        for (case, suite) in &cases {
            let cdir = k.path("LIVEPATCH_DIR").join(case);
            let here = match relocs(&cdir) {
                Ok(r) => r,
                Err(why) if why.starts_with("skipped: not applicable: ") => continue,
                Err(why) => {
                    failures.push(format!("{}: {case}: {why}", k.name));
                    continue;
                }
            };
            let Some(built) = all
                .iter()
                .find(|b| b.id() == suite && b.value("ARCH") == k.value("ARCH"))
            else {
                failures.push(format!(
                    "{}: {case}: the built-for kernel ({suite}) is not in the lab matrix",
                    k.name
                ));
                continue;
            };
            let Some(built_dbg) = built.get("VMLINUX_DBG").map(PathBuf::from) else {
                failures.push(format!("{}: {case}: no -dbg vmlinux", built.name));
                continue;
            };
            let there = match relocs(&built.path("LIVEPATCH_DIR").join(case)) {
                Ok(r) => r,
                Err(why) => {
                    failures.push(format!("{}: {case}: {why}", built.name));
                    continue;
                }
            };
            // Loaded on another build: forced (finit_module flags 3), or plain where the case
            // says load=plain (flags 0: the kernel checked the versions and the vermagic).
            let other = k.id() != suite;
            let flags = std::fs::read_to_string(cdir.join("built-for.txt"))
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("load_flags=")?.trim().parse::<u32>().ok())
                });
            if other && flags.is_none() {
                failures.push(format!(
                    "{}: {case}: no load_flags in built-for.txt",
                    k.name
                ));
                continue;
            }
            let forced = other && flags != Some(0);
            let ko = cdir.join(
                std::fs::read_dir(&cdir)
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .find(|n| {
                        n.ends_with(".ko")
                            && !n.ends_with(".built.ko")
                            && !n.ends_with(".converted.ko")
                    })
                    .unwrap_or_else(|| panic!("{}: {case}: no module", k.name)),
            );
            // The kernel's config too: with it every loader check is decided (a forced load
            // needs CONFIG_MODULE_FORCE_LOAD), so the verdict is the kernel's, not unverified.
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_klpsym"));
            cmd.arg("check").arg(&ko).arg("-k").arg(&dbg);
            cmd.arg("--kernel-config").arg(k.path("CONFIG"));
            cmd.arg("--built-for").arg(&built_dbg).arg("--json");
            if forced {
                cmd.arg("--force");
            }
            let out = cmd.output().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            let result = &v["results"][0];
            let mut any_truly_moved = false;
            for (name, addr) in &here {
                let tab = symtabs
                    .entry(dbg.clone())
                    .or_insert_with(|| stt_files(&dbg));
                let Some(file) = tab.get(&(name.clone(), *addr)).cloned() else {
                    failures.push(format!(
                        "{}: {case}: readelf lists no {name} at {addr:#x}",
                        k.name
                    ));
                    continue;
                };
                let built_tab = symtabs
                    .entry(built_dbg.clone())
                    .or_insert_with(|| stt_files(&built_dbg));
                let Some(built_file) = there
                    .get(name)
                    .and_then(|a| built_tab.get(&(name.clone(), *a)))
                    .cloned()
                else {
                    failures.push(format!("{}: {case}: {name} not bound there", built.name));
                    continue;
                };
                let b = result["bindings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| b["source"] == "relocation" && b["name"] == name.as_str());
                let Some(b) = b else {
                    failures.push(format!(
                        "{}: {case}: klpsym lists no binding of {name}",
                        k.name
                    ));
                    continue;
                };
                let got_addr = b["bound"]["address"].as_str().unwrap_or_default();
                if got_addr != format!("{addr:#x}") {
                    failures.push(format!(
                        "{}: {case}: {name}: the kernel bound {addr:#x}, klpsym {got_addr}",
                        k.name
                    ));
                }
                let got_file = b["identity"]["file"].as_str().unwrap_or_default();
                if basename(got_file) != file {
                    failures.push(format!(
                        "{}: {case}: {name}: readelf puts {addr:#x} in {file}, klpsym in {got_file:?}",
                        k.name
                    ));
                }
                let truly_moved = file != built_file;
                any_truly_moved |= truly_moved;
                let status = b["as_built"]["status"].as_str().unwrap_or_default();
                let said_moved = matches!(status, "moved" | "gone");
                if truly_moved != said_moved || (!truly_moved && status != "same") {
                    failures.push(format!(
                        "{}: {case}: {name}: built for {built_file} ({}), bound {file} here; klpsym says {status:?}",
                        k.name, built.name
                    ));
                }
                if other {
                    cross += 1;
                    if truly_moved {
                        moved += 1;
                    } else {
                        same += 1;
                    }
                }
                if other && !forced {
                    plain += 1;
                    plain_moved += usize::from(truly_moved);
                    *plain_by_case.entry(case.clone()).or_insert(0) += 1;
                }
                judged += 1;
            }
            // The kernel accepted it: klpsym says so, or, where a binding moved, that it
            // binds another definition (accepted by the kernel, not what was built).
            let want = if any_truly_moved {
                "binds_another_definition"
            } else {
                "accepted"
            };
            if result["report"]["verdict"]["kind"] != want {
                failures.push(format!(
                    "{}: {case}: the kernel accepted it{}, klpsym says {}",
                    k.name,
                    if any_truly_moved {
                        " and a binding moved"
                    } else {
                        ""
                    },
                    result["report"]["verdict"]
                ));
            }
            // The readable report names the new verdict for a binding that moved.
            if other && here.keys().any(|n| there.contains_key(n)) {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_klpsym"));
                cmd.arg("check").arg(&ko).arg("-k").arg(&dbg);
                cmd.arg("--kernel-config").arg(k.path("CONFIG"));
                cmd.arg("--built-for").arg(&built_dbg);
                if forced {
                    cmd.arg("--force");
                }
                let out = cmd.output().unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let any_moved =
                    result["bindings"].as_array().unwrap().iter().any(|b| {
                        matches!(b["as_built"]["status"].as_str(), Some("moved" | "gone"))
                    });
                if any_moved != text.contains("BINDS ANOTHER DEFINITION")
                    || any_moved != (out.status.code() == Some(1))
                {
                    failures.push(format!(
                        "{}: {case}: moved bindings {any_moved}, exit {:?}, report:\n{text}",
                        k.name,
                        out.status.code()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if kernels.is_empty() {
        return; // skipped (and counted) by livepatch_kernels()
    }
    // A flavour pair loads unforced: the kernel itself found every symbol version and the
    // vermagic fit, and still a position bound another definition.
    if !flavours.is_empty() {
        assert!(
            plain >= 1 && plain_moved >= 1,
            "the flavour kernels loaded {plain} bindings with a plain load, {plain_moved} moved: \
             the pair no longer shows a misbinding the kernel accepts unforced"
        );
        // Every position a plain-loaded case pins was judged there: as many bindings as its
        // case.conf has pin= lines, on each other flavour that loaded it.
        for (case, _) in cases.iter().filter(|(c, _)| {
            std::fs::read_to_string(cases_dir.join(c).join("case.conf"))
                .is_ok_and(|t| t.lines().any(|l| l == "load=plain"))
        }) {
            let conf = std::fs::read_to_string(cases_dir.join(case).join("case.conf")).unwrap();
            let pins = conf.lines().filter(|l| l.starts_with("pin=")).count();
            let loaded_on = flavours
                .iter()
                .filter(|k| {
                    conf.lines()
                        .find_map(|l| l.strip_prefix("load_on="))
                        .is_some_and(|on| on.split_whitespace().any(|id| id == k.id()))
                })
                .count();
            let judged_here = plain_by_case.get(case).copied().unwrap_or(0);
            assert!(
                pins > 0 && judged_here == pins * loaded_on,
                "{case}: {pins} pinned positions on {loaded_on} other flavour(s), {judged_here} bindings judged loaded unforced"
            );
        }
    }
    // The pair judged something in each direction: moved and kept definitions, on the other
    // build (a matrix without both builds cannot judge drift).
    if cross == 0 {
        klpsym_testkit::lab::skip(
            "bindings across two builds",
            "the lab matrix has no kernel that loaded a case built for another build",
        );
        return;
    }
    // The pins were chosen from the two builds' tables (bookworm-backports' 6.12.95 and
    // trixie's 6.12.118): a later pair may move fewer of them. Each binding above is judged by
    // the builds' own files whatever moved; this asks only that both verdicts were seen.
    assert!(
        moved >= 1 && same >= 1,
        "judged {judged} bindings: {moved} moved, {same} same on the other build: the pair \
         no longer shows both; choose pins that move between these builds (klpsym drift)"
    );
    eprintln!(
        "bindings judged: {judged} ({cross} on the other build: {moved} moved, {same} same; \
         {plain} of them loaded unforced on another flavour, {plain_moved} moved)"
    );
}

/// The definitions of each name in a module's debug file, in `.symtab` order (the order the
/// module's kallsyms lists them, which positions count), each with the STT_FILE entry before
/// it, as binutils' `readelf -sW` lists them: name -> files.
fn module_stt_files(ko: &Path) -> BTreeMap<String, Vec<String>> {
    let out = Command::new("readelf")
        .arg("-sW")
        .arg(ko)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed here: {e}"));
    assert!(out.status.success(), "readelf -s {}", ko.display());
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut file = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || !f[0].ends_with(':') {
            continue;
        }
        match f[3] {
            "FILE" => file = f[7].to_string(),
            "FUNC" | "OBJECT" if f[6] != "UND" && f[6] != "ABS" => {
                map.entry(f[7].to_string()).or_default().push(file.clone())
            }
            _ => {}
        }
    }
    map
}

/// The compilation units' names (`DW_AT_name` of each `DW_TAG_compile_unit`) of a debug
/// file's DWARF, as binutils' `readelf --debug-dump=info` prints them.
fn dwarf_units(ko: &Path) -> Vec<String> {
    let out = Command::new("readelf")
        .arg("--debug-dump=info")
        .arg(ko)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed here: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut units = Vec::new();
    let mut in_unit = false;
    for line in text.lines() {
        if line.contains("DW_TAG_compile_unit") {
            in_unit = true;
        } else if line.contains("DW_TAG_") {
            in_unit = false;
        } else if in_unit && line.contains("DW_AT_name") {
            if let Some(name) = line.rsplit(": ").next() {
                units.push(name.trim().to_string());
            }
            in_unit = false;
        }
    }
    units
}

/// A folder holding a kernel's image and `-dbg` packages (links to the lab's), as a user
/// gives one build's packages.
fn packages_dir(root: &Path, k: &klpsym_testkit::lab::LabKernel) -> PathBuf {
    let d = root.join(k.id().replace('/', "-"));
    std::fs::create_dir_all(&d).unwrap();
    for key in ["IMAGE_DEB", "DBG_DEB"] {
        let p = k.path(key);
        let link = d.join(p.file_name().unwrap());
        if !link.exists() {
            std::os::unix::fs::symlink(&p, &link).unwrap();
        }
    }
    d
}

/// A module patch's bindings proven across two builds from their packages alone (the image
/// and its `-dbg` package): the lab's fat cases (fat:init_once,2; fat.ko defines init_once in
/// fs/fat/cache.c and fs/fat/inode.c) built for one build are checked on the other build of
/// the point-release pair (bookworm-backports' 6.12.95 and trixie's 6.12.118, both ways) and
/// on the flavour pair (trixie's -amd64 to -cloud-amd64). The packages strip fat.ko of its
/// files; the -dbg package's debug fat.ko gives them. The truths are binutils' on each
/// build's debug fat.ko: `readelf -s` lists the definitions in the order the positions count
/// and the STT_FILE before each, `readelf --debug-dump=info` the compilation units. Each
/// binding must carry an identity whose file is a unit of that DWARF with the STT_FILE's base
/// name, and `as_built` must be `same` exactly when the built-for build's definition at that
/// position is in the same file (with the same rank in it), `moved`/`gone` otherwise: never
/// `unproven`.
#[test]
fn module_bindings_are_proven_from_the_dbg_packages() {
    let kernels = livepatch_kernels();
    let flavours = klpsym_testkit::lab::flavour_kernels();
    let all: Vec<&klpsym_testkit::lab::LabKernel> = kernels.iter().chain(&flavours).collect();
    let by_id = |id: &str| {
        all.iter()
            .find(|k| k.id() == id && k.value("ARCH") == "amd64")
            .filter(|k| {
                k.get("IMAGE_DEB").is_some()
                    && k.get("DBG_DEB").is_some()
                    && k.get("DEBUG_MODULES_DIR").is_some()
            })
            .copied()
    };
    // (built for, checked on).
    let pairs = [
        ("bookworm-backports", "trixie"),
        ("trixie", "bookworm-backports"),
        ("trixie", "trixie/cloud-amd64"),
    ];
    let cases = ["module-dup-pos2", "module-dup-pos2-after"];
    let tmp = std::env::temp_dir().join(format!("klpsym-modbind-{}", std::process::id()));
    let mut failures = Vec::new();
    let mut judged_by_pair: BTreeMap<String, usize> = BTreeMap::new();
    let mut looked = 0;
    for (built_id, here_id) in pairs {
        let (Some(built), Some(here)) = (by_id(built_id), by_id(here_id)) else {
            klpsym_testkit::lab::skip(
                &format!("module bindings {built_id} -> {here_id}"),
                "a kernel of the pair (with its image, -dbg package and debug modules) is not in the lab",
            );
            continue;
        };
        looked += 1;
        let pair = format!("{built_id} -> {here_id}");
        let debug_ko = |k: &klpsym_testkit::lab::LabKernel| {
            k.path("DEBUG_MODULES_DIR").join("kernel/fs/fat/fat.ko")
        };
        let (built_syms, here_syms) = (
            module_stt_files(&debug_ko(built)),
            module_stt_files(&debug_ko(here)),
        );
        let units = dwarf_units(&debug_ko(here));
        let (built_dir, here_dir) = (packages_dir(&tmp, built), packages_dir(&tmp, here));
        for case in cases {
            let cdir = built.path("LIVEPATCH_DIR").join(case);
            let oracle = std::fs::read_to_string(cdir.join("oracle.txt")).unwrap_or_default();
            if !oracle.lines().any(|l| l == "verdict=accepted") {
                failures.push(format!(
                    "{}: {case}: the kernel did not accept it",
                    built.name
                ));
                continue;
            }
            let Some(ko) = std::fs::read_dir(&cdir)
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "ko"))
            else {
                failures.push(format!("{}: {case}: no module", built.name));
                continue;
            };
            let out = Command::new(env!("CARGO_BIN_EXE_klpsym"))
                .arg("check")
                .arg(&ko)
                .arg("-k")
                .arg(&here_dir)
                .arg("--built-for")
                .arg(&built_dir)
                .args(["--force", "--json"])
                .output()
                .unwrap();
            let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!(
                        "{pair}: {case}: {e}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                    continue;
                }
            };
            let bindings = v["results"][0]["bindings"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for b in bindings.iter().filter(|b| b["object"] == "fat") {
                let name = b["name"].as_str().unwrap_or_default();
                let sympos = b["sympos"].as_u64().unwrap_or(0);
                let (Some(h), Some(t)) = (here_syms.get(name), built_syms.get(name)) else {
                    failures.push(format!("{pair}: {case}: readelf lists no {name} in fat.ko"));
                    continue;
                };
                let at = |defs: &Vec<String>| {
                    let i = if sympos == 0 { 0 } else { sympos as usize - 1 };
                    // Its identity: the file and its rank among the name's definitions there.
                    defs.get(i)
                        .map(|f| (f.clone(), defs[..=i].iter().filter(|g| *g == f).count()))
                };
                let (Some((file, rank)), Some(built_file)) = (at(h), at(t)) else {
                    failures.push(format!("{pair}: {case}: {name},{sympos} out of range"));
                    continue;
                };
                let got = b["identity"]["file"].as_str().unwrap_or_default();
                if basename(got) != file || !units.iter().any(|u| u == got) {
                    failures.push(format!(
                        "{pair}: {case}: {name},{sympos}: readelf puts it in {file} (units {units:?}), klpsym's identity {}",
                        b["identity"]
                    ));
                }
                if b["identity"]["rank"].as_u64() != Some(rank as u64) {
                    failures.push(format!(
                        "{pair}: {case}: {name},{sympos}: copy {rank} in {file}, klpsym {}",
                        b["identity"]
                    ));
                }
                let status = b["as_built"]["status"].as_str().unwrap_or_default();
                let same = (file.clone(), rank) == built_file;
                let ok = if same {
                    status == "same"
                } else {
                    matches!(status, "moved" | "gone")
                };
                if !ok {
                    failures.push(format!(
                        "{pair}: {case}: {name},{sympos}: built for {built_file:?}, here {file} (copy {rank}); klpsym says {}",
                        b["as_built"]
                    ));
                }
                *judged_by_pair.entry(pair.clone()).or_insert(0) += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if looked == 0 {
        return; // skipped (and counted) above
    }
    // Every pair looked at judged each case's fat:init_once at least.
    for (built_id, here_id) in pairs {
        let pair = format!("{built_id} -> {here_id}");
        if by_id(built_id).is_some() && by_id(here_id).is_some() {
            let n = judged_by_pair.get(&pair).copied().unwrap_or(0);
            assert!(
                n >= cases.len(),
                "{pair}: {n} fat bindings judged, expected at least {}",
                cases.len()
            );
        }
    }
    eprintln!("module bindings proven from the packages: {judged_by_pair:?}");
}
