//! XZ and LZMA-alone decoding through liblzma, with memory that is given back in steps.
//!
//! A kernel's XZ payload is made with a 32 MiB dictionary. liblzma allocates it when decoding
//! starts and frees it in `lzma_end`: one `free` of 32 MiB of touched pages, 3-6 ms of munmap
//! with no reschedule point. So the stream gets its own allocator: every block liblzma frees is
//! kept, and released here after the call, a big one 256 KiB at a time (shrinking it with
//! `realloc`) with a point between steps.

#![allow(unsafe_code)]

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::c_void;

use klpsym_resched::resched::{Cancelled, Resched};
use lzma_sys as sys;

/// Which liblzma decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `.xz` container.
    Xz,
    /// `.lzma` (LZMA-alone).
    Lzma,
}

/// Bytes given back per step when a freed block is released.
const RELEASE_STEP: usize = 256 << 10;

/// malloc's alignment, which liblzma relies on.
const ALIGN: usize = 16;

/// The allocator's state: live blocks (address → size) and blocks liblzma freed, kept until
/// [`Heap::release`] gives them back in steps.
#[derive(Default)]
struct Heap {
    live: HashMap<usize, usize>,
    freed: Vec<(usize, usize)>,
}

extern "C" fn heap_alloc(opaque: *mut c_void, nmemb: usize, size: usize) -> *mut c_void {
    let Some(n) = nmemb.checked_mul(size) else {
        return std::ptr::null_mut();
    };
    let Ok(layout) = Layout::from_size_align(n.max(1), ALIGN) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a nonzero size.
    let p = unsafe { std::alloc::alloc(layout) };
    // No huge pages for the dictionary (32 MiB for a kernel's XZ): liblzma first touches it
    // while it decodes, and a huge page's first touch zeroes 2 MiB in one kernel entry
    // (270 µs and more on this project's VM: over the reschedule bound every time).
    if !p.is_null() {
        // SAFETY: `opaque` is the `Heap` the stream was set up with, alive for the stream's
        // whole life (see `Decoder`), and liblzma calls its allocator from the calling thread
        // only, inside `lzma_*` calls that `Decoder` makes with exclusive access.
        let heap = unsafe { &mut *(opaque as *mut Heap) };
        heap.live.insert(p as usize, layout.size());
    }
    p as *mut c_void
}

extern "C" fn heap_free(opaque: *mut c_void, ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: as in `heap_alloc`.
    let heap = unsafe { &mut *(opaque as *mut Heap) };
    if let Some(size) = heap.live.remove(&(ptr as usize)) {
        heap.freed.push((ptr as usize, size));
    }
}

impl Heap {
    /// Gives the blocks liblzma freed back to the system allocator, big ones in steps.
    fn release(&mut self, resched: &mut Resched) -> Result<(), Cancelled> {
        while let Some((addr, mut size)) = self.freed.pop() {
            let mut p = addr as *mut u8;
            while size > RELEASE_STEP {
                let smaller = size - RELEASE_STEP;
                // SAFETY: `p` was allocated by `heap_alloc` with `size` bytes and ALIGN (or is
                // the result of an earlier shrink to `size`), and liblzma no longer uses it.
                let q = unsafe {
                    std::alloc::realloc(p, Layout::from_size_align_unchecked(size, ALIGN), smaller)
                };
                if q.is_null() {
                    break;
                }
                p = q;
                size = smaller;
                if let Err(c) = resched.tick_step() {
                    // SAFETY: as above; the block is given back whole before stopping.
                    unsafe {
                        std::alloc::dealloc(p, Layout::from_size_align_unchecked(size, ALIGN))
                    };
                    return Err(c);
                }
            }
            // SAFETY: as above.
            unsafe { std::alloc::dealloc(p, Layout::from_size_align_unchecked(size, ALIGN)) };
            resched.tick_step()?;
        }
        Ok(())
    }
}

/// A liblzma decoder whose memory goes through [`Heap`].
pub(crate) struct Decoder {
    // Boxed so their addresses stay fixed while liblzma holds pointers to them.
    stream: Box<sys::lzma_stream>,
    /// Never read here: kept alive because `stream.allocator` points to it.
    _allocator: Box<sys::lzma_allocator>,
    /// Owned (from `Box::into_raw`, freed in `Drop`); a raw pointer because liblzma's
    /// callbacks reach it through the allocator's `opaque` too.
    heap: *mut Heap,
    ended: bool,
    /// Kept at a stream's end, for [`Decoder::restart`] (the dictionary reused).
    reusable: bool,
}

// SAFETY: the decoder owns its liblzma stream, allocator and heap outright (nothing else
// points to them), and liblzma touches them only inside calls made through `&mut self`: moving
// the whole to another thread (a worker decoding blocks) moves their only user with it.
unsafe impl Send for Decoder {}

/// What one [`Decoder::step`] did.
pub(crate) struct Step {
    pub consumed: usize,
    pub produced: usize,
    pub stream_end: bool,
}

impl Decoder {
    /// An XZ decoder that is not ended at its stream's end: [`Decoder::restart`] starts the
    /// next stream with the memory of the last (liblzma keeps a dictionary of the same size).
    pub(crate) fn reusable() -> Result<Decoder, String> {
        let mut d = Decoder::new(Kind::Xz)?;
        d.reusable = true;
        Ok(d)
    }

    /// Starts a new XZ stream on a [`Decoder::reusable`] decoder, ended or not.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.ended = false;
        // SAFETY: the stream was initialized in `new` (or ended, which leaves it reusable);
        // liblzma reinitializes it in place, through the same allocator.
        let ret = unsafe { sys::lzma_stream_decoder(&mut *self.stream, u64::MAX, 0) };
        if ret != sys::LZMA_OK {
            return Err(format!("cannot create the decoder: {}", message(ret)));
        }
        Ok(())
    }

    pub(crate) fn new(kind: Kind) -> Result<Decoder, String> {
        let heap = Box::into_raw(Box::<Heap>::default());
        let allocator = Box::new(sys::lzma_allocator {
            alloc: Some(heap_alloc),
            free: Some(heap_free),
            opaque: heap as *mut c_void,
        });
        // SAFETY: LZMA_STREAM_INIT is all zeros: null pointers, zero counters.
        let mut stream: Box<sys::lzma_stream> = Box::new(unsafe { std::mem::zeroed() });
        stream.allocator = &*allocator;
        // SAFETY: `stream` is initialized as liblzma requires and outlives the decoder.
        let ret = unsafe {
            match kind {
                Kind::Xz => sys::lzma_stream_decoder(&mut *stream, u64::MAX, 0),
                Kind::Lzma => sys::lzma_alone_decoder(&mut *stream, u64::MAX),
            }
        };
        let d = Decoder {
            stream,
            _allocator: allocator,
            heap,
            ended: false,
            reusable: false,
        };
        if ret != sys::LZMA_OK {
            return Err(format!("cannot create the decoder: {}", message(ret)));
        }
        Ok(d)
    }

    /// Decodes from `input` into `out`; then releases, in steps, whatever liblzma freed.
    pub(crate) fn step(
        &mut self,
        input: &[u8],
        out: &mut [u8],
        resched: &mut Resched,
    ) -> Result<Result<Step, String>, Cancelled> {
        let s = &mut *self.stream;
        s.next_in = input.as_ptr();
        s.avail_in = input.len();
        s.next_out = out.as_mut_ptr();
        s.avail_out = out.len();
        // SAFETY: the pointers describe live buffers for the duration of the call.
        let ret = unsafe { sys::lzma_code(s, sys::LZMA_RUN) };
        let consumed = input.len() - s.avail_in;
        let produced = out.len() - s.avail_out;
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        let step = match ret {
            sys::LZMA_OK => Ok(Step {
                consumed,
                produced,
                stream_end: false,
            }),
            sys::LZMA_STREAM_END => {
                if !self.reusable {
                    self.end();
                }
                Ok(Step {
                    consumed,
                    produced,
                    stream_end: true,
                })
            }
            e => Err(message(e).to_string()),
        };
        self.release(resched)?;
        Ok(step)
    }

    fn release(&mut self, resched: &mut Resched) -> Result<(), Cancelled> {
        // SAFETY: `heap` is owned by this decoder and liblzma only touches it inside the
        // `lzma_*` calls, none of which is running now.
        unsafe { &mut *self.heap }.release(resched)
    }

    fn end(&mut self) {
        if !self.ended {
            // SAFETY: the stream was initialized; lzma_end frees through our allocator.
            unsafe { sys::lzma_end(&mut *self.stream) };
            self.ended = true;
        }
    }

    /// Ends the stream (if it has not ended) and releases its memory in steps.
    pub(crate) fn finish(mut self, resched: &mut Resched) -> Result<(), Cancelled> {
        self.end();
        self.release(resched)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        self.end();
        // Without a driver here: released at once (error paths only; `finish` is the way out).
        let _ = self.release(&mut Resched::none());
        // SAFETY: from `Box::into_raw` in `new`; liblzma is done with it after `lzma_end`.
        drop(unsafe { Box::from_raw(self.heap) });
    }
}

fn message(ret: sys::lzma_ret) -> &'static str {
    match ret {
        sys::LZMA_NO_CHECK => "input has no integrity check",
        sys::LZMA_UNSUPPORTED_CHECK => "unsupported integrity check",
        sys::LZMA_MEM_ERROR => "out of memory",
        sys::LZMA_MEMLIMIT_ERROR => "memory limit reached",
        sys::LZMA_FORMAT_ERROR => "file format not recognized",
        sys::LZMA_OPTIONS_ERROR => "invalid or unsupported options",
        sys::LZMA_DATA_ERROR => "compressed data is corrupt",
        sys::LZMA_BUF_ERROR => "compressed data is truncated or otherwise corrupt",
        sys::LZMA_PROG_ERROR => "internal error (invalid arguments)",
        _ => "unknown liblzma error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xz(data: &[u8], dict: u32) -> Vec<u8> {
        let mut opts = xz2::stream::LzmaOptions::new_preset(6).unwrap();
        opts.dict_size(dict);
        let mut filters = xz2::stream::Filters::new();
        filters.lzma2(&opts);
        let s =
            xz2::stream::Stream::new_stream_encoder(&filters, xz2::stream::Check::Crc32).unwrap();
        let mut out = Vec::new();
        let mut w = xz2::write::XzEncoder::new_stream(&mut out, s);
        std::io::Write::write_all(&mut w, data).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn a_big_dictionary_is_given_back_in_steps() {
        let data: Vec<u8> = (0..2u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 29) as u8 + b'a')
            .collect();
        let input = xz(&data, 8 << 20);
        let mut d = Decoder::new(Kind::Xz).unwrap();
        let mut out = vec![0u8; data.len() + 1];
        let (mut i, mut o) = (0, 0);
        let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
        loop {
            let end = (o + 4096).min(out.len());
            let s = d
                .step(&input[i..], &mut out[o..end], &mut r)
                .unwrap()
                .unwrap();
            i += s.consumed;
            o += s.produced;
            if s.stream_end {
                break;
            }
        }
        assert_eq!(&out[..o], &data[..]);
        let before = r.stats().items;
        d.finish(&mut r).unwrap();
        // The dictionary (MiBs) went back in 256 KiB steps, freed at the stream's end.
        assert!(before >= 4, "{:?}", r.stats());
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_crash() {
        let mut input = xz(b"hello hello hello hello", 1 << 16);
        let n = input.len();
        input[n / 2] ^= 0xff;
        let mut d = Decoder::new(Kind::Xz).unwrap();
        let mut out = vec![0u8; 64];
        let r = d.step(&input, &mut out, &mut Resched::none()).unwrap();
        assert!(r.is_err() || !r.unwrap().stream_end);
    }
}
