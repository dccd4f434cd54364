//! Livepatch modules, checked the way the kernel would check them — without loading them.
//!
//! Bytes in, reports (or bytes) out; this crate never opens a file.
//!
//! - [`LivepatchModule::parse`]: klp relocation sections, klp symbols, modinfo and the
//!   `klp_patch` → `klp_object[]` → `klp_func[]` tables followed through the module's own
//!   relocations ([`patch`], layouts in [`StructLayouts`] or from the target's [`btf`]).
//! - [`check`]: validation in the kernel's order with the kernel's messages, resolution with
//!   `klp_find_object_symbol()` semantics (klpsym-core), relocation values ([`reloc`]) and a
//!   serializable [`CheckReport`].
//! - [`convert`]: ordinary undefined-symbol relocations → klp relocations, written by an
//!   append-only ELF rewriter that keeps every section and symbol index.
//!
//! Every operation whose work grows with its input has a form taking a
//! `klpsym_core::resched::Resched` ([`check_with`], [`convert_with`],
//! [`LivepatchModule::parse_with`], [`ElfObject::parse_with`]) and reaches a
//! reschedule point at least every interval of work; the plain forms use `Resched::none()`.
//!
//! Driving it from a harness: parse with [`LivepatchModule::parse_with`] (layouts from
//! [`btf::layouts_from_btf`] when the target's BTF is at hand), build a [`Target`] from a
//! `klpsym_core::SymbolTable`, call [`check`], and compare `report.verdict`,
//! `report.problems[i].log` (the exact dmesg lines) and `report.objects[..].funcs[..].address`
//! with what the kernel did.

pub mod btf;
mod check;
pub mod consts;
mod convert;
mod cost;
pub mod edit;
mod elf;
mod error;
mod hints;
mod layouts;
mod module;
mod names;
pub mod patch;
pub mod reloc;
mod report;
mod target;

pub use check::{check, check_with};
pub use convert::{convert, convert_with, Conversion, ConvertReport, Pin};
pub use cost::{
    resolution_cost, resolution_cost_with, CostModel, ObjectCost, Phase, Preemption, ResolutionCost,
};
pub use elf::{Arch, ElfObject, ElfRela, ElfSection, ElfSymbol, SHF_RELA_LIVEPATCH, SHN_LIVEPATCH};
pub use error::{ConvertError, ParseError};
pub use layouts::{KernelRules, StructLayouts};
pub use module::{KlpRelaSection, LivepatchModule, SymbolVersion, MODULE_SIG_STRING};
pub use names::{
    format_klp_section, format_klp_symbol, parse_klp_section, parse_klp_symbol, KlpSectionName,
    KlpSymbolName,
};
pub use report::{
    errno_name, CheckReport, CheckStatus, FuncReport, LoaderCheck, LoaderCheckKind, LogLine,
    ObjectReport, ObjectState, PatchVerdict, PatchVerdictKind, Problem, ProblemKind,
    RelocationReport, RelocationStatus, Stage, PLACEMENT_HINT,
};
pub use target::{ExportInfo, ExportLookup, Fact, LoaderFacts, ModuleFtrace, Target};
