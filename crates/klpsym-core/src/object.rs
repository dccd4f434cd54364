//! Objects: vmlinux, loadable modules, and the kernel's pseudo-objects.

use serde::Serialize;

/// Index of an object in its [`SymbolTable`](crate::SymbolTable); vmlinux is always 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectId(pub u32);

impl ObjectId {
    /// The kernel image itself.
    pub const VMLINUX: ObjectId = ObjectId(0);
}

/// What kind of object holds a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ObjectKind {
    /// The kernel image: `objname == NULL` for livepatch.
    Vmlinux,
    /// A loadable module, named as the kernel spells it.
    Module,
    /// An entry the kernel lists after the modules that is not a module:
    /// `[__builtin__ftrace]`, `[__builtin__kprobes]`, `[bpf]`.
    Pseudo,
}

/// An object and where its symbols sit in the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectInfo {
    /// `vmlinux`, a module name (`ext4`, `nf_tables`) or a pseudo-object name without brackets.
    pub name: String,
    /// Which kind of object this is.
    pub kind: ObjectKind,
    /// Number of symbols the object holds.
    pub symbol_count: u32,
    /// True when the object is unplaced: a module read from its `.ko` with no load address,
    /// whose addresses are offsets in their sections. They are kept for display but never
    /// answer address queries.
    pub unplaced: bool,
}

impl ObjectKind {
    /// Classifies the name found between the brackets of a /proc/kallsyms line.
    ///
    /// The kernel prints real modules by `mod->name`, ftrace and kprobe trampolines as
    /// `__builtin__ftrace` / `__builtin__kprobes`, and BPF programs as `bpf`
    /// (kernel/kallsyms.c, kernel/bpf/core.c).
    pub fn of_bracket_name(name: &str) -> ObjectKind {
        if name.starts_with("__builtin__") || name == "bpf" {
            ObjectKind::Pseudo
        } else {
            ObjectKind::Module
        }
    }
}

/// Spells a module name the way the kernel does: no directory, no `.ko` (or `.ko.xz`, ...)
/// suffix, dashes turned into underscores. `vmlinux` (and an empty name) stays `vmlinux`.
///
/// ```
/// use klpsym_core::normalize_module_name;
/// assert_eq!(normalize_module_name("/lib/modules/6.1/kernel/fs/nls/nls-utf8.ko.xz"), "nls_utf8");
/// assert_eq!(normalize_module_name("[nf_tables]"), "nf_tables");
/// ```
pub fn normalize_module_name(raw: &str) -> String {
    let trimmed = raw.trim();
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let base = base.strip_prefix('[').unwrap_or(base);
    let base = base.strip_suffix(']').unwrap_or(base);
    let base = match base.find(".ko") {
        Some(i)
            if matches!(
                &base[i + 3..],
                "" | ".xz" | ".gz" | ".zst" | ".bz2" | ".lz4"
            ) =>
        {
            &base[..i]
        }
        _ => base,
    };
    if base.is_empty() {
        return "vmlinux".to_string();
    }
    base.replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_the_kernel() {
        assert_eq!(normalize_module_name("snd-hda-intel"), "snd_hda_intel");
        assert_eq!(
            normalize_module_name("./drivers/x/snd-hda-intel.ko"),
            "snd_hda_intel"
        );
        assert_eq!(normalize_module_name("ext4.ko.zst"), "ext4");
        assert_eq!(normalize_module_name("vmlinux"), "vmlinux");
        assert_eq!(normalize_module_name(""), "vmlinux");
        // a name that merely contains ".ko" in the middle is left alone
        assert_eq!(normalize_module_name("a.kob"), "a.kob");
    }

    #[test]
    fn classifies_pseudo_objects() {
        assert_eq!(
            ObjectKind::of_bracket_name("__builtin__ftrace"),
            ObjectKind::Pseudo
        );
        assert_eq!(ObjectKind::of_bracket_name("bpf"), ObjectKind::Pseudo);
        assert_eq!(ObjectKind::of_bracket_name("ext4"), ObjectKind::Module);
    }
}
