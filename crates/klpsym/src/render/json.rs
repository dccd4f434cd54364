//! JSON, written with reschedule points: serializing a big report is work in proportion to
//! its output, so a point is reachable after every 4 KiB written.

use std::io::Write;

use klpsym_core::Resched;

use super::Result;

/// The version of the JSON documents' shape (docs/json.md), the first field of every
/// document: 2 since fields got one name per concept (`unplaced`, where `relative` and
/// `offline` stay one more version, deprecated). A reader that knows version N reads every
/// later one: fields are only added, and renamed ones keep their old name for a version.
pub const JSON_SCHEMA: u32 = 2;

/// A document with the schema version first: `{"schema": 2, ...v's fields}`. `v` must be an
/// object (a struct or map), never a list.
#[derive(Debug, serde::Serialize)]
pub struct Versioned<'a, T: serde::Serialize> {
    schema: u32,
    #[serde(flatten)]
    doc: &'a T,
}

impl<'a, T: serde::Serialize> Versioned<'a, T> {
    /// `doc`, versioned.
    pub fn new(doc: &'a T) -> Versioned<'a, T> {
        Versioned {
            schema: JSON_SCHEMA,
            doc,
        }
    }
}

/// [`json`] of an object document, with the schema version first ([`Versioned`]).
pub fn json_document<T: serde::Serialize>(out: &mut dyn Write, v: &T, rs: &mut Resched) -> Result {
    json(out, &Versioned::new(v), rs)
}

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
