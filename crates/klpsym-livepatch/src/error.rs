//! Errors: input that cannot be read at all. What the kernel would refuse is not an error
//! here but a finding in a report.

use klpsym_core::resched::Cancelled;

/// A module that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not an ELF file.
    #[error("not an ELF file (no \\x7fELF magic)")]
    NotElf,
    /// An ELF this crate does not model.
    #[error("unsupported ELF: {0}")]
    Unsupported(String),
    /// Structurally broken ELF (offsets out of bounds, bad indices...).
    #[error("malformed ELF: {0}")]
    Malformed(String),
    /// A reschedule point said stop (the `Resched` was cancelled).
    #[error("operation cancelled")]
    Cancelled,
}

impl From<Cancelled> for ParseError {
    fn from(_: Cancelled) -> Self {
        ParseError::Cancelled
    }
}

/// Why `convert` refused to write anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The input could not be parsed.
    #[error(transparent)]
    Parse(ParseError),
    /// A reschedule point said stop (the `Resched` was cancelled).
    #[error("operation cancelled")]
    Cancelled,
    /// Something about the module or its symbols prevents a correct conversion; every
    /// problem found is listed (not just the first).
    #[error("{}", .0.join("\n"))]
    Refused(Vec<String>),
}

impl From<ParseError> for ConvertError {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Cancelled => ConvertError::Cancelled,
            e => ConvertError::Parse(e),
        }
    }
}

impl From<Cancelled> for ConvertError {
    fn from(_: Cancelled) -> Self {
        ConvertError::Cancelled
    }
}
