//! Kernels straight from their packages: the lab's own Debian packages as downloaded, and RPMs
//! built here with rpmbuild (Debian's `rpm` package) from the same kernel's files, judged by
//! what klpsym answers from the unpacked files (which the other lab tests judge against the
//! real kernel).
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_IMAGE_DEB, KLPSYM_TEST_DBG_DEB,
//! KLPSYM_TEST_VMLINUZ, KLPSYM_TEST_MODULES_DIR, KLPSYM_TEST_LIVEPATCH_DIR, KLPSYM_TEST_LAB_DIR.

mod common;
use common::{json, lab, run, text};

use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A fresh directory of this test process; each call its own (tests run in parallel).
fn tempdir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("klpsym-pkg-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn an_image_package_is_a_kernel() {
    let (Some(deb), Some(vmlinuz)) = (lab("KLPSYM_TEST_IMAGE_DEB"), lab("KLPSYM_TEST_VMLINUZ"))
    else {
        return;
    };
    let from_deb = run(&["dump", "--kernel", &s(&deb)]);
    assert_eq!(
        from_deb.status.code(),
        Some(0),
        "{}",
        text(&from_deb.stderr)
    );
    let from_image = run(&["dump", "--kernel", &s(&vmlinuz)]);
    assert!(from_deb.stdout.len() > 1_000_000);
    assert!(
        from_deb.stdout == from_image.stdout,
        "dump differs from the unpacked image's"
    );
    let info = run(&["info", "--kernel", &s(&deb)]);
    let out = text(&info.stdout);
    assert!(out.contains("package linux-image-"), "{out}");
    assert!(out.contains(":boot/vmlinuz-"), "{out}");
}

/// The author's question from the packages alone: a folder holding the image and -dbg
/// packages is one kernel (grouped by release), positions from the image, files and lines from
/// the -dbg vmlinux, the same as from the unpacked files.
#[test]
fn a_folder_of_one_kernels_packages_answers_the_authors_question() {
    let (Some(image), Some(dbg), Some(vmlinux)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_DBG_DEB"),
        lab("KLPSYM_TEST_VMLINUX"),
    ) else {
        return;
    };
    let dir = tempdir("folder");
    for p in [&image, &dbg] {
        std::os::unix::fs::symlink(p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let args = ["sympos", "init_once", "--file", "inode.c", "--json"];
    let o = run(&[&args[..], &["--kernel", &s(&dir)]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "one kernel: {v}");
    assert!(text(&o.stderr).contains("build id"), "{}", text(&o.stderr));
    let want = json(&run(&[&args[..], &["--kernel", &s(&vmlinux)]].concat()));
    let strip = |v: &serde_json::Value| v["results"][0]["candidates"].clone();
    assert_eq!(strip(&v), strip(&want));
    assert!(strip(&v)[0]["line"].as_u64().is_some());
    // With the image cached alone (and its -dbg package, were it cached), the folder is
    // still one kernel with the -dbg package's source files.
    let cache = s(&dir.join("cache"));
    for p in [&image, &dbg] {
        let o = run(&["info", "--kernel", &s(p), "--cache-dir", &cache]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let listed = json(&run(&["cache", "--cache-dir", &cache, "--json"]));
    assert!(
        !listed["entries"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    let o = run(&[&args[..], &["--kernel", &s(&dir), "--cache-dir", &cache]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = json(&o);
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "one kernel: {v}");
    assert_eq!(strip(&v), strip(&want));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check --kernel IMAGE.deb` uses the package's config and modules: the same verdict, loader
/// checks and kernel log as the unpacked image with --modules (which the oracle judges).
#[test]
fn check_against_an_image_package_uses_its_config_and_modules() {
    let (Some(deb), Some(vmlinuz), Some(mods), Some(lp)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_VMLINUZ"),
        lab("KLPSYM_TEST_MODULES_DIR"),
        lab("KLPSYM_TEST_LIVEPATCH_DIR"),
    ) else {
        return;
    };
    let ko = s(&lp.join("module-missing-after/klp_module_missing_after.ko"));
    let a = json(&run(&["check", &ko, "--kernel", &s(&deb), "--json"]));
    let b = json(&run(&[
        "check",
        &ko,
        "--kernel",
        &s(&vmlinuz),
        "--modules",
        &s(&mods),
        "--json",
    ]));
    let (ra, rb) = (&a["results"][0]["report"], &b["results"][0]["report"]);
    assert_eq!(ra["verdict"], rb["verdict"]);
    assert_eq!(ra["verdict"]["kind"], "refused_when_module_loads", "{ra}");
    assert_eq!(ra["kernel_log"], rb["kernel_log"]);
    let statuses = |r: &serde_json::Value| -> Vec<(String, String)> {
        r["loader_checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["check"].to_string(), c["status"].to_string()))
            .collect()
    };
    assert_eq!(statuses(ra), statuses(rb));
    assert!(
        statuses(ra).iter().all(|(_, st)| st == "\"passed\""),
        "{:?}",
        statuses(ra)
    );
    // The package as --modules and --btf beside the unpacked image: the same answer, with
    // the klp struct layouts read from the package's image.
    let c = json(&run(&[
        "check",
        &ko,
        "--kernel",
        &s(&vmlinuz),
        "--modules",
        &s(&deb),
        "--btf",
        &s(&deb),
        "--json",
    ]));
    let rc = &c["results"][0]["report"];
    assert_eq!(rc["verdict"], rb["verdict"]);
    assert_eq!(rc["kernel_log"], rb["kernel_log"]);
    assert!(
        rc["layouts_source"].as_str().unwrap_or("").contains("btf"),
        "{}",
        rc["layouts_source"]
    );
}

/// An RPM built with rpmbuild from the lab kernel's files, with an xz and a zstd payload.
fn build_rpm(dir: &Path, payload: &str) -> Option<PathBuf> {
    build_rpm_as(dir, payload, None)
}

/// `build_rpm`, its files under `lib/modules/RELEASE` (default: the lab kernel's release;
/// another name makes it another kernel for grouping).
fn build_rpm_as(dir: &Path, payload: &str, as_release: Option<&str>) -> Option<PathBuf> {
    let vmlinuz = lab("KLPSYM_TEST_VMLINUZ")?;
    // The primary kernel's own files, wherever its packages keep them (/boot before 7.x,
    // /usr/lib/modules/RELEASE since): its lab.env says.
    let k = common::lab_kernels().into_iter().next()?;
    let real = k.value("RELEASE").to_string();
    let config = k.path("CONFIG");
    let config_name = config.file_name()?.to_str()?.to_string();
    let system_map = config.with_file_name(config_name.replacen("config", "System.map", 1));
    let release = as_release.unwrap_or(&real).to_string();
    let spec = format!(
        "Name: kernel-core\nVersion: 6.1.0\nRelease: 1\nSummary: klpsym test kernel\nLicense: GPL-2.0\n\
         %description\nThe lab kernel, packaged as an RPM for klpsym's tests.\n\
         %install\nmkdir -p %{{buildroot}}/lib/modules/{release}\n\
         cp {} %{{buildroot}}/lib/modules/{release}/vmlinuz\n\
         cp {} %{{buildroot}}/lib/modules/{release}/config\n\
         cp {} %{{buildroot}}/lib/modules/{release}/System.map\n\
         %files\n/lib/modules/{release}/vmlinuz\n/lib/modules/{release}/config\n/lib/modules/{release}/System.map\n",
        s(&vmlinuz),
        s(&config),
        s(&system_map),
    );
    let top = dir.join(payload.replace('.', "_"));
    std::fs::create_dir_all(&top).unwrap();
    std::fs::write(top.join("k.spec"), spec).unwrap();
    let o = Command::new("rpmbuild")
        .args(["-bb", "--quiet", "--target", "x86_64"])
        .arg("--define")
        .arg(format!("_topdir {}", s(&top)))
        .arg("--define")
        .arg(format!("_binary_payload {payload}"))
        .args(["--define", "__os_install_post %{nil}"])
        .args(["--define", "_build_id_links none"])
        .arg(top.join("k.spec"))
        .output()
        .expect("rpmbuild (Debian's rpm package; scripts/test.sh installs it) runs");
    assert!(o.status.success(), "rpmbuild: {}", text(&o.stderr));
    let rpm = top.join("RPMS/x86_64/kernel-core-6.1.0-1.x86_64.rpm");
    assert!(rpm.is_file(), "{}", text(&o.stderr));
    Some(rpm)
}

#[test]
fn an_rpm_built_with_rpmbuild_is_a_kernel() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("rpm");
    let want = run(&["dump", "--kernel", &s(&vmlinuz)]).stdout;
    for payload in ["w6.xzdio", "w19.zstdio", "w9.gzdio"] {
        let Some(rpm) = build_rpm(&dir, payload) else {
            return;
        };
        let o = run(&["dump", "--kernel", &s(&rpm)]);
        assert_eq!(o.status.code(), Some(0), "{payload}: {}", text(&o.stderr));
        assert!(o.stdout == want, "{payload}: dump differs");
        let info = text(&run(&["info", "--kernel", &s(&rpm)]).stdout);
        assert!(
            info.contains("package kernel-core 6.1.0-1 (x86_64)"),
            "{info}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A damaged package is an error naming the archive layer and member, never a panic.
#[test]
fn a_truncated_package_names_what_is_missing() {
    let Some(deb) = lab("KLPSYM_TEST_IMAGE_DEB") else {
        return;
    };
    let dir = tempdir("bad");
    let bytes = std::fs::read(&deb).unwrap();
    for (name, cut) in [("short.deb", 100_000), ("head.deb", 2_000)] {
        let p = dir.join(name);
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let o = run(&["dump", "--kernel", &s(&p)]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&s(&p)), "{err}");
        assert!(
            err.contains("data.tar") || err.contains("ar member"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cache from the command line: a second run reads the table from the cache (info says
/// so), `klpsym cache` lists the entry with its input, --no-cache neither reads nor writes,
/// `--prune 0` empties it.
#[test]
fn the_cache_from_the_command_line() {
    let Some(vmlinuz) = lab("KLPSYM_TEST_VMLINUZ") else {
        return;
    };
    let dir = tempdir("cli-cache");
    let cache = s(&dir.join("c"));
    let k = s(&vmlinuz);
    // One kernel's info is the object itself.
    let info = |extra: &[&str]| {
        json(&run(
            &[&["info", "--kernel", &k, "--json"][..], extra].concat()
        ))
    };
    let cold = info(&["--cache-dir", &cache]);
    assert!(cold["cache_entry"].is_null(), "{cold}");
    let warm = info(&["--cache-dir", &cache]);
    assert!(warm["cache_entry"].is_string(), "{warm}");
    for f in ["symbols", "version", "build_id", "vermagic", "format"] {
        assert_eq!(warm[f], cold[f], "{f}");
    }
    let o = run(&[
        "lookup",
        "init_once",
        "--sympos",
        "1",
        "--kernel",
        &k,
        "--cache-dir",
        &cache,
    ]);
    let o2 = run(&[
        "lookup",
        "init_once",
        "--sympos",
        "1",
        "--kernel",
        &k,
        "--no-cache",
    ]);
    assert_eq!(o.stdout, o2.stdout);
    let listed = json(&run(&["cache", "--cache-dir", &cache, "--json"]));
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    assert_eq!(entries[0]["source"], k.as_str());
    assert!(entries[0]["bytes"].as_u64().unwrap() < std::fs::metadata(&vmlinuz).unwrap().len());
    let human = text(&run(&["cache", "--cache-dir", &cache]).stdout);
    assert!(human.contains("1 entry") && human.contains(&k), "{human}");
    let pruned = json(&run(&[
        "cache",
        "--cache-dir",
        &cache,
        "--prune",
        "0",
        "--json",
    ]));
    assert_eq!(pruned["removed"].as_array().unwrap().len(), 1, "{pruned}");
    assert_eq!(pruned["entries"].as_array().unwrap().len(), 0);
    let none = s(&dir.join("none"));
    let o = run(&["info", "--kernel", &k, "--cache-dir", &none, "--no-cache"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--cache-dir and --no-cache conflict"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder of two kernels' packages (the image .deb, an RPM naming another release) is a
/// two-kernel matrix; the second run reads both from the cache, with the same answers.
#[test]
fn a_folder_of_two_kernels_is_a_matrix_and_cached() {
    let (Some(deb), Some(lp)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_LIVEPATCH_DIR"),
    ) else {
        return;
    };
    let dir = tempdir("matrix");
    // Another release name than the lab kernel's: another kernel for the grouping.
    let other = common::lab_kernels()
        .first()
        .map(|k| format!("{}-rpmtest", k.value("RELEASE")))
        .unwrap_or_default();
    let Some(rpm) = build_rpm_as(&dir, "w19.zstdio", Some(&other)) else {
        return;
    };
    let folder = dir.join("kernels");
    std::fs::create_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&deb, folder.join(deb.file_name().unwrap())).unwrap();
    std::fs::copy(&rpm, folder.join("kernel-core.rpm")).unwrap();
    let cache = s(&dir.join("cache"));
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let args = [
        "check",
        &ko,
        "--kernel",
        &s(&folder),
        "--cache-dir",
        &cache,
        "--json",
    ];
    let cold = json(&run(&args));
    let results = cold["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "two releases, two kernels");
    for r in results {
        assert_eq!(
            r["report"]["verdict"]["kind"], "accepted",
            "{}",
            r["kernel"]
        );
    }
    let warm = json(&run(&args));
    assert_eq!(warm["results"], cold["results"]);
    let listed = json(&run(&["cache", "--cache-dir", &cache, "--json"]));
    assert_eq!(listed["entries"].as_array().unwrap().len(), 2, "{listed}");
    let info = text(&run(&["info", "--kernel", &s(&folder), "--cache-dir", &cache]).stdout);
    assert_eq!(info.matches("(table from the cache)").count(), 2, "{info}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The folder users have: the lab's image package with its `-dbg` and headers packages, an
/// arm64 image package, and a package cut short. `check` gives every readable kernel its
/// verdict (the amd64 kernel accepts the case module, the arm64 kernel's module loader refuses
/// it by its ELF header), the broken package its own row, and exits 2; the `-dbg` package
/// (about 1 GiB, over the input limit) is not read at all. Before, the folder failed as a
/// whole on the first package it could not read.
#[test]
fn a_folder_of_packages_with_a_broken_one_gives_every_readable_kernel_a_verdict() {
    let (Some(deb), Some(dbg), Some(lp)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_DBG_DEB"),
        lab("KLPSYM_TEST_LIVEPATCH_DIR"),
    ) else {
        return;
    };
    let arm64 = common::lab_kernels()
        .into_iter()
        .find(|k| k.value("ARCH") == "arm64" && !k.value("IMAGE_DEB").is_empty());
    let Some(arm64) = arm64 else {
        klpsym_testkit::lab::skip(
            "a folder of packages with an arm64 kernel",
            "no arm64 lab kernel with an image package",
        );
        return;
    };
    let dir = tempdir("broken-folder");
    let folder = dir.join("debs");
    std::fs::create_dir_all(&folder).unwrap();
    let link = |p: &Path| {
        std::os::unix::fs::symlink(p, folder.join(p.file_name().unwrap())).unwrap();
    };
    link(&deb);
    link(&dbg);
    link(&arm64.path("IMAGE_DEB"));
    // The headers package of the same release, beside its image (Debian's folder).
    let headers = deb
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace("linux-image-", "linux-headers-");
    let headers = deb.with_file_name(headers);
    if headers.is_file() {
        link(&headers);
    }
    let bytes = std::fs::read(&deb).unwrap();
    std::fs::write(
        folder.join("linux-image-9.9.9-1-amd64_9.9.9-1_amd64.deb"),
        &bytes[..4096],
    )
    .unwrap();
    let ko = s(&lp.join("unique/klp_unique.ko"));
    let o = run(&[
        "check",
        &ko,
        "--kernel",
        &s(&folder),
        "--no-cache",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v = json(&o);
    let results = v["results"].as_array().unwrap();
    let verdict = |arch: &str| {
        results
            .iter()
            .find(|r| r["report"]["arch"] == arch)
            .map(|r| r["report"]["verdict"]["kind"].as_str().unwrap().to_string())
    };
    assert_eq!(verdict("x86_64").as_deref(), Some("accepted"), "{v}");
    let refused = results
        .iter()
        .find(|r| r["kernel"].as_str().unwrap().contains("arm64"))
        .expect("the arm64 kernel's verdict");
    assert_eq!(refused["report"]["verdict"]["kind"], "refused_at_load");
    assert!(
        refused["report"]["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "elf_header" && p["reached"] == true),
        "{refused}"
    );
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0]["kernel"].as_str().unwrap().contains("9.9.9"),
        "{failed:?}"
    );
    // The -dbg package is read for the bindings' source files (joined to its image by build
    // id, said in a note); nothing about it is an error.
    assert!(
        !text(&o.stderr)
            .lines()
            .any(|l| l.starts_with("klpsym: error") && l.contains("-dbg")),
        "the -dbg package is read without an error: {}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
