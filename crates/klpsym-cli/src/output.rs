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

/// Prints a JSON value followed by a newline.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    print_json_with(v, &mut klpsym::Resched::none())
}

/// [`print_json`] with reschedule points: serializing a big report is work in proportion to
/// its output, so a point is reachable after every 4 KiB written.
pub fn print_json_with<T: serde::Serialize>(
    v: &T,
    resched: &mut klpsym::Resched,
) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = TickingWriter {
        inner: std::io::BufWriter::with_capacity(16 << 10, stdout.lock()),
        resched,
        since: 0,
    };
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    out.inner.flush()?;
    Ok(())
}

/// A writer that ticks its driver once per 4 KiB passed through.
struct TickingWriter<'r, W> {
    inner: W,
    resched: &'r mut klpsym::Resched,
    since: usize,
}

impl<W: Write> Write for TickingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.since += n;
        if self.since >= 4 << 10 {
            self.since = 0;
            self.resched
                .tick_step()
                .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
