//! Shared output helpers: exit outcomes, errors, hex formatting, JSON printing.

use std::io::Write;

/// How a verb ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Ok,
    /// Exit 1: the kernel would say no.
    KernelSaysNo,
}

impl Outcome {
    /// `Ok` when every item was fine.
    pub fn all_ok(ok: bool) -> Outcome {
        if ok {
            Outcome::Ok
        } else {
            Outcome::KernelSaysNo
        }
    }
}

/// A user-facing error (exit 2).
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Prints an error and its causes to stderr.
pub fn print_error(e: &CliError) {
    let mut msg = format!("klpsym: error: {e}");
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(&format!(": {text}"));
        }
        src = s.source();
    }
    eprintln!("{msg}");
}

/// `0x`-prefixed, zero-padded hex as JSON carries addresses (u64 does not fit a JSON number).
pub fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// Prints a JSON value followed by a newline.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    serde_json::to_writer_pretty(&mut lock, v)?;
    writeln!(lock)?;
    Ok(())
}
