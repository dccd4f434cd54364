//! Which `nm -n` lines never reach the kallsyms tables, per kernel era.
//!
//! Two filters run in series: `scripts/mksysmap` (only since 6.1, when kallsyms
//! started to read its output; see kbuild commit "kbuild: reuse mksysmap output
//! for kallsyms") and `scripts/kallsyms.c` itself (`is_ignored_symbol()` since
//! 5.6, `read_symbol()` + `symbol_valid()` before). The lists below are the union
//! of both stages for each era, written from reading those files.

/// Kernel version that selects the filter rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion {
    /// Major number (6 in 6.1.0).
    pub major: u32,
    /// Minor number (1 in 6.1.0).
    pub minor: u32,
}

impl KernelVersion {
    /// Parse the leading `X.Y` of a release string such as `6.1.0-57-amd64`.
    pub fn parse(release: &str) -> Option<Self> {
        let mut it = release.split(|c: char| !c.is_ascii_digit());
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }

    fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

/// Longest name kallsyms accepts is `KSYM_NAME_LEN - 1`: 127 before 6.1, 511 since
/// (commit "kallsyms: increase maximum kernel symbol length to 512").
pub(crate) fn ksym_name_len(v: KernelVersion) -> usize {
    if v.at_least(6, 1) {
        512
    } else {
        128
    }
}

/// True when the `nm -n` line `(name, kind)` is dropped before the kallsyms
/// address-range check.
pub(crate) fn is_ignored(v: KernelVersion, name: &str, kind: u8) -> bool {
    if name.len() >= ksym_name_len(v) {
        // kallsyms.c prints "Symbol ... too long for kallsyms" and skips it.
        return true;
    }
    mksysmap_drops(v, name, kind) || kallsyms_c_drops(v, name, kind)
}

/// scripts/mksysmap, whose output kallsyms reads since 6.1 (a grep until 6.3,
/// a sed script since 6.4).
fn mksysmap_drops(v: KernelVersion, name: &str, kind: u8) -> bool {
    if !v.at_least(6, 1) {
        return false;
    }
    // " [aNUw] ": local absolute, debugging, undefined, weak undefined.
    if matches!(kind, b'a' | b'N' | b'U' | b'w') {
        return true;
    }
    // 6.1-6.3: grep -v -e ' [aNUw] ' -e ' \$' -e ' \.L' -e ' __crc_' -e ' __kstrtab_'
    //          -e ' __kstrtabns_' -e ' L0$' (seen: Debian 6.1.192 lists no
    //          __kstrtab_*); 6.4 turned it into a sed script and moved kallsyms.c's
    //          lists there too.
    if name.starts_with('$')
        || name.starts_with(".L")
        || name.starts_with("__crc_")
        || name.starts_with("__kstrtab_")
        || name.starts_with("__kstrtabns_")
        || name == "L0"
    {
        return true;
    }
    if v.at_least(6, 4)
        && (name.starts_with("__pi_$")
            || name.starts_with("__pi_.L")
            || name.starts_with("__kvm_nvhe___kcfi_typeid_")
            || name.starts_with("__pi___kcfi_typeid_"))
    {
        return true;
    }
    // objtool's function-padding prefix symbols (__pfx_*) stay listed: the patch that would
    // have dropped them here ("scripts/mksysmap: skip objtool __pfx_ symbols", 2025) was
    // not merged (7.1's mksysmap has no such line), and Debian's 6.12 and 7.2 list them.
    // MODULE_DEVICE_TABLE symbols (6.17).
    v.at_least(6, 17) && name.starts_with("__mod_device_table__")
}

/// scripts/kallsyms.c's own filter.
fn kallsyms_c_drops(v: KernelVersion, name: &str, kind: u8) -> bool {
    // The tables' own symbols vary between the link passes, so kallsyms.c left them out
    // until 6.10, when "kallsyms: Avoid weak references for kallsyms symbols"
    // (951bcae6c5a0) defined them in every pass and dropped them from its list: Debian's
    // 6.12 lists all eight in /proc/kallsyms.
    const TABLES: &[&str] = &[
        "kallsyms_addresses",
        "kallsyms_offsets",
        "kallsyms_relative_base",
        "kallsyms_num_syms",
        "kallsyms_names",
        "kallsyms_markers",
        "kallsyms_token_table",
        "kallsyms_token_index",
        // Added with the name-sorted index (6.2, and backported: Debian's
        // 6.1.192 has the table and does not list it).
        "kallsyms_seqs_of_names",
    ];
    if !v.at_least(6, 10) && TABLES.contains(&name) {
        return true;
    }
    const EXACT: &[&str] = &["_SDA_BASE_", "_SDA2_BASE_"];
    const PREFIXES: &[&str] = &[
        "$",
        "__efistub_",
        "__AArch64ADRPThunk_",
        "__ARMV5PILongThunk_",
        "__ARMV7PILongThunk_",
        "__ThumbV7PILongThunk_",
        "__LA25Thunk_",
        "__microLA25Thunk_",
    ];
    const SUFFIXES: &[&str] = &["_from_arm", "_from_thumb", "_veneer"];
    const CONTAINS: &[&str] = &[".long_branch.", ".plt_branch."];

    if EXACT.contains(&name)
        || PREFIXES.iter().any(|p| name.starts_with(p))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || CONTAINS.iter().any(|c| name.contains(c))
    {
        return true;
    }
    if v.at_least(6, 1) {
        if name.starts_with("__kcfi_typeid_")
            || name.starts_with("__kvm_nvhe_$")
            || name.starts_with("__kvm_nvhe_.L")
        {
            return true;
        }
    } else if name.starts_with("__crc_")
        || name.starts_with(".LASANPC")
        || name.starts_with("__kvm_nvhe_")
    {
        // 5.x: the whole non-VHE KVM namespace was hidden.
        return true;
    }
    match kind {
        b'U' | b'u' | b'N' | b'n' => true,
        b'A' | b'a' => !matches!(
            name,
            // ia64's "useful absolute symbols".
            "__kernel_syscall_via_break"
                | "__kernel_syscall_via_epc"
                | "__kernel_sigtramp"
                | "__gp"
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V54: KernelVersion = KernelVersion { major: 5, minor: 4 };
    const V61: KernelVersion = KernelVersion { major: 6, minor: 1 };
    const V66: KernelVersion = KernelVersion { major: 6, minor: 6 };
    const V616: KernelVersion = KernelVersion {
        major: 6,
        minor: 16,
    };

    #[test]
    fn version_parse_takes_major_minor() {
        assert_eq!(KernelVersion::parse("6.1.0-57-amd64"), Some(V61));
        assert_eq!(KernelVersion::parse("5.4"), Some(V54));
        assert_eq!(KernelVersion::parse("x"), None);
    }

    #[test]
    fn common_ignores_hold_in_every_era() {
        for v in [V54, V61, V66, V616] {
            assert!(is_ignored(v, "__crc_foo", b'A'), "{v:?}");
            assert!(is_ignored(v, "$x", b't'), "{v:?}");
            assert!(is_ignored(v, "foo_veneer", b't'), "{v:?}");
            assert!(is_ignored(v, "undefined", b'U'), "{v:?}");
            assert!(is_ignored(v, "abs", b'A'), "{v:?}");
            assert!(!is_ignored(v, "__gp", b'A'), "{v:?}");
            assert!(!is_ignored(v, "schedule", b'T'), "{v:?}");
            assert!(!is_ignored(v, "weakling", b'W'), "{v:?}");
        }
    }

    #[test]
    fn the_tables_own_symbols_are_listed_since_6_10() {
        for v in [V54, V61, V66] {
            assert!(is_ignored(v, "kallsyms_names", b'R'), "{v:?}");
            // Regression: Debian 6.1.192 has the table but does not list it.
            assert!(is_ignored(v, "kallsyms_seqs_of_names", b'R'), "{v:?}");
        }
        // Seen in Debian's 6.12.118: all eight listed, as 'D'.
        let v612 = KernelVersion {
            major: 6,
            minor: 12,
        };
        for name in [
            "kallsyms_names",
            "kallsyms_seqs_of_names",
            "kallsyms_offsets",
        ] {
            assert!(!is_ignored(v612, name, b'D'), "{name}");
            assert!(!is_ignored(V616, name, b'D'), "{name}");
        }
    }

    #[test]
    fn era_specific_ignores() {
        // weak undefined: only mksysmap drops it.
        assert!(!is_ignored(V54, "weak_undef", b'w'));
        assert!(is_ignored(V61, "weak_undef", b'w'));
        // __kstrtab_: dropped by mksysmap from 6.1 on.
        assert!(!is_ignored(V54, "__kstrtab_foo", b'r'));
        assert!(is_ignored(V61, "__kstrtab_foo", b'r'));
        assert!(is_ignored(V66, "__kstrtab_foo", b'r'));
        // __pfx_: listed in every version (Debian 6.12 and 7.2 captures).
        assert!(!is_ignored(V66, "__pfx_schedule", b't'));
        assert!(!is_ignored(V616, "__pfx_schedule", b't'));
        // symbol length limit
        let long = "a".repeat(200);
        assert!(is_ignored(V54, &long, b't'));
        assert!(!is_ignored(V61, &long, b't'));
    }
}
