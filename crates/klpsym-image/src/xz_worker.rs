//! The worker side of `xz_blocks.rs`: a block handed to a worker, and its decoding as a stream
//! of its own, [`STEP`] bytes per liblzma call with a reschedule point each.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use klpsym_resched::resched::{Cancelled, Resched};

use crate::codecs::STEP;
use crate::xz::Decoder;
use crate::xz_format::{data_error, one_block_end, stream_header};

/// How long the reader waits for a block between two reschedule points.
const WAIT: Duration = Duration::from_millis(1);

/// Workers running in the process, those of every reader: packages read at once (a fleet's
/// jobs) share the machine's workers, never one set each.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// One of the process's workers, held while its thread runs.
pub(crate) struct Claim(());

impl Claim {
    /// A worker, unless `max` are running already.
    pub(crate) fn take(max: usize) -> Option<Claim> {
        RUNNING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Claim(()))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) fn block_error(number: u64, offset: u64, what: &str) -> io::Error {
    data_error(format!("XZ block {number} at offset {offset}: {what}"))
}

/// One block: as stored, and where its output goes.
pub(crate) struct Job {
    pub(crate) number: u64,
    pub(crate) offset: u64,
    /// The block as stored: header, compressed data, padding, check.
    pub(crate) block: Vec<u8>,
    pub(crate) flags: [u8; 2],
    pub(crate) unpadded: u64,
    pub(crate) uncompressed: u64,
    /// Where a worker puts its output (a buffer of an earlier block, reused).
    pub(crate) out: Vec<u8>,
    /// Where a worker answers.
    pub(crate) reply: Option<mpsc::SyncSender<Done>>,
}

/// A block decoded by a worker, or why not; the buffers come back either way.
pub(crate) struct Done {
    pub(crate) result: Result<(), BlockError>,
    pub(crate) block: Vec<u8>,
    pub(crate) out: Vec<u8>,
}

pub(crate) enum BlockError {
    Cancelled,
    /// The reader was closed.
    Stopped,
    Data(String),
}

impl BlockError {
    pub(crate) fn into_io(self, number: u64, offset: u64) -> io::Error {
        match self {
            BlockError::Cancelled => io::Error::other(Cancelled),
            BlockError::Stopped => block_error(number, offset, "decoding was stopped"),
            BlockError::Data(what) => block_error(number, offset, &what),
        }
    }
}

/// A block decoded as a stream of its own: the stream header, the block as stored, the index
/// and footer of one block, fed to liblzma in turn.
pub(crate) struct Feed {
    head: [u8; 12],
    tail: Vec<u8>,
    /// Which of the three inputs, and how far into it.
    part: usize,
    pos: usize,
    produced: u64,
}

impl Feed {
    pub(crate) fn new(job: &Job) -> Feed {
        Feed {
            head: stream_header(job.flags),
            tail: one_block_end(job.flags, job.unpadded, job.uncompressed),
            part: 0,
            pos: 0,
            produced: 0,
        }
    }

    /// One liblzma call into `out`: the bytes it gave, and whether the block ended (with as
    /// many bytes as its header says).
    pub(crate) fn step(
        &mut self,
        job: &Job,
        dec: &mut Decoder,
        out: &mut [u8],
        rs: &mut Resched,
    ) -> Result<(usize, bool), BlockError> {
        let len = |part| match part {
            0 => self.head.len(),
            1 => job.block.len(),
            2 => self.tail.len(),
            _ => 0,
        };
        while self.part < 3 && self.pos == len(self.part) {
            (self.part, self.pos) = (self.part + 1, 0);
        }
        let input: &[u8] = match self.part {
            0 => &self.head[self.pos..],
            1 => &job.block[self.pos..],
            2 => &self.tail[self.pos..],
            _ => &[],
        };
        let step = dec
            .step(input, out, rs)
            .map_err(|_| BlockError::Cancelled)?
            .map_err(BlockError::Data)?;
        self.pos += step.consumed;
        self.produced += step.produced as u64;
        if step.stream_end {
            if self.produced != job.uncompressed {
                return Err(BlockError::Data(format!(
                    "decodes to {} bytes, its header says {}",
                    self.produced, job.uncompressed
                )));
            }
            return Ok((step.produced, true));
        }
        if step.consumed == 0 && step.produced == 0 {
            return Err(BlockError::Data("the block ends early".into()));
        }
        Ok((step.produced, false))
    }
}

/// The decoder in `dec`, made or restarted for a new block.
pub(crate) fn restarted(dec: &mut Option<Decoder>) -> Result<&mut Decoder, BlockError> {
    if let Some(d) = dec {
        d.restart().map_err(BlockError::Data)?;
    } else {
        *dec = Some(Decoder::reusable().map_err(BlockError::Data)?);
    }
    dec.as_mut()
        .ok_or_else(|| BlockError::Data("no decoder".into()))
}

/// The worker threads and their queue.
pub(crate) struct Pool {
    pub(crate) jobs: Option<mpsc::Sender<Job>>,
    pub(crate) queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) threads: Vec<std::thread::JoinHandle<()>>,
}

/// Waits for a worker's block, with a reschedule point every [`WAIT`]: `Err(None)` when the
/// worker is gone.
pub(crate) fn wait(
    rx: &mpsc::Receiver<Done>,
    resched: &mut Resched,
) -> Result<Done, Option<Cancelled>> {
    loop {
        match rx.recv_timeout(WAIT) {
            Ok(d) => return Ok(d),
            Err(mpsc::RecvTimeoutError::Timeout) => resched.tick_step().map_err(Some)?,
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(None),
        }
    }
}

/// A worker: takes blocks until the queue closes or the reader stops it.
pub(crate) fn work(
    queue: &Mutex<mpsc::Receiver<Job>>,
    stop: &AtomicBool,
    mut rs: Resched,
    claim: Claim,
) {
    let mut dec = None;
    loop {
        let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(mut job) = job else {
            break;
        };
        // The wait was not work.
        rs.resume();
        let result = if stop.load(Ordering::Acquire) {
            Err(BlockError::Stopped)
        } else {
            decode_block(&mut dec, &mut job, &mut rs, stop)
        };
        let Job {
            block, out, reply, ..
        } = job;
        if let Some(reply) = reply {
            let _ = reply.send(Done { result, block, out });
        }
    }
    if let Some(d) = dec {
        // Its dictionary back in steps (at once when cancelled).
        let _ = d.finish(&mut rs);
    }
    drop(claim);
}

/// Decodes one block into `job.out`, [`STEP`] bytes per liblzma call with a reschedule point
/// each.
pub(crate) fn decode_block(
    dec: &mut Option<Decoder>,
    job: &mut Job,
    rs: &mut Resched,
    stop: &AtomicBool,
) -> Result<(), BlockError> {
    let d = restarted(dec)?;
    let mut feed = Feed::new(job);
    let mut out = std::mem::take(&mut job.out);
    out.clear();
    // One byte more than the header says, for liblzma to find the block too long; reserved
    // at once (bounded by MAX_BLOCK), its pages first touched a step at a time below.
    let room = job.uncompressed as usize + 1;
    out.reserve_exact(room);
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Err(BlockError::Stopped);
        }
        if rs.tick_step().is_err() {
            break Err(BlockError::Cancelled);
        }
        let len = out.len();
        out.resize(len + STEP.min(room - len), 0);
        match feed.step(job, d, &mut out[len..], rs) {
            Ok((got, end)) => {
                out.truncate(len + got);
                if end {
                    break Ok(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    job.out = out;
    result
}
