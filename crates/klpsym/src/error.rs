//! The one error type of the library: what went wrong, told apart by [`ErrorKind`].

use std::fmt;

/// What kind of failure an [`Error`] is, so a caller can act on it without reading the
/// message: retry after a cancellation, ask the user for another file, report a bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A reschedule point said stop (the caller's cancel flag, or a callback): nothing is
    /// wrong with the input.
    Cancelled,
    /// A file, folder or named thing does not exist (a missing `--kernel` file, a module
    /// named in a query that no table holds).
    NotFound,
    /// The input exists but is not what was expected, or is malformed: the message names the
    /// file and, where it can, the line, section or symbol index.
    BadInput,
    /// An input is larger than a limit of [`crate::Options`] (input size, decompressed size).
    TooLarge,
    /// Reading or writing failed for another reason (permissions, a full disk).
    Io,
    /// The options do not fit together (a module list without a module tree, several kernels
    /// where one is needed).
    Usage,
}

/// Which of a caller's inputs an [`Error`] is about, when it is about one of them: a command
/// names the argument it came from (`--modules`), a program the field it set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Input {
    /// The module tree ([`crate::Options::modules`]).
    ModuleTree,
    /// The modules named loaded ([`crate::Options::loaded`]).
    LoadedModules,
    /// The kallsyms that places loaded modules ([`crate::Options::place_from`]).
    Placement,
    /// The debug vmlinux ([`crate::Options::debug_vmlinux`]).
    DebugVmlinux,
    /// The kernel a patch was built for ([`crate::CheckOptions::built_for`]).
    BuiltFor,
    /// The BTF for struct layouts ([`crate::TargetOptions::btf`]).
    Btf,
    /// The kernel version whose rules apply ([`crate::Options::kernel_version`]).
    KernelVersion,
    /// The kernel's build configuration ([`crate::TargetOptions::kernel_config`]).
    KernelConfig,
    /// The target's Module.symvers ([`crate::TargetOptions::symvers`]).
    Symvers,
    /// A section placement ([`crate::CheckOptions::section_bases`]).
    SectionBase,
    /// The folder placing a module's sections ([`crate::CheckOptions::sections_from`]).
    SectionsFolder,
    /// The livepatch module ([`crate::Patch`]).
    Patch,
    /// The input size limit ([`crate::Options::max_input_size`]).
    InputLimit,
    /// The decompressed size limit ([`crate::Options::max_decompressed_size`]).
    DecompressedLimit,
}

/// A failure, with a message that names what it is about (file, line, section, symbol).
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    input: Option<Input>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            input: None,
            source: None,
        }
    }

    /// The caller's input this error is about, when it is about one.
    pub fn input(&self) -> Option<Input> {
        self.input
    }

    /// The same error, about `input` (kept when it was already about an input).
    pub(crate) fn about(mut self, input: Input) -> Error {
        self.input.get_or_insert(input);
        self
    }

    /// A usage error: options that do not fit together.
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message)
    }

    /// Malformed or unexpected input.
    pub fn bad_input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::BadInput, message)
    }

    /// The cancellation error.
    pub fn cancelled() -> Error {
        Error::new(ErrorKind::Cancelled, "cancelled")
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True when a reschedule point said stop.
    pub fn is_cancelled(&self) -> bool {
        self.kind == ErrorKind::Cancelled
    }

    /// The same error with `context` in front of its message (`--btf: ...`).
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        if self.kind != ErrorKind::Cancelled {
            self.message = format!("{context}: {}", self.message);
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<klpsym_core::Cancelled> for Error {
    fn from(_: klpsym_core::Cancelled) -> Error {
        Error::cancelled()
    }
}

impl From<klpsym_core::BuildError> for Error {
    fn from(e: klpsym_core::BuildError) -> Error {
        match e {
            klpsym_core::BuildError::Cancelled(_) => Error::cancelled(),
            e => Error::new(ErrorKind::BadInput, e.to_string()),
        }
    }
}

impl From<klpsym_io::LoadError> for Error {
    fn from(e: klpsym_io::LoadError) -> Error {
        use klpsym_io::LoadError as L;
        let kind = match &e {
            L::Cancelled => ErrorKind::Cancelled,
            L::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            L::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted => {
                // A reschedule point between reads said stop.
                ErrorKind::Cancelled
            }
            L::Io { .. } => ErrorKind::Io,
            L::TooLarge { .. } => ErrorKind::TooLarge,
            L::Image {
                source: klpsym_image::ImageError::TooLarge { .. },
                ..
            } => ErrorKind::TooLarge,
            L::Package {
                source: klpsym_package::PackageError::Cancelled(_),
                ..
            } => ErrorKind::Cancelled,
            L::Setup(_) => ErrorKind::Usage,
            _ => ErrorKind::BadInput,
        };
        if kind == ErrorKind::Cancelled {
            return Error::cancelled();
        }
        let input = match &e {
            L::TooLarge { .. } => Some(Input::InputLimit),
            L::Image {
                source: klpsym_image::ImageError::TooLarge { .. },
                ..
            } => Some(Input::DecompressedLimit),
            _ => None,
        };
        Error {
            kind,
            message: e.to_string(),
            input,
            source: Some(Box::new(e)),
        }
    }
}

impl From<klpsym_livepatch::ParseError> for Error {
    fn from(e: klpsym_livepatch::ParseError) -> Error {
        match e {
            klpsym_livepatch::ParseError::Cancelled => Error::cancelled(),
            e => Error::new(ErrorKind::BadInput, e.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::Interrupted => ErrorKind::Cancelled,
            _ => ErrorKind::Io,
        };
        Error {
            kind,
            message: e.to_string(),
            input: None,
            source: Some(Box::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_stays_a_cancellation_through_every_layer() {
        let from_build: Error = klpsym_core::BuildError::from(klpsym_core::Cancelled).into();
        assert!(from_build.is_cancelled());
        let from_load: Error = klpsym_io::LoadError::from(klpsym_core::Cancelled).into();
        assert!(from_load.is_cancelled(), "{from_load}");
        let from_parse: Error = klpsym_livepatch::ParseError::Cancelled.into();
        assert!(from_parse.is_cancelled());
        // Context is never added to a cancellation: it is not about any file.
        assert_eq!(from_load.context("--btf").to_string(), "cancelled");
    }

    #[test]
    fn a_missing_file_is_not_found_and_named() {
        let e: Error = klpsym_io::read_bounded(
            std::path::Path::new("/nonexistent/klpsym-test"),
            1 << 20,
            &mut klpsym_core::Resched::none(),
        )
        .unwrap_err()
        .into();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(e.to_string().contains("/nonexistent/klpsym-test"), "{e}");
    }
}
