//! The loader layer: the only place that opens files, reads /proc, and tells a source's kind
//! from its content. Parsers below it take bytes; the CLI above it takes loaded kernels.

mod error;
mod kernel;
mod output;

pub use error::LoadError;
pub use output::write_atomically;
pub use kernel::{load, LoadOptions, LoadedKernel, SourceKind, DEFAULT_SOURCE};
