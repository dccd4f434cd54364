//! JSON, written with reschedule points: serializing a big report is work in proportion to
//! its output, so a point is reachable after every 4 KiB written.

use std::io::Write;

use klpsym_core::Resched;

use super::Result;

/// Writes `v` as pretty JSON and a newline to `out`, ticking `rs` every 4 KiB.
pub fn json<T: serde::Serialize>(out: &mut dyn Write, v: &T, rs: &mut Resched) -> Result {
    let mut w = TickingWriter {
        inner: out,
        resched: rs,
        since: 0,
    };
    serde_json::to_writer_pretty(&mut w, v).map_err(std::io::Error::from)?;
    writeln!(w)?;
    w.flush()?;
    Ok(())
}

/// A writer that ticks its driver once per 4 KiB passed through.
struct TickingWriter<'a, 'r> {
    inner: &'a mut dyn Write,
    resched: &'r mut Resched,
    since: usize,
}

impl Write for TickingWriter<'_, '_> {
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
