//! Text as the `klpsym` command prints it: every answer of the library rendered for a
//! terminal, so that a program (the command, a tool of its own) shows what the command shows.
//! Each renderer writes the answer's text to `out`; what a user should be warned about is not
//! written here but returned by the answer itself (notes, [`crate::KernelCheck::warnings`]),
//! for the caller to show where it shows diagnostics.
//!
//! JSON needs no renderer: every answer is `serde::Serialize` in the shape docs/json.md gives.

mod addr;
mod check;
mod copies;
mod facts;
mod json;
mod names;

pub use addr::{addr_line, resolved_lines, trace};
pub use check::{check_report, matrix, verdict_line};
pub use copies::copies;
pub use facts::{cache_listing, convert_report, info, status};
pub use json::{json, json_document, Versioned, JSON_SCHEMA};
pub use names::{candidates, drift, lookup, search, sympos, variants, UNPLACED_NOTE};

/// What every renderer returns: an I/O error, or a cancellation at a reschedule point (a
/// big report is rendered with one per line).
pub type Result<T = ()> = crate::Result<T>;
