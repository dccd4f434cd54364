//! The kernel a module is checked against: its symbols, rules, and what is known offline.

use std::collections::BTreeMap;
use std::fmt;

use klpsym_core::{
    find_object_symbol, normalize_module_name, LookupOutcome, LookupRequest, SymbolTable,
};

use crate::elf::Arch;
use crate::layouts::{KernelRules, StructLayouts};

/// Which table answered a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSource {
    /// The running (or image-derived) kernel: vmlinux and loaded modules.
    Kernel,
    /// A module's own `.ko`, for an object that is not loaded: unplaced (its addresses are
    /// offsets in its sections, not real ones).
    Unplaced,
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
///     .with_unplaced_module("ext4", &ext4_table)
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
    pub unplaced_modules: BTreeMap<String, &'a SymbolTable>,
    /// For an offline module: the symbol table entries a lookup walks while it is loading
    /// (its whole `.symtab` but the undefined entries), keyed like `unplaced_modules`.
    pub loading_symbols: BTreeMap<String, u32>,
    /// For an offline module: for each symbol of its table (by id), its place in that walk,
    /// so a lookup that stops at a match visits `place + 1` entries; keyed like
    /// `unplaced_modules`. Without it a lookup while the module loads counts the whole walk.
    pub loading_order: BTreeMap<String, &'a [u32]>,
    /// Which undefined symbols the target exports (`__ksymtab_*`, Module.symvers). `None`:
    /// unknown, so only `.klp.sym.*` undefined symbols are reported as unresolvable.
    pub exported: Option<&'a dyn Fn(&str) -> bool>,
    /// Addresses of the patch module's sections (by section index), when a placement is
    /// modelled; PC-relative values need them.
    pub section_bases: BTreeMap<u32, u64>,
    /// Struct layouts from the target's BTF; the documented fallback otherwise.
    pub layouts: Option<StructLayouts>,
    /// What the target's module loader checks a module against, as far as it is known.
    pub loader: LoaderFacts<'a>,
    /// vmlinux's ftrace call sites (its `__mcount_loc` table, sorted: klpsym-elf's
    /// `mcount_sites`), where `klp_patch_func()` attaches; `None`: unknown, so functions are
    /// not checked for one.
    pub ftrace: Option<Fact<&'a [u64]>>,
    /// Modules' functions and whether each has an ftrace call site (its own `__mcount_loc`,
    /// read from its `.ko`): the module's kallsyms names in order, each with its facts; keyed
    /// like `unplaced_modules`. A module not here is not checked for call sites.
    pub module_ftrace: BTreeMap<String, ModuleFtrace<'a>>,
}

/// A module's functions in its kallsyms order, each with whether it has an ftrace call site.
#[derive(Debug, Clone, Copy)]
pub struct ModuleFtrace<'a> {
    /// The names, in the module's kallsyms order.
    pub names: &'a [String],
    /// Their call-site facts, one per name.
    pub sites: &'a [klpsym_elf::SiteFacts],
    /// The `.ko` they were read from, for the report.
    pub source: &'a str,
}

/// A fact about the target and where it was learned (`config-6.1.0-57-amd64`, `vmlinuz
/// banner`, `Module.symvers`): the report names the source of every check it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact<T> {
    /// The value.
    pub value: T,
    /// Where it came from, for the report.
    pub source: String,
}

impl<T> Fact<T> {
    /// `value`, learned from `source`.
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Fact {
            value,
            source: source.into(),
        }
    }
}

/// What the target knows of one exported symbol.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportInfo {
    /// Its CRC (CONFIG_MODVERSIONS), when known.
    pub crc: Option<u32>,
    /// Its symbol namespace (`EXPORT_SYMBOL_NS`), when it has one.
    pub namespace: Option<String>,
}

/// The target's exported symbols with their CRCs and namespaces, by name (`None`: not listed).
pub type ExportLookup<'a> = &'a (dyn Fn(&str) -> Option<ExportInfo> + Sync);

/// The target's side of the module loader's checks. Every field is optional: an unknown fact
/// makes its check "not checked" in the report, never "passed".
#[derive(Clone, Default)]
pub struct LoaderFacts<'a> {
    /// CONFIG_MODULES: without it there is no module loader (`finit_module` is -ENOSYS).
    pub modules: Option<Fact<bool>>,
    /// The kernel's `VERMAGIC_STRING` (`6.1.0-57-amd64 SMP preempt mod_unload modversions `).
    pub vermagic: Option<Fact<String>>,
    /// CONFIG_LIVEPATCH (vmlinux defines `klp_enable_patch` exactly when it is set).
    pub livepatch: Option<Fact<bool>>,
    /// CONFIG_MODVERSIONS (the vermagic's `modversions` token, or the config).
    pub modversions: Option<Fact<bool>>,
    /// The exported symbols' CRCs and namespaces (Module.symvers, a vmlinux's `__crc_*`, an
    /// image's `__kcrctab`).
    pub exports: Option<Fact<ExportLookup<'a>>>,
    /// CONFIG_MODULE_FORCE_LOAD (a module without vermagic or symbol versions then loads,
    /// tainting the kernel).
    pub force_load: Option<Fact<bool>>,
    /// CONFIG_MODULE_SIG_FORCE (unsigned or wrongly signed modules are rejected).
    pub sig_force: Option<Fact<bool>>,
    /// The target's ELF machine (`EM_X86_64` 62, `EM_AARCH64` 183): `elf_check_arch()`
    /// refuses a module of another.
    pub machine: Option<Fact<u16>>,
    /// `sizeof(struct module)` (the kernel's BTF, or the `.gnu.linkonce.this_module` of a
    /// module it ships): since 6.4 a module whose section has another size is refused.
    pub struct_module_size: Option<Fact<u64>>,
}

impl fmt::Debug for LoaderFacts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoaderFacts")
            .field("modules", &self.modules)
            .field("vermagic", &self.vermagic)
            .field("livepatch", &self.livepatch)
            .field("modversions", &self.modversions)
            .field("exports", &self.exports.as_ref().map(|c| &c.source))
            .field("force_load", &self.force_load)
            .field("sig_force", &self.sig_force)
            .field("machine", &self.machine)
            .field("struct_module_size", &self.struct_module_size)
            .finish()
    }
}

impl fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("symbols", &self.kernel.len())
            .field("rules", &self.rules)
            .field("arch", &self.arch)
            .field(
                "unplaced_modules",
                &self.unplaced_modules.keys().collect::<Vec<_>>(),
            )
            .field("exported", &self.exported.is_some())
            .field("section_bases", &self.section_bases)
            .field("layouts", &self.layouts)
            .field("loader", &self.loader)
            .field(
                "ftrace",
                &self.ftrace.as_ref().map(|f| (f.value.len(), &f.source)),
            )
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
            unplaced_modules: BTreeMap::new(),
            loading_symbols: BTreeMap::new(),
            loading_order: BTreeMap::new(),
            exported: None,
            section_bases: BTreeMap::new(),
            layouts: None,
            loader: LoaderFacts::default(),
            ftrace: None,
            module_ftrace: BTreeMap::new(),
        }
    }

    /// Sets module `name`'s functions' ftrace call sites (see [`Target::module_ftrace`]).
    pub fn with_module_ftrace(mut self, name: &str, facts: ModuleFtrace<'a>) -> Self {
        self.module_ftrace
            .insert(normalize_module_name(name), facts);
        self
    }

    /// Sets vmlinux's ftrace call sites (sorted), learned from `source`.
    pub fn with_ftrace_sites(mut self, sites: &'a [u64], source: impl Into<String>) -> Self {
        self.ftrace = Some(Fact::new(sites, source));
        self
    }

    /// Sets what the target's module loader checks against.
    pub fn with_loader(mut self, loader: LoaderFacts<'a>) -> Self {
        self.loader = loader;
        self
    }

    /// Adds the table of a module that is not loaded.
    pub fn with_unplaced_module(mut self, name: &str, table: &'a SymbolTable) -> Self {
        self.unplaced_modules
            .insert(normalize_module_name(name), table);
        self
    }

    /// Records how many symbol table entries offline module `name` has for a walk while it
    /// loads (see [`Target::loading_symbols`]).
    pub fn with_loading_symbols(mut self, name: &str, count: u32) -> Self {
        self.loading_symbols
            .insert(normalize_module_name(name), count);
        self
    }

    /// Records where each symbol of offline module `name` comes in the walk made while it
    /// loads (see [`Target::loading_order`]).
    pub fn with_loading_order(mut self, name: &str, order: &'a [u32]) -> Self {
        self.loading_order
            .insert(normalize_module_name(name), order);
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

    /// Where the module loader may place a module's sections on this target: the part of its
    /// module area below the kernel image and the part above (a module never overlaps the
    /// image), from the table's `_text` and `_end`. arm64 only, where PC-relative fields of
    /// ±1 MiB and less are checked: since 6.5 (3e35d303ab7d, `module_init_limits()`) every
    /// module lies in a 2 GiB window that holds the whole image; before, a 4 GiB one
    /// (CONFIG_RANDOMIZE_MODULE_REGION_FULL). `None` elsewhere or when addresses are hidden.
    pub fn module_window(&self) -> Option<[(u64, u64); 2]> {
        if self.arch != Arch::Aarch64 || self.kernel.addresses_hidden() {
            return None;
        }
        let at = |n: &str| {
            self.kernel
                .by_name(n)
                .find(|s| s.object == klpsym_core::ObjectId::VMLINUX)
                .map(|s| s.addr)
        };
        let (text, end) = (at("_text")?, at("_end")?);
        if text == 0 || end <= text {
            return None;
        }
        let span: u64 = if self.rules.version >= (6, 5) {
            2 << 30
        } else {
            4 << 30
        };
        Some([
            (end.checked_sub(span)?, text),
            (end, text.checked_add(span)?),
        ])
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
        let (table, src) = match (coming, self.unplaced_modules.get(&obj)) {
            (Some(c), Some(t)) if c == obj && !self.is_loaded(&obj) => (*t, TableSource::Unplaced),
            _ => (self.kernel, TableSource::Kernel),
        };
        let req = LookupRequest {
            name,
            object: (obj != "vmlinux").then_some(obj.as_str()),
            sympos,
        };
        // An offline table's module is section-relative: klpsym-core counts its symbols at
        // offset 0 as present (they have real addresses once the module loads).
        (find_object_symbol(table, &req), src, table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use klpsym_core::{LookupVerdict, ObjectKind, SymbolTableBuilder};

    #[test]
    fn offline_symbol_at_offset_zero_is_found() {
        let mut b = SymbolTableBuilder::new();
        let m = b.object("ext4", ObjectKind::Module);
        b.set_unplaced(m, true);
        b.push(m, 0, b't', "first").unwrap();
        b.push(m, 0x10, b't', "dup").unwrap();
        b.push(m, 0x20, b't', "dup").unwrap();
        let off = b.build();
        let k = SymbolTableBuilder::new().build();
        let t = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64)
            .with_unplaced_module("ext4", &off);
        let (o, src, _) = t.lookup("ext4", "first", 0, Some("ext4"));
        assert_eq!(
            (o.verdict, o.address, src),
            (LookupVerdict::Found, Some(0), TableSource::Unplaced)
        );
        assert_eq!(
            t.lookup("ext4", "dup", 0, Some("ext4")).0.verdict,
            LookupVerdict::Ambiguous
        );
        assert_eq!(
            t.lookup("ext4", "dup", 2, Some("ext4")).0.address,
            Some(0x20)
        );
        assert_eq!(
            t.lookup("ext4", "dup", 3, Some("ext4")).0.verdict,
            LookupVerdict::PositionNotFound
        );
        // not coming: the kernel does not see it
        assert_eq!(
            t.lookup("ext4", "first", 0, None).0.verdict,
            LookupVerdict::NotFound
        );
    }
}
