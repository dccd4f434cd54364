//! Loader errors: every one names the file it is about.

use std::path::{Path, PathBuf};

/// Why a source could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A text source is malformed.
    #[error("{path}: {source}")]
    Text {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line number.
        source: klpsym_sources::TextError,
    },
    /// A kernel image could not be decoded.
    #[error("{path}: {source}{}", limit_hint(source))]
    Image {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: klpsym_image::ImageError,
    },
    /// A distribution package could not be read.
    #[error("{path}: {source}")]
    Package {
        /// The package file.
        path: PathBuf,
        /// What is wrong, with the archive member.
        source: klpsym_package::PackageError,
    },
    /// An ELF object (vmlinux or module) could not be read.
    #[error("{path}: {source}")]
    Elf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: klpsym_elf::ElfError,
    },
    /// The content is of no kind klpsym reads, or not what the option asked for.
    #[error("{path}: {what}")]
    Unrecognized {
        /// The file.
        path: PathBuf,
        /// What was found, and what klpsym expected.
        what: String,
    },
    /// The file is larger than the configured limit.
    #[error(
        "{path}: {size} bytes is more than the input limit of {limit} bytes (the input size limit)"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Something about the set of sources (modules, placement) does not fit together.
    #[error("{0}")]
    Setup(String),
    /// A symbol table could not be built from what was read (too many symbols, a name too
    /// long for the table's encoding).
    #[error("{0}")]
    Table(String),
    /// A reschedule point said stop: nothing is wrong with the input.
    #[error("cancelled")]
    Cancelled,
}

impl From<klpsym_core::BuildError> for LoadError {
    fn from(e: klpsym_core::BuildError) -> Self {
        match e {
            klpsym_core::BuildError::Cancelled(_) => LoadError::Cancelled,
            e => LoadError::Table(e.to_string()),
        }
    }
}

impl From<klpsym_core::resched::Cancelled> for LoadError {
    fn from(_: klpsym_core::resched::Cancelled) -> Self {
        LoadError::Cancelled
    }
}

/// Says which limit was hit when it was the decompression limit.
fn limit_hint(e: &klpsym_image::ImageError) -> &'static str {
    match e {
        klpsym_image::ImageError::TooLarge { .. } => " (the decompressed size limit)",
        _ => "",
    }
}

/// An image decoding error as the loader reports it: a cancellation is reported like every
/// other cancelled reschedule point, not as a malformed image.
pub(crate) fn image_error(path: &Path, source: klpsym_image::ImageError) -> LoadError {
    match source {
        klpsym_image::ImageError::Cancelled => LoadError::Cancelled,
        source => LoadError::Image {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// [`image_error`] for ELF processing errors.
pub(crate) fn elf_error(path: &Path, source: klpsym_elf::ElfError) -> LoadError {
    match source {
        klpsym_elf::ElfError::Cancelled => LoadError::Cancelled,
        source => LoadError::Elf {
            path: path.to_path_buf(),
            source,
        },
    }
}
