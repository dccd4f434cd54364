//! Parsers of the text formats a kernel's files come in, from bytes: `/proc/kallsyms` and
//! System.map into [`klpsym_core::SymbolTable`]s, Module.symvers into an export map
//! ([`symvers`]), a `.config` into its options ([`kconfig`]).
//!
//! No parser here opens a file or decompresses anything: each takes bytes (or an owned
//! buffer) and reports errors with the position inside them (the line); the I/O layer
//! (`klpsym-io`) reads, decompresses and adds the file name.

pub mod kconfig;
pub mod symvers;
mod text;

pub use kconfig::{ConfigError, KernelConfig};
pub use symvers::{parse_symvers_text, Export, ExportMap, Exports, SymversError};
pub use text::{detect, parse_text, ParsedText, TextError, TextKind, TextStream, MAX_NAME_LEN};
