//! # klpsym: the kernel's livepatch symbol answers, outside the kernel
//!
//! When the kernel applies a live patch it looks up, by name, every function the patch
//! replaces and every symbol its code refers to (`klp_find_object_symbol()`), counting
//! duplicate static names by position (`old_sympos`). This crate gives the kernel's exact
//! answers — the same positions, verdicts and `livepatch:` messages — for the running kernel
//! or for a kernel that exists only as a file or a package, before a patch is ever loaded.
//!
//! One kernel from any source is opened in one call with one [`Options`]; queries on it give
//! the kernel's answers; a livepatch module is checked or converted against it with the same
//! target facts the kernel's module loader uses.
//!
//! ```no_run
//! use klpsym::{CheckOptions, LookupQuery, LookupVerdict, Options, Patch};
//!
//! let opts = Options::new();
//! // A Debian kernel package, read in place: its image's kallsyms, config, Module.symvers.
//! let kernel = klpsym::open("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb", &opts)?;
//!
//! // What klp_find_object_symbol("init_once", 3) answers on it.
//! let answer = kernel.lookup(&LookupQuery::new("init_once").sympos(3))?;
//! assert_eq!(answer.verdict, LookupVerdict::Found);
//!
//! // %pS of an address, and every definition with its position.
//! if let Some(addr) = answer.address {
//!     println!("{}", kernel.describe_address("", addr + 4).text.unwrap_or_default());
//! }
//! for c in kernel.sympos("init_once", None, None)?.candidates {
//!     println!("{} {} {}", c.position, c.address_text(), c.object);
//! }
//!
//! // What the kernel will do with a livepatch module (a kernel that could not be checked
//! // is in `run.failed`, with why).
//! let patch = Patch::read("livepatch-fix.ko", &opts)?;
//! let run = klpsym::check(&patch, &[&kernel], &CheckOptions::default())?;
//! for r in &run.results {
//!     println!("{:?}", r.verdict());
//! }
//! # Ok::<(), klpsym::Error>(())
//! ```
//!
//! ## Entry points
//! - Opening: [`open`], [`open_running`], [`open_all`] and [`KernelSet`] (files, folders,
//!   packages; one bad input never sinks the others), configured by [`Options`]; a
//!   [`Fleet`] checks a patch on many kernels one at a time.
//! - Names: [`Kernel::lookup`] (`klp_find_object_symbol()`), [`Kernel::sympos`] (every
//!   definition with its position and source file), [`Kernel::search`].
//! - Addresses: [`Kernel::symbolize`] and [`Kernel::describe_address`] (`%pS`),
//!   [`Kernel::resolve_symbol`] (`name+0xoff` to an address), [`parse_query`] for what
//!   people paste.
//! - Livepatch modules: [`check`] (the module loader's checks and livepatch's, in the
//!   kernel's order, with its lines), [`convert`] (klp relocations with the target's
//!   positions), [`status`] (what the running kernel has loaded).
//! - Facts: [`Kernel::info`], [`Kernel::write_kallsyms`], [`cache_listing`].
//! - Text: [`render`] prints every answer as the `klpsym` command does.
//!
//! ## Never hogging a CPU
//! Every operation whose work grows with its input reaches reschedule points (see
//! [`Options::policy`] and [`Options::interval`]): a program that opens a kernel package on a
//! busy host delays nothing else on its CPU by more than a fraction of a millisecond, and can
//! cancel (see [`Options::cancel`]); a cancelled operation fails with
//! [`ErrorKind::Cancelled`]. Big tables are freed in steps too; for that the library fixes
//! glibc's mmap and trim thresholds once, when it first runs (`mallopt`: big blocks mapped on
//! their own, heap trims small), so that no `free` returns tens of megabytes at once.
//!
//! ## Errors
//! One [`Error`] type; [`Error::kind`] tells a cancellation from a missing file, bad input, a
//! limit or a usage mistake. "Not found" answers of the kernel (a name that does not resolve)
//! are results ([`LookupVerdict`]), never errors.

#![deny(missing_docs)]

mod binding;
mod cache;
mod check;
mod convert;
mod copies;
mod drift;
mod error;
mod fleet;
mod info;
mod kernel;
mod line_tables;
mod lines;
mod module_files;
mod module_size;
mod open;
mod options;
mod query;
pub mod render;
mod run;
mod sources;
mod stack_entry;
mod status;
mod symbolize;
mod target;
mod trace;
mod version;

pub use binding::{
    AsBuilt, Binding, BindingSource, Identity, ModuleAsBuilt, ModuleComparison, ModuleId,
};
pub use cache::{cache_listing, cache_listing_with, input_present, CacheListing, CachePrune};
pub use check::{
    check, check_kernels, CheckOptions, CheckRun, CopyAsBuilt, CopyStatus, CoveredCopy,
    FunctionCoverage, KernelCheck, OpenRow, Patch, Unchecked,
};
pub use convert::{
    convert, convert_patch, default_output, read_pins_file, ConvertOptions, ConvertRun, Converted,
};
pub use copies::{Copies, Copy, CopyKind, Definition};
pub use drift::{drift, drift_all, Drift, DriftRow, DriftStatus};
pub use error::{Error, ErrorKind, Input, Result};
pub use fleet::{kernel_units, Fleet, FleetChecks, FleetItem, KernelUnit, Shard};
pub use info::{KernelInfo, ObjectSummary};
pub use kernel::{Kernel, Level, Note};
pub use lines::SourceFrame;
pub use open::{open, open_all, open_running, KernelSet, Opened, RUNNING_KERNEL};
pub use options::{
    defaults, CacheDir, Loaded, Options, PointPolicy, Progress, ProgressFn, Queries,
};
pub use query::{
    candidates, file_line_text, hex, Candidate, Definitions, LookupAnswer, LookupQuery, NameMatch,
    SearchAnswer, SearchQuery,
};
pub use run::{Answer, KernelFailure, Kernels, Outcome, Run};
pub use stack_entry::{parse_addr, parse_query, Query};
pub use status::{loaded_livepatches, status, FuncStatus, ObjectStatus, PatchStatus, Status};
pub use symbolize::{AddrAnswer, Ended, NoSymbol, Resolved};
pub use target::{exported_by, knows_exports, Layouts, TargetFacts, TargetOptions, UnplacedModule};
pub use trace::{symbolize_trace, Trace, TraceAnswers, TraceLine};
pub use version::{KernelVersion, VersionSource};

/// Reschedule points, for callers that drive the lower layers themselves.
pub use klpsym_core::{Cancelled, Recorder, Resched, ReschedPolicy};
/// The kernel's lookup verdicts, symbolization outcomes, symbol tables and patterns.
pub use klpsym_core::{
    FileMatch, LookupVerdict, NamePattern, ObjectId, ObjectInfo, ObjectKind, Symbol, SymbolId,
    SymbolTable, SymbolizeOutcome, Symbolized, SIZE_UNKNOWN,
};
/// What a source told about itself, the cache's entries, source kinds.
pub use klpsym_io::{EntryInfo, SourceFacts, SourceKind, SysfsPatch};
/// What a livepatch check reports.
pub use klpsym_livepatch::{
    errno_name, Arch, CheckReport, CheckStatus, ConvertReport, FuncReport, LoaderCheck,
    LoaderCheckKind, LogLine, ObjectReport, ObjectState, PatchVerdict, PatchVerdictKind, Pin,
    Problem, ProblemKind, RelocationReport, RelocationStatus, ResolutionCost, Stage,
};

/// Restores the default action of SIGPIPE, so that a command writing to a closed pipe
/// (`klpsym dump | head`) ends quietly, as nm or grep do (exit status 141). Call it first
/// thing in a command-line program.
pub fn default_sigpipe() {
    klpsym_io::default_sigpipe();
}

/// Writes a file through a temporary file in the same folder, renamed into place: a reader
/// never sees half a file, and the old file stays whole when writing fails.
pub use klpsym_io::{write_atomically, write_atomically_with};

/// The lower layers, for what the facade does not cover: the symbol model and its indexes,
/// source parsers, image decoding, ELF, livepatch modules, I/O.
pub mod layers {
    pub use klpsym_core as core;
    pub use klpsym_elf as elf;
    pub use klpsym_image as image;
    pub use klpsym_io as io;
    pub use klpsym_livepatch as livepatch;
    pub use klpsym_package as package;
    pub use klpsym_resched as resched;
    pub use klpsym_sources as sources;
}

/// The README's Rust example compiles against this crate (its `no_run` block; CI runs the same
/// program as `examples/quickstart.rs` against the lab's package).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExamples;
