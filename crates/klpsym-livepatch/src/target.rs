//! The kernel a module is checked against: its symbols, rules, and what is known offline.

use std::collections::BTreeMap;
use std::fmt;

use klpsym_core::{
    find_object_symbol, normalize_module_name, LookupOutcome, LookupRequest, SymbolTable, Verdict,
};

use crate::elf::Arch;
use crate::layouts::{KernelRules, StructLayouts};

/// Which table answered a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSource {
    /// The running (or image-derived) kernel: vmlinux and loaded modules.
    Kernel,
    /// A module's own `.ko`, for an object that is not loaded (addresses are the offline
    /// layout's, not real ones).
    Offline,
}

/// The target kernel.
///
/// Built with [`Target::new`] and the `with_*` methods:
/// ```
/// use klpsym_core::{ObjectId, ObjectKind, SymbolTableBuilder};
/// use klpsym_livepatch::{Arch, KernelRules, Target};
///
/// let mut b = SymbolTableBuilder::new();
/// b.push(ObjectId::VMLINUX, 0xffffffff81000000, b't', "static_helper").unwrap();
/// let table = b.build();
/// let mut e = SymbolTableBuilder::new();
/// let ext4 = e.object("ext4", ObjectKind::Module);
/// e.push(ext4, 0x1000, b't', "ext4_fill_super").unwrap();
/// let ext4_table = e.build();
/// let exported = |n: &str| n == "printk";
/// let t = Target::new(&table, KernelRules::for_version(6, 1), Arch::X86_64)
///     .with_offline_module("ext4", &ext4_table)
///     .with_exports(&exported);
/// assert!(!t.is_loaded("ext4"));
/// let (found, _, _) = t.lookup("ext4", "ext4_fill_super", 0, Some("ext4"));
/// assert_eq!(found.address, Some(0x1000));
/// ```
pub struct Target<'a> {
    /// vmlinux and the modules loaded on the target.
    pub kernel: &'a SymbolTable,
    /// Version-dependent rules (KSYM_NAME_LEN, when vmlinux relocations are applied...).
    pub rules: KernelRules,
    /// The target architecture.
    pub arch: Arch,
    /// Symbol tables of modules that are not loaded, from their `.ko` (offline layout, non-zero
    /// section bases), keyed by normalized module name; each table must hold an object of that
    /// name (as klpsym-elf's module tables do).
    pub offline_modules: BTreeMap<String, &'a SymbolTable>,
    /// Which undefined symbols the target exports (`__ksymtab_*`, Module.symvers). `None`:
    /// unknown, so only `.klp.sym.*` undefined symbols are reported as unresolvable.
    pub exported: Option<&'a dyn Fn(&str) -> bool>,
    /// Addresses of the patch module's sections (by section index), when a placement is
    /// modelled; PC-relative values need them.
    pub section_bases: BTreeMap<u32, u64>,
    /// Struct layouts from the target's BTF; the documented fallback otherwise.
    pub layouts: Option<StructLayouts>,
}

impl fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("symbols", &self.kernel.len())
            .field("rules", &self.rules)
            .field("arch", &self.arch)
            .field(
                "offline_modules",
                &self.offline_modules.keys().collect::<Vec<_>>(),
            )
            .field("exported", &self.exported.is_some())
            .field("section_bases", &self.section_bases)
            .field("layouts", &self.layouts)
            .finish()
    }
}

impl<'a> Target<'a> {
    /// A target with no offline modules, no export list and no placement.
    pub fn new(kernel: &'a SymbolTable, rules: KernelRules, arch: Arch) -> Self {
        Target {
            kernel,
            rules,
            arch,
            offline_modules: BTreeMap::new(),
            exported: None,
            section_bases: BTreeMap::new(),
            layouts: None,
        }
    }

    /// Adds the table of a module that is not loaded.
    pub fn with_offline_module(mut self, name: &str, table: &'a SymbolTable) -> Self {
        self.offline_modules
            .insert(normalize_module_name(name), table);
        self
    }

    /// Sets the export predicate.
    pub fn with_exports(mut self, exported: &'a dyn Fn(&str) -> bool) -> Self {
        self.exported = Some(exported);
        self
    }

    /// Places section `index` of the patch module at `address`.
    pub fn with_section_base(mut self, index: u32, address: u64) -> Self {
        self.section_bases.insert(index, address);
        self
    }

    /// Uses `layouts` (from BTF) for the patch tables.
    pub fn with_layouts(mut self, layouts: StructLayouts) -> Self {
        self.layouts = Some(layouts);
        self
    }

    /// True when `module` is loaded on the target.
    pub fn is_loaded(&self, module: &str) -> bool {
        module == "vmlinux"
            || self
                .kernel
                .object_by_name(&normalize_module_name(module))
                .is_some()
    }

    /// `klp_find_object_symbol(object, name, sympos)` as the kernel would run it while
    /// `coming` (a module being loaded, or `None`) is the only module added to the target.
    pub fn lookup(
        &self,
        object: &str,
        name: &str,
        sympos: u64,
        coming: Option<&str>,
    ) -> (LookupOutcome, TableSource, &'a SymbolTable) {
        let obj = normalize_module_name(object);
        let (table, src) = match (coming, self.offline_modules.get(&obj)) {
            (Some(c), Some(t)) if c == obj && !self.is_loaded(&obj) => (*t, TableSource::Offline),
            _ => (self.kernel, TableSource::Kernel),
        };
        let req = LookupRequest {
            name,
            object: (obj != "vmlinux").then_some(obj.as_str()),
            sympos,
        };
        let mut out = find_object_symbol(table, &req);
        if src == TableSource::Offline {
            relative_fixup(&mut out, table, name, sympos);
        }
        (out, src, table)
    }
}

/// An offline module's addresses are section-relative: its first function sits at 0, which
/// the kernel's "address 0 = not found" rule would wrongly reject. Once loaded, that symbol has
/// a real, non-zero address, so the verdict is redone from the candidates.
fn relative_fixup(out: &mut LookupOutcome, table: &SymbolTable, name: &str, sympos: u64) {
    let relative = out.object_id.is_some_and(|o| table.object_info(o).relative);
    if !relative || out.verdict != Verdict::NotFound || out.candidates.is_empty() {
        return;
    }
    let n = out.candidates.len() as u64;
    let (verdict, pick) = if sympos == 0 && n > 1 {
        (Verdict::Ambiguous, None)
    } else if sympos == 0 {
        (Verdict::Found, Some(0))
    } else if sympos <= n {
        (Verdict::Found, Some(sympos as usize - 1))
    } else {
        (Verdict::PositionNotFound, None)
    };
    out.count = if sympos == 0 { n.min(2) } else { n.min(sympos) };
    out.verdict = verdict;
    out.symbol = pick.map(|i| out.candidates[i]);
    out.address = pick.map(|i| table.symbol(out.candidates[i]).addr);
    out.message = match verdict {
        Verdict::Ambiguous => Some(format!(
            "unresolvable ambiguity for symbol '{name}' in object '{}'",
            out.object
        )),
        Verdict::PositionNotFound => Some(format!(
            "symbol position {sympos} for symbol '{name}' in object '{}' not found",
            out.object
        )),
        _ => None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_core::{ObjectKind, SymbolTableBuilder};

    #[test]
    fn offline_symbol_at_offset_zero_is_found() {
        let mut b = SymbolTableBuilder::new();
        let m = b.object("ext4", ObjectKind::Module);
        b.set_relative(m, true);
        b.push(m, 0, b't', "first").unwrap();
        b.push(m, 0x10, b't', "dup").unwrap();
        b.push(m, 0x20, b't', "dup").unwrap();
        let off = b.build();
        let k = SymbolTableBuilder::new().build();
        let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64)
            .with_offline_module("ext4", &off);
        let (o, src, _) = t.lookup("ext4", "first", 0, Some("ext4"));
        assert_eq!(
            (o.verdict, o.address, src),
            (Verdict::Found, Some(0), TableSource::Offline)
        );
        assert_eq!(
            t.lookup("ext4", "dup", 0, Some("ext4")).0.verdict,
            Verdict::Ambiguous
        );
        assert_eq!(
            t.lookup("ext4", "dup", 2, Some("ext4")).0.address,
            Some(0x20)
        );
        assert_eq!(
            t.lookup("ext4", "dup", 3, Some("ext4")).0.verdict,
            Verdict::PositionNotFound
        );
        // not coming: the kernel does not see it
        assert_eq!(
            t.lookup("ext4", "first", 0, None).0.verdict,
            Verdict::NotFound
        );
    }
}
