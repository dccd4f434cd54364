//! Where the fields the kernel reads live in `struct klp_patch`, `klp_object` and `klp_func`.
//!
//! The external (author-filled) fields sit at the start of each struct and have not moved
//! since 4.x: `klp_patch.objs` at 8 (after `mod`), `klp_object.{name,funcs}` at 0/8,
//! `klp_func.{old_name,new_func,old_sympos}` at 0/8/16. What varies is the struct sizes, i.e.
//! the array strides, because internal fields came and went (include/linux/livepatch.h):
//! - 5.1 (atomic replace) added `klp_func.nop`, `node`, `klp_object.dynamic`, `func_list`,
//!   `node`, and dropped `kobj_added`; since then, on 64-bit without
//!   CONFIG_DEBUG_KOBJECT_RELEASE (which grows `struct kobject`), `sizeof(struct klp_func)`
//!   is 152 and `sizeof(struct klp_object)` 168 through 6.18;
//! - 5.0: 136 / 152 (`kobj_added` instead of the list nodes) — before our range.
//!
//! The fallback is therefore exact only for the common configuration; the target's BTF
//! ([`crate::btf`]) gives the truth, and the module itself is a cross-check: every array the
//! compiler emitted ends with a zero entry at `n * stride`, and consecutive `old_name`
//! relocations are `stride` apart ([`crate::patch`] verifies both and says when they disagree).

use serde::Serialize;

/// Offsets and sizes of the livepatch structures, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StructLayouts {
    /// `offsetof(struct klp_patch, objs)`.
    pub patch_objs: u64,
    /// `offsetof(struct klp_object, name)`.
    pub object_name: u64,
    /// `offsetof(struct klp_object, funcs)`.
    pub object_funcs: u64,
    /// `sizeof(struct klp_object)`.
    pub object_size: u64,
    /// `offsetof(struct klp_func, old_name)`.
    pub func_old_name: u64,
    /// `offsetof(struct klp_func, new_func)`.
    pub func_new_func: u64,
    /// `offsetof(struct klp_func, old_sympos)`.
    pub func_old_sympos: u64,
    /// `sizeof(struct klp_func)`.
    pub func_size: u64,
    /// Where these numbers come from (`btf`, `fallback 5.1-6.18`, `caller`).
    pub source: &'static str,
}

impl StructLayouts {
    /// The documented fallback for a 64-bit kernel `major.minor` (see the module docs).
    pub fn fallback(major: u32, minor: u32) -> StructLayouts {
        let (func_size, object_size) = if (major, minor) >= (5, 1) {
            (152, 168)
        } else {
            (136, 152)
        };
        StructLayouts {
            patch_objs: 8,
            object_name: 0,
            object_funcs: 8,
            object_size,
            func_old_name: 0,
            func_new_func: 8,
            func_old_sympos: 16,
            func_size,
            source: if (major, minor) >= (5, 1) {
                "fallback 5.1-6.18"
            } else {
                "fallback 5.0"
            },
        }
    }

    /// True when every field fits in its struct (a sanity check for caller- or BTF-provided
    /// numbers).
    pub fn is_consistent(&self) -> bool {
        self.object_name + 8 <= self.object_size
            && self.object_funcs + 8 <= self.object_size
            && self.func_old_name + 8 <= self.func_size
            && self.func_new_func + 8 <= self.func_size
            && self.func_old_sympos + 8 <= self.func_size
            && self.object_size > 0
            && self.func_size > 0
    }
}

/// What changed between kernel versions in the checks this crate reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KernelRules {
    /// The target version, `major.minor`.
    pub version: (u32, u32),
    /// KSYM_NAME_LEN: 512 since 6.1 (commit b8a94bfb3395), 128 before.
    pub ksym_name_len: usize,
    /// Since 5.8 (commit 7c8e2bdd5f0d) vmlinux klp relocations are applied by the module
    /// loader when the patch module loads; before, all of them were applied when the patch
    /// was enabled (`klp_init_object_loaded`), after the patch's own relocations.
    pub vmlinux_relocs_at_load: bool,
    /// Since 5.8 (commit 1d05334d2899): `invalid access to vmlinux symbol '%s' from
    /// module-specific livepatch relocation section`.
    pub rejects_vmlinux_in_module_section: bool,
    /// Since 6.19 (the klp-build series; 6.14 prints the old text, 7.0, 7.1 and Debian's
    /// 7.2 the new one) klp_resolve_symbols() says where the symbol was met:
    /// `symbol %s at rela sec %u idx %d is not marked as a livepatch symbol`.
    pub not_livepatch_message_has_position: bool,
    /// The stable sublevel (`5.10.223` -> 223), when the source says it: stable trees
    /// backport changes (5.10.220 took 5.12's kallsyms walk refactor).
    pub sublevel: Option<u32>,
}

impl KernelRules {
    /// The rules of kernel `major.minor`.
    pub fn for_version(major: u32, minor: u32) -> KernelRules {
        let v = (major, minor);
        KernelRules {
            version: v,
            ksym_name_len: if v >= (6, 1) { 512 } else { 128 },
            vmlinux_relocs_at_load: v >= (5, 8),
            rejects_vmlinux_in_module_section: v >= (5, 8),
            not_livepatch_message_has_position: v >= (6, 19),
            sublevel: None,
        }
    }

    /// These rules with the stable sublevel the banner tells: the release itself
    /// (`5.10.223`), else the upstream version distributions print after it (`... Debian
    /// 5.10.223-1 (2024-08-10)`, `(Ubuntu 5.15.0-91.101-generic 5.15.131)`): the last
    /// `major.minor.N` after the release.
    pub fn with_banner(mut self, banner: &str) -> KernelRules {
        let (ma, mi) = self.version;
        let prefix = format!("{ma}.{mi}.");
        let after_release = banner
            .strip_prefix("Linux version ")
            .and_then(|b| b.split_once(' '));
        let parse = |s: &str| -> Option<u32> {
            let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse().ok()
        };
        let mut found = None;
        if let Some((rel, rest)) = after_release {
            if let Some(n) = rel.strip_prefix(&prefix).and_then(parse) {
                found = Some(n).filter(|&n| n > 0);
            }
            for (i, _) in rest.match_indices(&prefix) {
                let preceded_ok = rest[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_ascii_digit() && c != '.');
                if preceded_ok {
                    if let Some(n) = parse(&rest[i + prefix.len()..]) {
                        found = Some(n);
                    }
                }
            }
        }
        self.sublevel = found.or(self.sublevel);
        self
    }

    /// Whether `ftrace_location()` finds a function's `__fentry__` call from the symbol's
    /// start (kernel/trace/ftrace.c: aebfd12521d9 "x86/ibt,ftrace: Search for __fentry__
    /// location", 5.18), else takes only an address inside a recorded call. Stable trees took
    /// it with e60b613df8b6 ("ftrace: Fix possible use-after-free issue in
    /// ftrace_location()"): 5.15.162 and 5.10.227 (5.15.121 and 5.10.188 still match exactly).
    pub fn ftrace_location_searches(&self) -> bool {
        let sub = self.sublevel.unwrap_or(0);
        self.version >= (5, 18)
            || (self.version == (5, 15) && sub >= 162)
            || (self.version == (5, 10) && sub >= 227)
    }

    /// The line `module_sig_check()` prints (pr_notice) when module `name` is unsigned and
    /// signatures are enforced. 5.10.0 and older: `%s: %s is rejected` with `Loading of
    /// unsigned module`; 5.11 (705e9195187d): `%s: loading of %s is rejected` with `unsigned
    /// module`; 5.12 on (ec2a29593c83 moved the check before the module's name is known):
    /// `Loading of %s is rejected`, no name, through kernel/module/signing.c (5.19+). Stable
    /// trees took all three commits at 5.10.26 and 5.4.110; whether 5.11.y did is not known
    /// here (5.11's own text is printed for every 5.11).
    pub fn unsigned_module_line(&self, name: &str) -> String {
        let sub = self.sublevel.unwrap_or(0);
        let backported =
            (self.version == (5, 10) && sub >= 26) || (self.version == (5, 4) && sub >= 110);
        if self.version >= (5, 12) || backported {
            "Loading of unsigned module is rejected".to_string()
        } else if self.version == (5, 11) {
            format!("{name}: loading of unsigned module is rejected")
        } else {
            format!("{name}: Loading of unsigned module is rejected")
        }
    }

    /// Parses the start of a kernel release string (`6.1.0-57-amd64`, `5.15.0`).
    pub fn from_release(release: &str) -> Option<KernelRules> {
        let mut it = release.split(|c: char| !c.is_ascii_digit());
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        Some(Self::for_version(major, minor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_follow_the_history() {
        assert_eq!(KernelRules::for_version(6, 1).ksym_name_len, 512);
        assert_eq!(KernelRules::for_version(6, 0).ksym_name_len, 128);
        assert!(!KernelRules::for_version(5, 7).vmlinux_relocs_at_load);
        assert!(KernelRules::for_version(5, 8).rejects_vmlinux_in_module_section);
        assert_eq!(
            KernelRules::from_release("6.1.0-57-amd64").unwrap().version,
            (6, 1)
        );
        assert_eq!(
            KernelRules::from_release("5.15.0").unwrap().version,
            (5, 15)
        );
        assert!(KernelRules::from_release("x").is_none());
    }

    #[test]
    fn signature_lines_and_fentry_search_follow_the_stable_trees() {
        let at = |ma, mi, sub: Option<u32>| KernelRules {
            sublevel: sub,
            ..KernelRules::for_version(ma, mi)
        };
        let no_name = "Loading of unsigned module is rejected";
        assert_eq!(
            at(5, 10, Some(0)).unsigned_module_line("foo"),
            "foo: Loading of unsigned module is rejected"
        );
        assert_eq!(
            at(5, 10, Some(25)).unsigned_module_line("foo"),
            "foo: Loading of unsigned module is rejected"
        );
        assert_eq!(at(5, 10, Some(26)).unsigned_module_line("foo"), no_name);
        assert_eq!(at(5, 10, Some(237)).unsigned_module_line("foo"), no_name);
        assert_eq!(at(5, 4, Some(110)).unsigned_module_line("foo"), no_name);
        assert_eq!(
            at(5, 4, Some(109)).unsigned_module_line("foo"),
            "foo: Loading of unsigned module is rejected"
        );
        assert_eq!(
            at(5, 11, None).unsigned_module_line("foo"),
            "foo: loading of unsigned module is rejected"
        );
        assert_eq!(at(5, 12, None).unsigned_module_line("foo"), no_name);
        assert_eq!(at(6, 1, None).unsigned_module_line("foo"), no_name);
        assert!(!at(5, 10, Some(226)).ftrace_location_searches());
        assert!(at(5, 10, Some(227)).ftrace_location_searches());
        assert!(!at(5, 15, Some(161)).ftrace_location_searches());
        assert!(at(5, 15, Some(162)).ftrace_location_searches());
        assert!(!at(5, 17, Some(15)).ftrace_location_searches());
        assert!(at(5, 18, None).ftrace_location_searches());
        assert!(!at(5, 10, None).ftrace_location_searches());
    }

    #[test]
    fn the_banner_tells_the_stable_sublevel() {
        let r = KernelRules::for_version(5, 10);
        let debian = "Linux version 5.10.0-32-amd64 (debian-kernel@lists.debian.org) (gcc-10 (Debian 10.2.1-6) 10.2.1 20210110, GNU ld (GNU Binutils for Debian) 2.35.2) #1 SMP Debian 5.10.223-1 (2024-08-10)";
        assert_eq!(r.with_banner(debian).sublevel, Some(223));
        let upstream = "Linux version 5.10.219 (user@host) (gcc 12.2.0) #1 SMP";
        assert_eq!(r.with_banner(upstream).sublevel, Some(219));
        let ubuntu = "Linux version 5.15.0-91-generic (buildd@lcy02) (gcc 11.4.0) #101-Ubuntu SMP (Ubuntu 5.15.0-91.101-generic 5.15.131)";
        assert_eq!(
            KernelRules::for_version(5, 15).with_banner(ubuntu).sublevel,
            Some(131)
        );
        assert_eq!(r.with_banner("garbage").sublevel, None);
    }

    #[test]
    fn fallback_layouts_are_consistent() {
        for (ma, mi) in [(5, 0), (5, 4), (6, 1), (6, 18)] {
            assert!(StructLayouts::fallback(ma, mi).is_consistent());
        }
        assert_eq!(StructLayouts::fallback(6, 1).func_size, 152);
        assert_eq!(StructLayouts::fallback(5, 0).func_size, 136);
        let mut bad = StructLayouts::fallback(6, 1);
        bad.func_size = 16;
        assert!(!bad.is_consistent());
    }
}
