//! /proc/kallsyms read and parsed at once. The kernel formats the file inside `read(2)` (tens
//! of milliseconds for 5 MB), so a helper thread reads while this one parses the lines each
//! batch completes: loading then costs the read plus the last batch's parse, not the read plus
//! the whole parse.
//!
//! How much one `read(2)` formats: `/proc/kallsyms` is a seq_file (`kallsyms_open()`,
//! kernel/kallsyms.c), and `seq_read_iter()` (fs/seq_file.c; `seq_read()` before 5.10, with
//! the same rule) first hands out what its buffer still holds, then formats records
//! (`s_show()`, one symbol line each) only until it holds as many bytes as the read asked for
//! or its buffer (one page, doubled only for a record bigger than it) is full. So a read's
//! kernel work is bounded by the smaller of the request and a page: ~100 lines for 4 KiB.
//! Measured on this project's VM (6.18, 122,000 lines, 5.4 MB; reads timed one by one): a
//! 4 KiB request costs 18 µs (median; 1,324 reads), 2 KiB 9 µs, 1 KiB 5 µs, and a 1 MiB
//! request still returns one page. The reader asks for a page while a page costs at most half
//! the reschedule interval, and halves its request (down to 512 bytes) on a kernel where
//! formatting is slower, so the kernel's own stretch per read stays inside the bound.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use klpsym_core::resched::Resched;
use klpsym_sources::TextStream;

use crate::detect::{detect, Detected};
use crate::error::LoadError;
use crate::loaded::LoadedKernel;
use crate::options::LoadOptions;

/// Bytes a batch gathers before the parser gets it: a few pages, small enough for the heap to
/// reuse one batch's memory for the next (bigger blocks are mapped fresh each time).
const BATCH: usize = 24 << 10;

/// Batches in flight between the reader and the parser.
const IN_FLIGHT: usize = 256;

/// The largest read request: a page, the most one `read(2)` of a seq_file formats (see the
/// module's documentation).
const READ_MAX: usize = 4 << 10;

/// The smallest read request (~12 lines of /proc/kallsyms).
const READ_MIN: usize = 512;

/// True for the files this reads: /proc files, which report no size and are formatted as
/// they are read.
pub(crate) fn applies_to(path: &Path, meta: Option<&std::fs::Metadata>) -> bool {
    path.starts_with("/proc") && meta.is_some_and(|m| m.is_file() && m.len() == 0)
}

/// Reads `path` on a helper thread, parsing text batches as they come; a file that turns out
/// not to be text is gathered whole and decoded as any other input.
pub(crate) fn load(
    path: &Path,
    opts: &LoadOptions,
    rs: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let interrupted = |c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c));
    let t0 = Instant::now();
    let file = File::open(path).map_err(io_err)?;
    let limit = opts.max_input_size;
    let (tx, rx) = mpsc::sync_channel::<std::io::Result<Vec<u8>>>(IN_FLIGHT);
    let mut reader_rs = rs.sibling();
    reader_rs.set_phase("read /proc (the kernel formats the lines)");
    let phase = rs.set_phase("parse text");
    // What came before (opening the file) is not the spawn's: the spawn is a stretch of its
    // own.
    rs.tick_step()?;
    let loaded = std::thread::scope(|s| {
        let reader = std::thread::Builder::new()
            .spawn_scoped(s, move || read_batches(file, &tx, &mut reader_rs));
        if reader.is_err() {
            // The system refused a thread: read first, then parse.
            let bytes = crate::read::read_bounded(path, limit, rs)?;
            return crate::decode::from_bytes(path, bytes, t0.elapsed(), opts, rs);
        }
        // Starting a thread is tens of microseconds of this thread's time (its stack is
        // mapped): a point of its own.
        rs.tick_step()?;
        // Owned here: returning early drops it, which ends a reader waiting to send.
        let rx = rx;
        let mut total = 0u64;
        let mut next = || -> Result<Option<Vec<u8>>, LoadError> {
            match rx.recv() {
                Err(_) => Ok(None),
                Ok(Err(e)) => Err(io_err(e)),
                Ok(Ok(batch)) => {
                    total += batch.len() as u64;
                    if total > limit {
                        return Err(LoadError::TooLarge {
                            path: path.to_path_buf(),
                            size: total,
                            limit,
                        });
                    }
                    Ok(Some(batch))
                }
            }
        };
        let first = next()?.unwrap_or_default();
        if detect(&first) != Detected::Text || first.is_empty() {
            // Not text (or empty): gathered whole, decoded (and reported) as usual.
            let mut bytes = first;
            while let Some(b) = next()? {
                klpsym_core::bulk::extend_from_slice(&mut bytes, &b, rs).map_err(interrupted)?;
            }
            return crate::decode::from_bytes(path, bytes, t0.elapsed(), opts, rs);
        }
        let text_err = |source| LoadError::Text {
            path: path.to_path_buf(),
            source,
        };
        let mut stream = TextStream::new();
        stream.feed(&first, rs).map_err(text_err)?;
        let mut n = first.len() as u64;
        while let Some(b) = next()? {
            n += b.len() as u64;
            stream.feed(&b, rs).map_err(text_err)?;
        }
        let read_time = t0.elapsed();
        let t1 = Instant::now();
        let parsed = stream.finish(rs).map_err(text_err)?;
        let decoded = crate::decode::with_live_version(path, crate::decode::text_decoded(parsed));
        Ok(LoadedKernel::decoded(
            path,
            decoded,
            read_time,
            t1.elapsed(),
            n,
        ))
    });
    rs.set_phase(phase);
    loaded
}

/// The reader: `read(2)` calls (a page at most each, less on a kernel that formats a page
/// slowly: [`next_request`]) gathered into batches, a reschedule point after each call. Stops
/// at the end, at an error, or when the parser has gone (its receiver dropped).
fn read_batches(mut file: File, tx: &mpsc::SyncSender<std::io::Result<Vec<u8>>>, rs: &mut Resched) {
    let mut page = [0u8; READ_MAX];
    // Room for one more page than a batch needs: a batch never grows.
    let mut batch = Vec::with_capacity(BATCH + page.len());
    let budget = rs.interval() / 2;
    let mut want = READ_MAX;
    let mut ns_per_byte = 0.0f64;
    let stop = |tx: &mpsc::SyncSender<std::io::Result<Vec<u8>>>| {
        let _ = tx.send(Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "operation cancelled",
        )));
    };
    // The thread's start (its runtime's setup) is a stretch of its own.
    if rs.tick_step().is_err() {
        return stop(tx);
    }
    loop {
        let t = Instant::now();
        let got = match file.read(&mut page[..want]) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        (want, ns_per_byte) = next_request(t.elapsed(), got, ns_per_byte, budget);
        batch.extend_from_slice(&page[..got]);
        if (got == 0 || batch.len() >= BATCH) && !batch.is_empty() {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH + page.len()));
            if tx.send(Ok(full)).is_err() {
                return;
            }
        }
        if got == 0 {
            return;
        }
        if rs.tick_step().is_err() {
            return stop(tx);
        }
    }
}

/// The next read's request: the largest power of two from [`READ_MIN`] to [`READ_MAX`] that
/// the kernel formats within `budget` at the rate reads have shown (a running average of the
/// time per byte, a quarter weight on the read just made, which took `took` for `got`
/// bytes); and that average.
fn next_request(took: Duration, got: usize, average: f64, budget: Duration) -> (usize, f64) {
    if got == 0 {
        return (READ_MAX, average);
    }
    let sample = took.as_nanos() as f64 / got as f64;
    let average = if average == 0.0 {
        sample
    } else {
        0.75 * average + 0.25 * sample
    };
    let mut want = READ_MAX;
    while want > READ_MIN && average * want as f64 > budget.as_nanos() as f64 {
        want /= 2;
    }
    (want, average)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_file(p: &str) -> Option<&Path> {
        let p = Path::new(p);
        applies_to(p, std::fs::metadata(p).ok().as_ref()).then_some(p)
    }

    #[test]
    fn reads_shrink_where_the_kernel_formats_slowly_and_grow_back() {
        let budget = Duration::from_micros(25);
        // 18 µs a page (this project's VM): a page at a time.
        let (w, avg) = next_request(Duration::from_micros(18), 4096, 0.0, budget);
        assert_eq!(w, READ_MAX);
        // 60 µs a page (a kernel three times slower): 1 KiB requests, 15 µs each.
        let (w, mut avg2) = next_request(Duration::from_micros(60), 4096, 0.0, budget);
        assert_eq!(w, 1024);
        // One slow read among fast ones moves the average a quarter of the way.
        let (w, _) = next_request(Duration::from_micros(200), 4096, avg, budget);
        assert!((READ_MIN..READ_MAX).contains(&w), "{w}");
        // Fast again: back to a page within a few reads.
        let mut w = 0;
        for _ in 0..8 {
            (w, avg2) = next_request(Duration::from_micros(4), 1024, avg2, budget);
        }
        assert_eq!(w, READ_MAX);
        // Never below the minimum, however slow; the end of the file asks a page again.
        assert_eq!(
            next_request(Duration::from_millis(5), 512, 0.0, budget).0,
            READ_MIN
        );
        assert_eq!(next_request(Duration::ZERO, 0, avg2, budget).0, READ_MAX);
    }

    #[test]
    fn a_proc_file_that_is_not_kallsyms_is_an_error_naming_it() {
        // Text, but not symbol lines: the parser's error, with the file and the line.
        if let Some(p) = proc_file("/proc/self/status") {
            let e = load(p, &LoadOptions::default(), &mut Resched::none())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("/proc/self/status") && e.contains("line 1"),
                "{e}"
            );
        }
        // Binary: gathered whole and refused as any other input would be.
        if let Some(p) = proc_file("/proc/self/auxv") {
            let streamed = load(p, &LoadOptions::default(), &mut Resched::none()).map(|_| ());
            assert!(streamed.is_err());
        }
    }

    #[test]
    fn the_input_limit_holds_while_streaming() {
        let Some(p) = proc_file("/proc/kallsyms") else {
            return;
        };
        let opts = LoadOptions {
            max_input_size: 10_000,
            ..LoadOptions::default()
        };
        match load(p, &opts, &mut Resched::none()) {
            Err(LoadError::TooLarge { limit, .. }) => assert_eq!(limit, 10_000),
            other => panic!("expected TooLarge, got {:?}", other.map(|k| k.table.len())),
        }
    }

    #[test]
    fn streaming_reads_what_a_whole_read_reads() {
        let Some(p) = proc_file("/proc/kallsyms") else {
            return;
        };
        let whole = crate::read::read_bounded(p, 1 << 30, &mut Resched::none()).unwrap();
        let streamed = load(p, &LoadOptions::default(), &mut Resched::none()).unwrap();
        let again = crate::read::read_bounded(p, 1 << 30, &mut Resched::none()).unwrap();
        if whole != again {
            return; // a module came or went between the reads
        }
        let mut out = Vec::new();
        klpsym_core::write_kallsyms(&streamed.table, &mut out, &mut Resched::none()).unwrap();
        assert!(out == whole, "the streamed table dumps otherwise");
    }
}
