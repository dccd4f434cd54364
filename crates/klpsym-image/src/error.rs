//! The one error type of this crate: every variant says what was expected and what was found,
//! with the byte offset in the (decompressed) image where that makes sense.

use klpsym_resched::resched::Cancelled;

use crate::compression::Compression;

/// Why a kernel image could not be turned into its kallsyms list.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The input is too short to be what its header claims.
    #[error(
        "truncated {what}: expected at least {expected} bytes at offset {offset:#x}, found {found}"
    )]
    Truncated {
        what: &'static str,
        offset: usize,
        expected: usize,
        found: usize,
    },
    /// A header field that the boot protocol fixes has another value.
    #[error("malformed {what} at offset {offset:#x}: expected {expected}, found {found}")]
    Malformed {
        what: &'static str,
        offset: usize,
        expected: String,
        found: String,
    },
    /// The compressed payload could not be decoded.
    #[error("{compression} payload at offset {offset:#x} failed to decompress: {message}")]
    Decompress {
        compression: Compression,
        offset: usize,
        message: String,
    },
    /// The decompressed output grew past the caller's limit (a decompression bomb, or a limit too
    /// small for this kernel).
    #[error("{compression} payload at offset {offset:#x} decompresses to more than the limit of {limit} bytes")]
    TooLarge {
        compression: Compression,
        offset: usize,
        limit: usize,
    },
    /// A compressed kernel image whose compression this crate does not decode.
    #[error("unsupported compression {found} in {container} payload at offset {offset:#x}")]
    UnsupportedCompression {
        container: &'static str,
        offset: usize,
        found: String,
    },
    /// Nothing in the input looks like the kernel's kallsyms token table.
    #[error("no kallsyms tables found: expected a token table (256 NUL-terminated strings) followed by a token index (256 x u16 offsets of those strings); {detail}")]
    NoKallsyms { detail: String },
    /// A table was found but does not agree with the others.
    #[error(
        "inconsistent kallsyms {table} at offset {offset:#x}: expected {expected}, found {found}"
    )]
    Inconsistent {
        table: &'static str,
        offset: usize,
        expected: String,
        found: String,
    },
    /// Several different sets of tables pass every check; picking one would be a guess.
    #[error("ambiguous kallsyms tables: {count} candidate layouts pass every check ({detail})")]
    Ambiguous { count: usize, detail: String },
    /// A reschedule point reported that the caller cancelled the operation.
    #[error("kernel image decoding cancelled")]
    Cancelled,
}

impl From<Cancelled> for ImageError {
    fn from(_: Cancelled) -> Self {
        ImageError::Cancelled
    }
}
