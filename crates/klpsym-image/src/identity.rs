//! What a kernel image says about itself besides its symbols: the `Linux version` banner,
//! the module loader's `VERMAGIC_STRING`, and the GNU build id, each found by a scan of the
//! decompressed image (the same scans read a vmlinux).

use std::ops::Range;

use klpsym_resched::resched::{Cancelled, Resched};
use klpsym_resched::ChunkedFinder;

/// The kernel banner: "Linux version " followed by a digit, up to the end of its line.
///
/// Images since 6.x hold two: the build-time one, whose UTS_VERSION has no build number
/// (`# SMP PREEMPT_DYNAMIC ...`), and the one the running kernel shows in /proc/version
/// (`#1 SMP ...`, init/version-timestamp.c). The first with a build number wins, else the
/// first.
pub(crate) fn find_version(
    data: &[u8],
    spans: &[Range<usize>],
    resched: &mut Resched,
) -> Result<Option<String>, Cancelled> {
    let finder = ChunkedFinder::new(b"Linux version ");
    let mut next = 0;
    let mut first = None;
    while let Some(at) = finder.find_in(data, spans, next, resched)? {
        next = at + 1;
        let rest = &data[at..data.len().min(at + 512)];
        if !rest.get(14).is_some_and(u8::is_ascii_digit) {
            continue;
        }
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == 0)
            .unwrap_or(rest.len());
        let banner = String::from_utf8_lossy(&rest[..end]).trim_end().to_owned();
        let numbered = banner
            .match_indices(" #")
            .any(|(i, _)| banner[i + 2..].starts_with(|c: char| c.is_ascii_digit()));
        if numbered {
            return Ok(Some(banner));
        }
        first.get_or_insert(banner);
    }
    Ok(first)
}

/// The kernel's `VERMAGIC_STRING` (include/linux/vermagic.h): `UTS_RELEASE " "` followed by
/// configuration tokens, each ending in a space (`SMP `, `preempt `, `mod_unload `,
/// `modversions `), then the architecture's `MODULE_ARCH_VERMAGIC` without one (`aarch64`
/// on arm64, nothing on x86_64), NUL-terminated in .rodata, where the module loader's
/// `vermagic[]` keeps it. `release` is the banner's (`6.1.0-57-amd64`). The first string of
/// that shape wins; the banner (`6.1.0-57-amd64 (debian-kernel@...`) and bare releases do
/// not have it.
pub fn find_vermagic(
    data: &[u8],
    spans: &[Range<usize>],
    release: &str,
    resched: &mut Resched,
) -> Result<Option<String>, Cancelled> {
    if release.is_empty() {
        return Ok(None);
    }
    let needle = format!("{release} ");
    let finder = ChunkedFinder::new(needle.as_bytes());
    let mut next = 0;
    while let Some(at) = finder.find_in(data, spans, next, resched)? {
        next = at + 1;
        // A string starts here: the byte before is a NUL (or the data's start).
        if at > 0 && data[at - 1] != 0 {
            continue;
        }
        let rest = &data[at..data.len().min(at + 256)];
        let Some(end) = rest.iter().position(|&b| b == 0) else {
            continue;
        };
        let s = &rest[..end];
        let tail = &s[needle.len()..];
        let token = |t: &[u8]| {
            !t.is_empty()
                && t.iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        };
        // x86_64 ends with the last token's space, arm64 with "aarch64" (no space).
        let body = match tail.strip_suffix(b" ") {
            Some(b) => Some(b),
            None if tail == b"aarch64" || tail.ends_with(b" aarch64") => Some(tail),
            None => None,
        };
        if body.is_some_and(|b| !b.is_empty() && b.split(|&c| c == b' ').all(token)) {
            return Ok(Some(String::from_utf8_lossy(s).into_owned()));
        }
    }
    Ok(None)
}

/// The GNU build id (NT_GNU_BUILD_ID, the linker's `--build-id`) of a kernel, lower-case hex:
/// what `/sys/kernel/notes` holds at run time.
///
/// The kernel's data holds other build ids than its own: the vDSO (and on arm64 the 32-bit
/// compat vDSO) is a whole ELF library inside it, with a build id note of its own, and comes
/// before the kernel's notes (Debian 6.1 amd64: the vDSO's 7580...a7, the kernel's 6a2b...69;
/// Debian 6.12 arm64: two vDSO notes, then the kernel's). A vDSO can be the same in two builds
/// of a kernel, so its id says nothing about which build this is.
///
/// An ELF (a vmlinux, or the ELF an x86 bzImage decompresses to) says where its notes are: its
/// note sections are read. A raw image (arm64 Image) is searched for the note `namesz 4,
/// descsz 20, type 3, "GNU\0"` and the 20 bytes after it, and a note that is the build id of
/// an ELF image starting at most 64 KiB before it (a vDSO) is passed over.
pub fn find_build_id(
    data: &[u8],
    spans: &[Range<usize>],
    resched: &mut Resched,
) -> Result<Option<String>, Cancelled> {
    use object::Object;
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    if data.starts_with(b"\x7fELF") {
        return Ok(object::File::parse(data)
            .ok()
            .and_then(|f| f.build_id().ok().flatten())
            .map(hex));
    }
    const HEAD: &[u8] = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00";
    // The build id of the ELF image whose header is the last one in the 64 KiB before `at`.
    let embedded_id = |at: usize| -> Option<&[u8]> {
        let window = &data[at.saturating_sub(64 << 10)..at];
        let start = at - window.len() + memchr::memmem::rfind(window, b"\x7fELF")?;
        object::File::parse(&data[start..]).ok()?.build_id().ok()?
    };
    let finder = ChunkedFinder::new(HEAD);
    let mut from = 0;
    while let Some(at) = finder.find_in(data, spans, from, resched)? {
        let Some(id) = data.get(at + HEAD.len()..at + HEAD.len() + 20) else {
            break;
        };
        if embedded_id(at) != Some(id) {
            return Ok(Some(hex(id)));
        }
        from = at + 1;
    }
    Ok(None)
}

/// The release in a banner: `Linux version 6.1.0-57-amd64 (...)` → `6.1.0-57-amd64`.
pub fn banner_release(banner: &str) -> Option<&str> {
    banner
        .strip_prefix("Linux version ")
        .unwrap_or(banner)
        .split_whitespace()
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build id note (`namesz 4, descsz 20, type 3, "GNU\0"`, 20 bytes of `fill`).
    fn note(fill: u8) -> Vec<u8> {
        let mut n = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00".to_vec();
        n.extend([fill; 20]);
        n
    }

    #[test]
    fn an_elf_s_build_id_is_its_note_section_s_not_the_first_one_in_its_data() {
        use object::write::Object;
        use object::{Architecture, BinaryFormat, Endianness, SectionKind};
        let mut o = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        // The vDSO's note, inside read-only data, first.
        let ro = o.add_section(Vec::new(), b".rodata".to_vec(), SectionKind::ReadOnlyData);
        let mut vdso = b"\x7fELF....".to_vec();
        vdso.extend(note(0xaa));
        o.append_section_data(ro, &vdso, 8);
        let notes = o.add_section(Vec::new(), b".notes".to_vec(), SectionKind::Note);
        o.append_section_data(notes, &note(0x6a), 4);
        let elf = o.write().unwrap();
        let rs = &mut Resched::none();
        let id = find_build_id(&elf, klpsym_resched::EVERYWHERE, rs).unwrap();
        assert_eq!(id.as_deref(), Some("6a".repeat(20).as_str()));
        // A raw image is searched: the first note that is not an embedded ELF's own (the
        // ELF above stands in for a vDSO).
        let mut vdso = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let notes = vdso.add_section(Vec::new(), b".notes".to_vec(), SectionKind::Note);
        vdso.append_section_data(notes, &note(0x5d), 4);
        let mut raw = vec![0u8; 64];
        raw.extend(vdso.write().unwrap());
        raw.extend([0u8; 100]);
        raw.extend(note(0x11));
        raw.extend(note(0x22));
        let id = find_build_id(&raw, klpsym_resched::EVERYWHERE, rs).unwrap();
        assert_eq!(id.as_deref(), Some("11".repeat(20).as_str()));
        // An ELF header before a note that is not that ELF's build id does not hide it.
        let mut raw = b"..\x7fELF garbage..".to_vec();
        raw.extend(note(0x33));
        let id = find_build_id(&raw, klpsym_resched::EVERYWHERE, rs).unwrap();
        assert_eq!(id.as_deref(), Some("33".repeat(20).as_str()));
        // An ELF without a build id note has none, whatever its data holds.
        let mut o = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let ro = o.add_section(Vec::new(), b".rodata".to_vec(), SectionKind::ReadOnlyData);
        o.append_section_data(ro, &note(0xaa), 8);
        assert_eq!(
            find_build_id(&o.write().unwrap(), klpsym_resched::EVERYWHERE, rs).unwrap(),
            None
        );
    }

    #[test]
    fn the_runtime_banner_wins_over_the_build_time_one() {
        // Debian 7.2's image: the build-time banner first, without a build number.
        let data = b"xx\0Linux version 7.2.13+deb14-amd64 (d@l) (gcc-16) # SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-28)\n\0yy\0Linux version 7.2.13+deb14-amd64 (d@l) (gcc-16) #1 SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-28)\n\0";
        let v = find_version(data, klpsym_resched::EVERYWHERE, &mut Resched::none())
            .unwrap()
            .unwrap();
        assert!(v.contains(" #1 SMP"), "{v}");
        // One banner without a number: that one.
        let one = b"Linux version 6.1.0 (x) # SMP\n";
        assert_eq!(
            find_version(one, klpsym_resched::EVERYWHERE, &mut Resched::none())
                .unwrap()
                .as_deref(),
            Some("Linux version 6.1.0 (x) # SMP")
        );
    }

    #[test]
    fn vermagic_is_told_from_the_banner_and_other_strings() {
        let data = b"\x006.1.0-57-amd64 (debian-kernel@lists.debian.org) (gcc-12)\0\
6.1.0-57-amd64\0x6.1.0-57-amd64 SMP \0\
6.1.0-57-amd64 SMP preempt mod_unload modversions \0tail";
        let got = find_vermagic(
            data,
            klpsym_resched::EVERYWHERE,
            "6.1.0-57-amd64",
            &mut Resched::none(),
        )
        .unwrap();
        assert_eq!(
            got.as_deref(),
            Some("6.1.0-57-amd64 SMP preempt mod_unload modversions ")
        );
        assert_eq!(
            find_vermagic(
                b"\x006.1.0 SMP \0",
                klpsym_resched::EVERYWHERE,
                "6.1.0-57-amd64",
                &mut Resched::none()
            )
            .unwrap(),
            None
        );
        // arm64: MODULE_ARCH_VERMAGIC comes last, without a space (Debian 6.12 arm64).
        let arm = b"\x006.12.118+deb13-arm64 SMP\x006.12.118+deb13-arm64 SMP mod_unload modversions aarch64\0";
        assert_eq!(
            find_vermagic(
                arm,
                klpsym_resched::EVERYWHERE,
                "6.12.118+deb13-arm64",
                &mut Resched::none()
            )
            .unwrap()
            .as_deref(),
            Some("6.12.118+deb13-arm64 SMP mod_unload modversions aarch64")
        );
        assert_eq!(
            banner_release("Linux version 6.12.117+deb13-amd64 (x) #1 SMP"),
            Some("6.12.117+deb13-amd64")
        );
    }
}
