//! The loader layer: the only place that opens files, reads /proc, walks module trees, and
//! tells a source's kind from its content. Parsers below it take bytes; the CLI above it takes
//! loaded kernels.

mod detect;
mod error;
mod kernel;
mod modules;
mod output;

pub use detect::{detect, Detected};
pub use error::LoadError;
pub use kernel::{
    load, module_symbols_table, read_bounded, LoadOptions, LoadedKernel, SourceFacts, SourceKind,
    DEFAULT_SOURCE,
};
pub use modules::{compose, LoadedSpec, ModuleTree, Placement};
pub use output::write_atomically;
