//! The entry type shared by the vmlinux and module paths.

/// One line the kernel's /proc/kallsyms would show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfKallsym {
    /// Symbol name as the kernel prints it.
    pub name: String,
    /// Type letter as /proc/kallsyms prints it (for modules: already upper-cased
    /// when exported, lower-cased otherwise, as `s_show()` does).
    pub kind: u8,
    /// vmlinux: the absolute link-time address (percpu symbols under
    /// ABSOLUTE_PERCPU: their small offset). Module: the offset inside `section`.
    pub addr: u64,
    /// `st_size` from the ELF symbol table.
    pub size: Option<u64>,
    /// Name of the section the symbol is defined in (`None` for absolute and
    /// undefined symbols).
    pub section: Option<String>,
    /// Index of that section in the object's section header table; section names
    /// are not unique in every object, indices are.
    pub section_index: Option<u32>,
    /// The symbol is exported (EXPORT_SYMBOL*) with this very address.
    pub exported: bool,
}
