//! klpsym-elf: the symbols the kernel's kallsyms shows, computed from ELF bytes.
//!
//! - [`vmlinux_kallsyms`]: a vmlinux with `.symtab` -> the /proc/kallsyms set and
//!   order, reproducing `nm -n` + scripts/mksysmap + scripts/kallsyms per era.
//! - [`module_kallsyms`]: a `.ko` -> the lines the module contributes to
//!   /proc/kallsyms once loaded, with section-relative addresses;
//!   [`place_module`] matches them against a running kernel's lines and yields
//!   absolute addresses.
//!
//! This crate never opens files and never decompresses: it takes `&[u8]`.

pub mod btf;
mod copies;
mod dwarf;
mod error;
mod filter;
mod ftrace;
mod identity;
mod layout;
mod module;
mod module_files;
mod module_layout;
mod names;
mod nm;
mod place;
mod raw;
mod source_lines;
mod symbol;
mod vmlinux;

pub use copies::{CallerCode, CodeCopy, CopiesIndex, CopyPlace, FunctionCopies};
pub use dwarf::{cu_paths, decl_lines, CuPaths, DeclLine, DEBUG_SECTIONS};
pub use error::{machine_name, ElfError};
pub use filter::KernelVersion;
pub use ftrace::{mcount_sites, SiteFacts};
pub use identity::{build_id_from_notes, vmlinux_crcs};
pub use layout::layout_core_sections;
pub use module::{
    module_kallsyms, module_kallsyms_for_machine, module_kallsyms_with, ModuleOptions,
    ModuleSection, ModuleSymbols,
};
pub use module_files::{module_files, ModuleDefinition, ModuleFiles};
pub use module_layout::{is_mapping_symbol, module_layout, ModuleLayout};
pub use place::{place_at_bases, place_module, section_bases};
pub use raw::{NameBudget, NamesTooLarge};
pub use source_lines::{debug_sections, DebugLines, Shared, SourceFrame};
pub use symbol::{ElfKallsym, Iter as KallsymIter, KallsymTable};
pub use vmlinux::{
    loaded_spans, prefetch_symbol_sections, vmlinux_kallsyms, vmlinux_kallsyms_with,
    VmlinuxOptions, VmlinuxSymbols,
};
