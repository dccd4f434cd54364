//! Errors of this crate: every malformed-input case names where it was found.

/// Why an ELF object could not be turned into kallsyms entries.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The bytes are not an ELF object `object` can parse.
    #[error("not a parsable ELF object: {0}")]
    Parse(String),
    /// A structure inside the ELF object is malformed.
    #[error("malformed ELF: {what} (at {context})")]
    Malformed {
        /// What was wrong: what was expected and what was found.
        what: String,
        /// Where: section name/index, symbol index, offset.
        context: String,
    },
    /// The object has no `.symtab` (stripped), so there is nothing to list.
    #[error("no .symtab section: the object is stripped (a vmlinux needs its debug package or build tree)")]
    NoSymtab,
    /// The object is of the wrong ELF type for the requested operation.
    #[error("ELF type {found} is not what {operation} needs ({expected})")]
    WrongType {
        /// The e_type found.
        found: u16,
        /// What the operation needed.
        expected: &'static str,
        /// The operation.
        operation: &'static str,
    },
    /// The module is for another machine than the caller asked for.
    #[error("module is for ELF machine {found} ({found_name}), expected machine {expected} ({expected_name})")]
    WrongMachine {
        /// e_machine of the object.
        found: u16,
        /// Human name of `found`.
        found_name: &'static str,
        /// e_machine the caller asked for.
        expected: u16,
        /// Human name of `expected`.
        expected_name: &'static str,
    },
    /// Module placement against a kernel's /proc/kallsyms lines failed.
    #[error("placement failed: {0}")]
    Placement(String),
    /// A reschedule point reported that the caller cancelled the operation.
    #[error("ELF symbol processing cancelled")]
    Cancelled,
}

impl From<klpsym_resched::resched::Cancelled> for ElfError {
    fn from(_: klpsym_resched::resched::Cancelled) -> Self {
        ElfError::Cancelled
    }
}

impl ElfError {
    pub(crate) fn malformed(what: impl Into<String>, context: impl Into<String>) -> Self {
        ElfError::Malformed {
            what: what.into(),
            context: context.into(),
        }
    }
}

impl From<object::read::Error> for ElfError {
    fn from(e: object::read::Error) -> Self {
        ElfError::Parse(e.to_string())
    }
}

/// Human name of common `e_machine` values, for error messages.
pub fn machine_name(machine: u16) -> &'static str {
    match machine {
        3 => "i386",
        8 => "mips",
        20 => "ppc",
        21 => "ppc64",
        22 => "s390",
        40 => "arm",
        42 => "superh",
        43 => "sparcv9",
        50 => "ia64",
        62 => "x86_64",
        183 => "aarch64",
        243 => "riscv",
        258 => "loongarch",
        _ => "unknown",
    }
}
