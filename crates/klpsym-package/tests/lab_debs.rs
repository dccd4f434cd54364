//! The lab's own Debian packages read in place, judged by the files dpkg unpacked from them
//! (the lab's unpacked tree and extracted -dbg vmlinux): the same bytes, the same module list.
//!
//! Inputs from scripts/test.sh: KLPSYM_TEST_IMAGE_DEB, KLPSYM_TEST_DBG_DEB, KLPSYM_TEST_VMLINUZ,
//! KLPSYM_TEST_VMLINUX (the extracted -dbg vmlinux), KLPSYM_TEST_MODULES_DIR. Skips without
//! them unless KLPSYM_REQUIRE_LAB.

use klpsym_package::{read_package, MemberKind, PackageFormat, Want};
use klpsym_resched::resched::Resched;

use klpsym_testkit::lab::lab;

const LIMIT: u64 = 16 << 30;

#[test]
fn the_image_package_holds_the_unpacked_image_config_and_modules() {
    let (Some(deb), Some(vmlinuz), Some(mods)) = (
        lab("KLPSYM_TEST_IMAGE_DEB"),
        lab("KLPSYM_TEST_VMLINUZ"),
        lab("KLPSYM_TEST_MODULES_DIR"),
    ) else {
        return;
    };
    let bytes = std::fs::read(&deb).unwrap();
    let release = mods.file_name().unwrap().to_str().unwrap().to_string();
    // The image alone: found in /boot, before the modules, so reading stops early.
    let p = read_package(
        &bytes,
        Want {
            image: true,
            ..Want::default()
        },
        LIMIT,
        &mut Resched::none(),
    )
    .unwrap();
    assert_eq!(p.format, PackageFormat::Deb);
    assert_eq!(
        p.name.as_deref(),
        Some(format!("linux-image-{release}").as_str())
    );
    assert_eq!(p.release(), Some(release.as_str()));
    assert!(
        p.stopped_early,
        "the image, config and System.map come first"
    );
    let image = p.first(MemberKind::Image).expect("an image");
    assert_eq!(image.data, std::fs::read(&vmlinuz).unwrap());
    assert!(p.first(MemberKind::Config).is_some() && p.first(MemberKind::SystemMap).is_some());
    assert!(p.first(MemberKind::Module).is_none());
    // Every module, with the bytes dpkg unpacked.
    let p = read_package(
        &bytes,
        Want {
            modules: true,
            ..Want::default()
        },
        LIMIT,
        &mut Resched::none(),
    )
    .unwrap();
    let mut on_disk = Vec::new();
    let mut stack = vec![mods.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if klpsym_testkit::lab::is_module_file(&e.path()) {
                on_disk.push(e.path());
            }
        }
    }
    let in_pkg: Vec<&klpsym_package::Member> = p
        .members
        .iter()
        .filter(|m| m.kind == MemberKind::Module)
        .collect();
    assert_eq!(in_pkg.len(), on_disk.len());
    assert!(in_pkg.len() > 1000, "{} modules", in_pkg.len());
    for m in in_pkg.iter().step_by(97) {
        let rel = m.path.split_once(&format!("modules/{release}/")).unwrap().1;
        assert_eq!(m.data, std::fs::read(mods.join(rel)).unwrap(), "{}", m.path);
    }
}

#[test]
fn the_dbg_package_holds_the_extracted_vmlinux() {
    let (Some(deb), Some(vmlinux)) = (lab("KLPSYM_TEST_DBG_DEB"), lab("KLPSYM_TEST_VMLINUX"))
    else {
        return;
    };
    let bytes = std::fs::read(&deb).unwrap();
    let p = read_package(
        &bytes,
        Want {
            vmlinux: true,
            ..Want::default()
        },
        LIMIT,
        &mut Resched::none(),
    )
    .unwrap();
    assert!(
        p.stopped_early,
        "the vmlinux comes before the debug modules"
    );
    let v = p.first(MemberKind::Vmlinux).expect("a vmlinux");
    assert!(
        v.data == std::fs::read(&vmlinux).unwrap(),
        "the bytes differ"
    );
}

/// A `-dbg` package cut inside its vmlinux: its `data.tar.xz` is a threaded xz's stream of
/// blocks, decoded on workers where the machine has two CPUs or more; the error names the
/// member, and the block the stream ends in, never a panic.
#[test]
fn a_dbg_package_cut_short_names_the_block_it_ends_in() {
    let Some(deb) = lab("KLPSYM_TEST_DBG_DEB") else {
        return;
    };
    let bytes = std::fs::read(&deb).unwrap();
    let cut = &bytes[..(bytes.len() / 40).max(1 << 20)];
    let want = Want {
        vmlinux: true,
        ..Want::default()
    };
    let e = read_package(cut, want, LIMIT, &mut Resched::none())
        .unwrap_err()
        .to_string();
    assert!(e.contains("data.tar.xz"), "{e}");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(e.contains("XZ block") && e.contains("cut short"), "{e}");
    }
}
