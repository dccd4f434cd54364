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
