//! An XZ stream of many blocks decoded on worker threads, read in order.
//!
//! A package compressed by a multithreaded `xz` (dpkg-deb, rpmbuild) is one stream of
//! independent blocks (a kernel `-dbg` package: 229-315 blocks of 24 MiB), each block header
//! giving its compressed and uncompressed sizes (the xz file format 1.0.4, 3.1: the encoder
//! writes both when it buffers the block, as the threaded one does). So the reader can cut the
//! stream into blocks as it reads it, without decoding and without seeking to the index: each
//! block goes to a worker, which decodes it as a stream of its own (the stream header, the
//! block as stored, an index of that one block and a footer: liblzma then checks the block's
//! header, its sizes and its check, CRC64 in practice, as it does in the whole stream), and the
//! reader hands the blocks' bytes out in order. At the stream's end the reader checks the index
//! against the blocks it cut (their count and sizes), the index's CRC32 and the footer, as the
//! serial decoder does.
//!
//! Bounds: at most [`MAX_WORKERS`] workers in the whole process (readers at once share them; a
//! block no worker takes is decoded on the reader's thread as it is read), as many blocks
//! decoding as workers, each block at most [`MAX_BLOCK`] bytes (the buffers are reused from block to block, never freed in one
//! stretch); each worker decodes [`STEP`] bytes per liblzma call with a reschedule point
//! between calls, and stops at its next step once the reader is closed or cancelled.
//!
//! Not every stream can be cut: a single-threaded `xz` writes no sizes in its block header.
//! Such a stream (or one whose first block is too big, or a machine with one CPU) is decoded
//! serially as before; a later block without sizes, in a stream whose first block had them,
//! is an error naming it. The first block is decoded on the reader's thread as it is read, and
//! workers start only [`WARM`] bytes into it: a reader of a package's first paths starts none.

use std::collections::VecDeque;
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use klpsym_resched::bulk::free_with_points;
use klpsym_resched::resched::{Cancelled, Resched};

use crate::codecs::STEP;
use crate::xz::Decoder;
use crate::xz_format::{
    block_header, check_end, check_size, data_error, max_compressed, pad4, read_more, stream_flags,
    BlockHeader, COPY_STEP,
};
use crate::xz_worker::{block_error, restarted, wait, work, Claim, Done, Feed, Job, Pool};

/// The most worker threads (each holds a dictionary and a block's output).
pub(crate) const MAX_WORKERS: usize = 3;

/// The biggest block decoded on a worker: blocks are held whole, as many as workers, and one
/// being read (a threaded `xz -6` makes blocks of 24 MiB).
pub(crate) const MAX_BLOCK: u64 = 64 << 20;

/// The most uncompressed bytes of blocks decoding at once (bounds the blocks in flight when
/// they are big).
const IN_FLIGHT_BYTES: u64 = 96 << 20;

/// How many uncompressed bytes of the first block are read, decoded on the reader's thread,
/// before workers start on the next blocks: a reader that wants only the start of the stream
/// (a package's first paths) starts no thread.
const WARM: u64 = 1 << 20;

/// How many workers this machine gets: none with one CPU.
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_WORKERS)
}

/// What opening a stream found: blocks to decode in parallel, or a stream for the serial
/// decoder (the bytes looked at put back in front).
pub(crate) enum Opened<'a> {
    Blocks(Box<BlockReader<'a>>),
    Serial(Box<dyn BufRead + 'a>),
}

/// Reads the stream header and the first block header of `input`: blocks when the first block
/// gives its sizes and is small enough, and `workers` is two or more.
pub(crate) fn open<'a>(
    mut input: Box<dyn BufRead + 'a>,
    workers: usize,
    resched: &mut Resched,
) -> io::Result<Opened<'a>> {
    if workers < 2 {
        return Ok(Opened::Serial(input));
    }
    let mut seen = Vec::with_capacity(64);
    let serial = |seen: Vec<u8>, input: Box<dyn BufRead + 'a>| -> io::Result<Opened<'a>> {
        Ok(Opened::Serial(Box::new(io::Read::chain(
            io::Cursor::new(seen),
            input,
        ))))
    };
    if !read_more(&mut input, &mut seen, 13, resched)? {
        return serial(seen, input);
    }
    let Ok(flags) = stream_flags(&seen[..12]) else {
        return serial(seen, input);
    };
    if seen[12] == 0 {
        // No block: the index follows.
        return serial(seen, input);
    }
    let size = (usize::from(seen[12]) + 1) * 4;
    if !read_more(&mut input, &mut seen, size as u64 - 1, resched)? {
        return serial(seen, input);
    }
    let first = match block_header(&seen[12..]) {
        Ok(BlockHeader {
            compressed: Some(c),
            uncompressed: Some(u),
            ..
        }) if u <= MAX_BLOCK && c <= max_compressed(u) => (u, seen.split_off(12)),
        _ => return serial(seen, input),
    };
    let in_flight = workers.min((IN_FLIGHT_BYTES / first.0.max(1)).max(1) as usize);
    Ok(Opened::Blocks(Box::new(BlockReader {
        input,
        flags,
        at: 12,
        blocks: 0,
        records: Vec::new(),
        next: Some(first.1),
        input_done: false,
        started: false,
        taken: 0,
        pending: VecDeque::new(),
        current: Current::None,
        free_in: Vec::new(),
        free_out: Vec::new(),
        pool: None,
        inline: None,
        workers,
        in_flight,
        failed: None,
    })))
}

/// A block handed out, in stream order.
enum Waiting {
    /// On a worker: its answer comes here.
    Worker {
        number: u64,
        offset: u64,
        done: mpsc::Receiver<Done>,
    },
    /// To be decoded on the reader's thread as it is read (no worker could be started).
    Inline(Job),
}

/// The block being read.
enum Current {
    None,
    /// Decoded by a worker; read from `pos`.
    Buffered {
        out: Vec<u8>,
        pos: usize,
    },
    /// Decoded here, a step per read.
    Inline {
        job: Job,
        feed: Feed,
    },
}

/// A stream's blocks decoded on workers, read in order (see the module's documentation).
pub(crate) struct BlockReader<'a> {
    input: Box<dyn BufRead + 'a>,
    flags: [u8; 2],
    /// Offset in the stream of the next byte of `input`.
    at: u64,
    /// Blocks read in so far.
    blocks: u64,
    /// Each block's unpadded and uncompressed size, for the index.
    records: Vec<(u64, u64)>,
    /// The first block's header, read when the stream was opened.
    next: Option<Vec<u8>>,
    /// The index and the footer were read and checked.
    input_done: bool,
    /// Blocks go to workers (from [`WARM`] bytes into the first block on).
    started: bool,
    /// Bytes read of the first block.
    taken: u64,
    pending: VecDeque<Waiting>,
    current: Current,
    free_in: Vec<Vec<u8>>,
    free_out: Vec<Vec<u8>>,
    pool: Option<Pool>,
    /// Decodes the first block, and any block when no worker could be started.
    inline: Option<Decoder>,
    workers: usize,
    in_flight: usize,
    /// The first error, given again to every later read.
    failed: Option<(io::ErrorKind, String)>,
}

impl BlockReader<'_> {
    /// Reads decoded bytes into `buf` (a block decoded on a worker up to [`COPY_STEP`] at a
    /// time, one decoded here a step at a time); 0 at the stream's end (its index and footer
    /// checked).
    pub(crate) fn read(&mut self, buf: &mut [u8], resched: &mut Resched) -> io::Result<usize> {
        if let Some((kind, what)) = &self.failed {
            return Err(io::Error::new(*kind, what.clone()));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        match self.read_inner(buf, resched) {
            Err(e) if !cancelled(&e) => {
                self.failed = Some((e.kind(), e.to_string()));
                Err(e)
            }
            r => r,
        }
    }

    fn read_inner(&mut self, buf: &mut [u8], resched: &mut Resched) -> io::Result<usize> {
        loop {
            match &mut self.current {
                Current::Buffered { out, pos } if *pos < out.len() => {
                    let n = buf.len().min(COPY_STEP).min(out.len() - *pos);
                    buf[..n].copy_from_slice(&out[*pos..*pos + n]);
                    *pos += n;
                    return Ok(n);
                }
                Current::Inline { job, feed } => {
                    let n = buf.len().min(STEP);
                    let d = self
                        .inline
                        .as_mut()
                        .ok_or_else(|| io::Error::other("XZ stream: no decoder"))?;
                    let (got, end) = feed
                        .step(job, d, &mut buf[..n], resched)
                        .map_err(|e| e.into_io(job.number, job.offset))?;
                    if job.number == 0 {
                        self.taken += got as u64;
                    }
                    if end {
                        self.recycle();
                    }
                    if !self.started && (self.taken >= WARM || end) {
                        self.started = true;
                        self.fill(resched)?;
                    }
                    if got > 0 {
                        return Ok(got);
                    }
                    resched.tick_step().map_err(io::Error::other)?;
                    continue;
                }
                _ => {}
            }
            self.recycle();
            if self.blocks == 0 {
                // The first block, decoded here as it is read.
                let job = self.read_block(resched)?;
                self.inline_block(job)?;
                continue;
            }
            self.fill(resched)?;
            match self.pending.pop_front() {
                None => return Ok(0),
                Some(Waiting::Inline(job)) => self.inline_block(job)?,
                Some(Waiting::Worker {
                    number,
                    offset,
                    done: rx,
                }) => {
                    let done = wait(&rx, resched).map_err(|e| match e {
                        Some(c) => io::Error::other(c),
                        None => block_error(number, offset, "its worker stopped"),
                    })?;
                    self.free_in.push(done.block);
                    self.current = Current::Buffered {
                        out: done.out,
                        pos: 0,
                    };
                    done.result.map_err(|e| e.into_io(number, offset))?;
                    // Keep the workers busy while this block is read.
                    self.fill(resched)?;
                }
            }
        }
    }

    /// The buffers of the block read to its end, kept for the next ones.
    fn recycle(&mut self) {
        match std::mem::replace(&mut self.current, Current::None) {
            Current::None => {}
            Current::Buffered { mut out, .. } => {
                out.clear();
                self.free_out.push(out);
            }
            Current::Inline { job, .. } => {
                self.free_in.push(job.block);
                self.free_out.push(job.out);
            }
        }
    }

    /// Makes `job` the block being read, decoded here.
    fn inline_block(&mut self, job: Job) -> io::Result<()> {
        restarted(&mut self.inline).map_err(|e| e.into_io(job.number, job.offset))?;
        let feed = Feed::new(&job);
        self.current = Current::Inline { job, feed };
        Ok(())
    }

    /// Reads blocks in and hands them out until as many are in flight as allowed, or reads
    /// the index and the footer at the stream's end.
    fn fill(&mut self, resched: &mut Resched) -> io::Result<()> {
        while !self.input_done && self.pending.len() < self.in_flight {
            if self.next.is_none() {
                let mut h = self.free_in.pop().unwrap_or_default();
                h.clear();
                if !read_more(&mut self.input, &mut h, 1, resched)? {
                    return Err(data_error(format!(
                        "XZ stream: ends at offset {} without its index",
                        self.at
                    )));
                }
                if h[0] == 0 {
                    self.free_in.push(h);
                    self.at =
                        check_end(&mut self.input, &self.records, self.flags, self.at, resched)?;
                    self.input_done = true;
                    break;
                }
                let size = (u64::from(h[0]) + 1) * 4;
                if !read_more(&mut self.input, &mut h, size - 1, resched)? {
                    return Err(block_error(self.blocks, self.at, "its header is cut short"));
                }
                self.next = Some(h);
            }
            let job = self.read_block(resched)?;
            let waiting = self.hand_out(job, resched)?;
            self.pending.push_back(waiting);
        }
        Ok(())
    }

    /// Reads in the block whose header is `self.next`.
    fn read_block(&mut self, resched: &mut Resched) -> io::Result<Job> {
        let (number, offset) = (self.blocks, self.at);
        let mut block = self.next.take().unwrap_or_default();
        let h = block_header(&block).map_err(|e| block_error(number, offset, e))?;
        let (Some(compressed), Some(uncompressed)) = (h.compressed, h.uncompressed) else {
            return Err(block_error(
                number,
                offset,
                "its header gives no sizes (the first block's did: decoding it on its own needs them)",
            ));
        };
        if uncompressed > MAX_BLOCK || compressed > max_compressed(uncompressed) {
            return Err(block_error(
                number,
                offset,
                &format!("{uncompressed} bytes ({compressed} compressed): over the {MAX_BLOCK}-byte bound of a block decoded on its own"),
            ));
        }
        let check = check_size(self.flags[1]);
        let total = h.size as u64 + compressed + pad4(compressed) + check;
        // Bounded above (`max_compressed`); never grown by copying.
        block.reserve_exact((total as usize).saturating_sub(block.len()));
        let rest = total - block.len() as u64;
        if !read_more(&mut self.input, &mut block, rest, resched)? {
            return Err(block_error(
                number,
                offset,
                "the stream ends inside it: the data is cut short",
            ));
        }
        let unpadded = h.size as u64 + compressed + check;
        self.records.push((unpadded, uncompressed));
        self.blocks += 1;
        self.at += total;
        Ok(Job {
            number,
            offset,
            block,
            flags: self.flags,
            unpadded,
            uncompressed,
            out: self.free_out.pop().unwrap_or_default(),
            reply: None,
        })
    }

    /// Gives `job` to a worker (started when fewer are running than blocks in flight), or
    /// keeps it to decode here when none could be started.
    fn hand_out(&mut self, mut job: Job, resched: &mut Resched) -> io::Result<Waiting> {
        let pool = self.pool.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel();
            Pool {
                jobs: Some(tx),
                queue: Arc::new(Mutex::new(rx)),
                stop: Arc::new(AtomicBool::new(false)),
                threads: Vec::new(),
            }
        });
        let claim = (pool.threads.len() < self.workers.min(self.pending.len() + 1))
            .then(|| Claim::take(workers()))
            .flatten();
        if let Some(claim) = claim {
            let (queue, stop, rs) = (pool.queue.clone(), pool.stop.clone(), resched.sibling());
            // The claim goes with the thread, given back when it ends (or at once here when
            // it cannot be started).
            if let Ok(t) = std::thread::Builder::new()
                .name("klpsym-xz".into())
                .spawn(move || work(&queue, &stop, rs, claim))
            {
                pool.threads.push(t);
            }
        }
        if pool.threads.is_empty() {
            return Ok(Waiting::Inline(job));
        }
        let (reply, done) = mpsc::sync_channel(1);
        job.reply = Some(reply);
        let (number, offset) = (job.number, job.offset);
        let sent = pool.jobs.as_ref().map(|tx| tx.send(job));
        if !matches!(sent, Some(Ok(()))) {
            return Err(block_error(number, offset, "the workers stopped"));
        }
        Ok(Waiting::Worker {
            number,
            offset,
            done,
        })
    }

    /// Stops the workers and gives every buffer back in steps.
    pub(crate) fn close(mut self, resched: &mut Resched) -> Result<(), Cancelled> {
        // The workers stopped and joined, then the buffers: a point between.
        let mut buffers = self.stop();
        resched.tick_step()?;
        self.recycle();
        buffers.append(&mut self.free_in);
        buffers.append(&mut self.free_out);
        buffers.extend(self.next.take());
        for b in buffers {
            free_with_points(b, resched)?;
        }
        if let Some(d) = self.inline.take() {
            d.finish(resched)?;
        }
        Ok(())
    }

    /// Stops and joins the workers; the buffers of the blocks handed out.
    fn stop(&mut self) -> Vec<Vec<u8>> {
        let mut buffers = Vec::new();
        if let Some(mut pool) = self.pool.take() {
            pool.stop.store(true, Ordering::Release);
            pool.jobs = None;
            for t in pool.threads.drain(..) {
                // A worker that panicked has nothing to give back.
                let _ = t.join();
            }
            // Jobs no worker took.
            let queue = pool.queue.lock().unwrap_or_else(|p| p.into_inner());
            while let Ok(job) = queue.try_recv() {
                buffers.push(job.block);
                buffers.push(job.out);
            }
        }
        for w in self.pending.drain(..) {
            let done = match w {
                Waiting::Inline(job) => Some((job.block, job.out)),
                Waiting::Worker { done, .. } => done.try_recv().ok().map(|d| (d.block, d.out)),
            };
            if let Some((block, out)) = done {
                buffers.push(block);
                buffers.push(out);
            }
        }
        buffers
    }
}

/// True when `e` is a cancelled reschedule point (as `stream.rs` tells it, above this file).
fn cancelled(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<Cancelled>())
}

impl Drop for BlockReader<'_> {
    fn drop(&mut self) {
        // Error paths only (`close` is the way out): the buffers go at once.
        drop(self.stop());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Text that compresses as a kernel's files do, several-fold, never uniformly.
    fn data(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 64);
        let mut x = 0x9e37_79b9_u32;
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let line = format!("sym_{:x} t {:08x} [mod{}]\n", x % 4099, x, x % 7);
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(n);
        out
    }

    /// What a multithreaded `xz` writes: blocks of `block` bytes, sizes in their headers.
    fn mt_xz(data: &[u8], block: u64) -> Vec<u8> {
        let stream = xz2::stream::MtStreamBuilder::new()
            .threads(2)
            .block_size(block)
            .preset(1)
            .check(xz2::stream::Check::Crc64)
            .encoder()
            .unwrap();
        let mut w = xz2::write::XzEncoder::new_stream(Vec::new(), stream);
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    /// Each block's offset and stored size, walked from the headers.
    fn layout(enc: &[u8]) -> Vec<(usize, usize)> {
        let check = check_size(stream_flags(&enc[..12]).unwrap()[1]) as usize;
        let mut at = 12;
        let mut out = Vec::new();
        while enc[at] != 0 {
            let h = block_header(&enc[at..]).unwrap();
            let c = h.compressed.unwrap() as usize;
            let total = h.size + c + pad4(c as u64) as usize + check;
            out.push((at, total));
            at += total;
        }
        out
    }

    /// `enc` decoded through [`open`]: by blocks, or by xz2 (the reference) when serial.
    fn decode(enc: &[u8], workers: usize, rs: &mut Resched) -> io::Result<Vec<u8>> {
        let input = Box::new(io::BufReader::with_capacity(4096, enc));
        let mut out = Vec::new();
        match open(input, workers, rs)? {
            Opened::Blocks(mut b) => {
                let mut buf = vec![0u8; 8192];
                loop {
                    match b.read(&mut buf, rs)? {
                        0 => break,
                        n => out.extend_from_slice(&buf[..n]),
                    }
                }
                b.close(rs).map_err(io::Error::other)?;
            }
            Opened::Serial(input) => {
                xz2::bufread::XzDecoder::new(input).read_to_end(&mut out)?;
            }
        }
        Ok(out)
    }

    fn is_blocks(enc: &[u8], workers: usize) -> bool {
        let opened = open(Box::new(enc), workers, &mut Resched::none()).unwrap();
        matches!(opened, Opened::Blocks(_))
    }

    #[test]
    fn blocks_decode_on_workers_to_the_serial_bytes() {
        let d = data(1_500_000);
        let enc = mt_xz(&d, 64 << 10);
        assert!(layout(&enc).len() >= 20, "{} blocks", layout(&enc).len());
        assert!(is_blocks(&enc, 2));
        // The reference: xz2 over the whole stream.
        let serial = decode(&enc, 1, &mut Resched::none()).unwrap();
        assert_eq!(serial, d);
        for workers in [2, 3] {
            let mut rs = Resched::none();
            assert_eq!(decode(&enc, workers, &mut rs).unwrap(), d, "{workers}");
            // A point per block read in at least.
            assert!(
                rs.stats().items >= layout(&enc).len() as u64,
                "{:?}",
                rs.stats()
            );
        }
        // One block with sizes (a threaded xz of a small file), and the empty stream.
        let small = mt_xz(&d[..1000], 64 << 10);
        assert_eq!(layout(&small).len(), 1);
        assert_eq!(decode(&small, 2, &mut Resched::none()).unwrap(), &d[..1000]);
        let empty = mt_xz(b"", 64 << 10);
        assert!(!is_blocks(&empty, 2));
        assert_eq!(decode(&empty, 2, &mut Resched::none()).unwrap(), b"");
    }

    #[test]
    fn a_stream_without_sizes_or_one_cpu_is_read_serially() {
        let d = data(300_000);
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(&d).unwrap();
        let single = e.finish().unwrap();
        assert!(!is_blocks(&single, 3));
        assert_eq!(decode(&single, 3, &mut Resched::none()).unwrap(), d);
        let enc = mt_xz(&d, 64 << 10);
        assert!(!is_blocks(&enc, 1));
        assert_eq!(decode(&enc, 1, &mut Resched::none()).unwrap(), d);
    }

    #[test]
    fn blocks_no_worker_takes_are_decoded_by_the_reader() {
        // Every worker of the process taken (a fleet's other jobs): blocks are decoded on the
        // reader's thread as they are read, to the same bytes.
        let held: Vec<Claim> = std::iter::from_fn(|| Claim::take(workers())).collect();
        let d = data(700_000);
        let enc = mt_xz(&d, 64 << 10);
        assert!(is_blocks(&enc, 2));
        let got = decode(&enc, 2, &mut Resched::none());
        drop(held);
        assert_eq!(got.unwrap(), d);
    }

    /// The error of decoding `enc` on two workers.
    fn error_of(enc: &[u8]) -> String {
        let e = decode(enc, 2, &mut Resched::none()).unwrap_err();
        assert!(!cancelled(&e));
        e.to_string()
    }

    #[test]
    fn damaged_blocks_are_errors_naming_the_block_and_its_offset() {
        let d = data(1_000_000);
        let enc = mt_xz(&d, 64 << 10);
        let blocks = layout(&enc);
        assert!(blocks.len() >= 10);
        let (at, total) = blocks[3];
        let named = format!("XZ block 3 at offset {at}:");
        // Compressed data, the CRC64 of its output, its header's CRC32.
        for (place, what) in [
            (at + total / 2, "data"),
            (at + total - 3, "check"),
            (at + 5, "header"),
        ] {
            let mut bad = enc.clone();
            bad[place] ^= 0x55;
            let e = error_of(&bad);
            assert!(e.contains(&named), "{what}: {e}");
        }
        // Cut inside a block.
        let e = error_of(&enc[..at + total / 2]);
        assert!(e.contains(&named) && e.contains("cut short"), "{e}");
    }

    #[test]
    fn a_damaged_or_missing_end_is_an_error() {
        let d = data(600_000);
        let enc = mt_xz(&d, 64 << 10);
        let blocks = layout(&enc);
        let (last, total) = blocks[blocks.len() - 1];
        let index = last + total;
        // A block taken out: the index lists one more.
        let (at, len) = blocks[2];
        let mut fewer = enc[..at].to_vec();
        fewer.extend_from_slice(&enc[at + len..]);
        let e = error_of(&fewer);
        assert!(
            e.contains(&format!(
                "lists {} blocks, the stream holds {}",
                blocks.len(),
                blocks.len() - 1
            )),
            "{e}"
        );
        // The index's CRC32, the footer's magic, the footer's flags, cut at the index, cut in
        // the footer.
        let n = enc.len();
        for (place, what) in [
            (n - 13, "index at offset"),
            (n - 1, "no YZ magic"),
            (n - 3, "footer at offset"),
        ] {
            let mut bad = enc.clone();
            bad[place] ^= 0x01;
            let e = error_of(&bad);
            assert!(e.contains(what), "{place}: {e}");
        }
        let e = error_of(&enc[..index]);
        assert!(e.contains("without its index"), "{e}");
        let e = error_of(&enc[..n - 4]);
        assert!(e.contains("footer is cut short"), "{e}");
        // Whole, it reads to the end.
        assert_eq!(decode(&enc, 2, &mut Resched::none()).unwrap(), d);
    }

    #[test]
    fn a_cancelled_read_stops_the_workers() {
        let d = data(2_000_000);
        let enc = mt_xz(&d, 64 << 10);
        let flag = Arc::new(AtomicBool::new(false));
        let mut rs = Resched::none().with_cancel_flag(flag.clone());
        let Opened::Blocks(mut dec) = open(Box::new(&enc[..]), 2, &mut rs).unwrap() else {
            panic!("a stream of blocks");
        };
        let mut buf = vec![0u8; 4096];
        assert!(dec.read(&mut buf, &mut rs).unwrap() > 0);
        flag.store(true, Ordering::Relaxed);
        let e = loop {
            match dec.read(&mut buf, &mut rs) {
                Ok(n) => assert!(n > 0, "ended although cancelled"),
                Err(e) => break e,
            }
        };
        assert!(cancelled(&e), "{e}");
        // Closing joins the workers (each stops at its next step): it returns, its buffers
        // given back at once where a point says cancelled.
        let _ = dec.close(&mut rs);
    }
}
