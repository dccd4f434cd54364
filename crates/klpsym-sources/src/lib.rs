//! Parsers that turn the bytes of kernel symbol sources into [`klpsym_core::SymbolTable`]s.
//!
//! No parser here opens a file: each takes bytes (or an owned buffer) and reports errors with
//! the position inside them; the loader layer (`klpsym-io`) adds the file name.

mod text;

pub use text::{detect, parse_text, ParsedText, TextError, TextKind, TextStream, MAX_NAME_LEN};
