//! One decoder per compression the kernel build can use for its payload, each writing straight
//! into a single `Vec` sized from the caller's hint and refusing to grow past `limit` bytes.
//!
//! Decoding is streamed: each decoder call produces at most [`STEP`] bytes, and a reschedule
//! point is counted per step, so a 60 MiB kernel never decodes in one uninterruptible stretch.
//! (Legacy LZ4 is the exception: `lz4_flex` decodes a whole block, up to 8 MiB, per call.)
//!
//! Every decoder stops at the end of the first stream/frame and ignores what follows: x86 build
//! rules append the 4-byte decompressed size (`size_append`) after the stream, and a bzImage's
//! `payload_length` may cover padding.

use std::io::Read;

use klpsym_resched::resched::Resched;

use crate::compression::Compression;
use crate::error::ImageError;

/// Most output one decoder call may produce: with XZ at ~60 MB/s this is about 17 µs of work
/// (XZ's speed varies severalfold with the data, so 4 KiB steps often took over 100 µs), and
/// the per-call overhead of liblzma/zlib/zstd stays small at this size.
pub(crate) const STEP: usize = 1 << 10;

/// Decompresses `input` (which starts with the stream) with `compression`.
///
/// `hint` is the expected output size (from the kernel's appended size field, when known); the
/// output buffer is allocated once with that capacity so the common case never reallocates.
pub(crate) fn decompress(
    compression: Compression,
    input: &[u8],
    offset: usize,
    hint: Option<usize>,
    limit: usize,
    resched: &mut Resched,
) -> Result<Vec<u8>, ImageError> {
    let ctx = Ctx {
        compression,
        offset,
        limit,
    };
    // A hint larger than the limit is either a bomb or a wrong guess: start small then.
    let capacity = hint.filter(|&h| h <= limit).map_or(1 << 20, |h| h + 1);
    match compression {
        Compression::Xz => lzma_stream(crate::xz::Kind::Xz, input, capacity, &ctx, resched),
        Compression::Lzma => lzma_stream(crate::xz::Kind::Lzma, input, capacity, &ctx, resched),
        Compression::Gzip => read_all(
            flate2::bufread::GzDecoder::new(input),
            capacity,
            &ctx,
            resched,
        ),
        Compression::Bzip2 => read_all(
            bzip2::bufread::BzDecoder::new(input),
            capacity,
            &ctx,
            resched,
        ),
        Compression::Zstd => {
            if hint.is_some_and(|h| h <= limit) {
                if let Some(out) = zstd_in_place(input, capacity, &ctx, resched)? {
                    return Ok(out);
                }
            }
            let mut dec = zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|e| ctx.err(format!("cannot create zstd decoder: {e}")))?
                .single_frame();
            // Kernel payloads are made with `zstd -22 --ultra`, whose window can exceed the
            // library's default maximum.
            dec.window_log_max(31)
                .map_err(|e| ctx.err(format!("cannot raise zstd window: {e}")))?;
            read_all(dec, capacity, &ctx, resched)
        }
        Compression::Lz4Legacy => lz4_legacy(input, capacity, &ctx, resched),
        Compression::Lzo => Err(ImageError::UnsupportedCompression {
            container: "kernel image",
            offset,
            found: "LZO".into(),
        }),
    }
}

/// Compressed bytes given to zstd per step. zstd decodes a block (up to 128 KiB of output)
/// in the call that completes its input, so a step is about one block (or a run of one-byte
/// RLE blocks, such as the image's zero padding); smaller steps only add calls.
const ZSTD_IN_STEP: usize = 1 << 10;

/// A zstd frame decoded straight into an output buffer of the expected size, which zstd keeps
/// as its window (`ZSTD_d_stableOutBuffer`): no window buffer of its own (up to 128 MiB for
/// the kernel's `zstd -22 --ultra`, every page of it a fresh page fault) and no copy out of
/// it. Steps are cut by feeding the input [`ZSTD_IN_STEP`] bytes at a time. `Ok(None)` when
/// the frame does not fit the expected size (a wrong size field) or does not decode: the
/// stream decoder then decodes it, or names what is wrong.
fn zstd_in_place(
    input: &[u8],
    capacity: usize,
    ctx: &Ctx,
    resched: &mut Resched,
) -> Result<Option<Vec<u8>>, ImageError> {
    use zstd::zstd_safe::{get_error_name, DCtx, DParameter, InBuffer, OutBuffer};
    let zerr = |what: &str, code: usize| ctx.err(format!("{what}: {}", get_error_name(code)));
    let mut dctx =
        DCtx::try_create().ok_or_else(|| ctx.err("cannot create zstd decoder".into()))?;
    // Kernel payloads are made with `zstd -22 --ultra`, whose window can exceed the library's
    // default maximum.
    dctx.set_parameter(DParameter::WindowLogMax(31))
        .map_err(|c| zerr("cannot raise zstd window", c))?;
    dctx.set_parameter(DParameter::StableOutBuffer(true))
        .map_err(|c| zerr("cannot keep the output buffer", c))?;
    let mut out: Vec<u8> = Vec::with_capacity(capacity);
    let mut consumed = 0usize;
    loop {
        let end = consumed.saturating_add(ZSTD_IN_STEP).min(input.len());
        let mut inb = InBuffer::around(&input[consumed..end]);
        let before = out.len();
        let left = {
            let mut outb = OutBuffer::around_pos(&mut out, before);
            match dctx.decompress_stream(&mut outb, &mut inb) {
                Ok(left) => left,
                // A frame larger than the buffer (a wrong size field; zstd says so as soon as
                // the frame header declares it), or damage: the stream decoder decides which,
                // with its own message.
                Err(_) => return give_back(out, resched),
            }
        };
        consumed += inb.pos();
        if left == 0 {
            if out.len() > ctx.limit {
                return Err(ctx.too_large());
            }
            if out.is_empty() {
                return Err(ctx.err("stream decodes to nothing".into()));
            }
            return Ok(Some(out));
        }
        if out.len() == capacity {
            return give_back(out, resched);
        }
        if end == input.len() && inb.pos() == 0 && out.len() == before {
            return Err(ctx.err(format!(
                "stream ends without its end marker after {consumed} input bytes"
            )));
        }
        resched.tick_step()?;
    }
}

/// Frees a buffer of up to the image's size in steps, before the stream decoder takes over.
fn give_back(out: Vec<u8>, resched: &mut Resched) -> Result<Option<Vec<u8>>, ImageError> {
    klpsym_resched::bulk::free_with_points(out, resched)?;
    Ok(None)
}

/// What every decoder needs to build its errors.
struct Ctx {
    compression: Compression,
    offset: usize,
    limit: usize,
}

impl Ctx {
    fn err(&self, message: String) -> ImageError {
        ImageError::Decompress {
            compression: self.compression,
            offset: self.offset,
            message,
        }
    }

    fn too_large(&self) -> ImageError {
        ImageError::TooLarge {
            compression: self.compression,
            offset: self.offset,
            limit: self.limit,
        }
    }

    /// Exposes the next at most [`STEP`] bytes of output (zero-filled, overwritten by the
    /// decoder right away) and returns where they start. Capacity never passes `limit + 1` (one
    /// byte past the limit is how an overflow is noticed). Errors once the limit is exceeded.
    fn next_step(&self, out: &mut Vec<u8>) -> Result<usize, ImageError> {
        let len = out.len();
        if len > self.limit {
            return Err(self.too_large());
        }
        // Fill the capacity already there before growing: stepping past the end of a buffer
        // presized from the kernel's size field would reallocate (copy) all 60 MiB at once.
        let spare = out.capacity() - len;
        let step = STEP.min(self.limit + 1 - len);
        let step = if spare > 0 { step.min(spare) } else { step };
        if len + step > out.capacity() {
            let room = (self.limit + 1 - len).min(len.max(1 << 16)).max(step);
            out.reserve_exact(room);
        }
        out.resize(len + step, 0);
        Ok(len)
    }
}

/// Drives a liblzma stream (XZ or LZMA-alone) until its end marker, writing into one `Vec`.
fn lzma_stream(
    kind: crate::xz::Kind,
    input: &[u8],
    capacity: usize,
    ctx: &Ctx,
    resched: &mut Resched,
) -> Result<Vec<u8>, ImageError> {
    resched.tick_step()?;
    let mut dec = crate::xz::Decoder::new(kind).map_err(|e| ctx.err(e))?;
    resched.tick_step()?;
    let mut out = Vec::with_capacity(capacity.min(ctx.limit + 1));
    resched.tick_step()?;
    let mut consumed = 0usize;
    loop {
        let start = ctx.next_step(&mut out)?;
        let step = dec.step(&input[consumed..], &mut out[start..], resched)?;
        let step = match step {
            Ok(s) => s,
            Err(e) => {
                out.truncate(start);
                return Err(ctx.err(e));
            }
        };
        consumed += step.consumed;
        out.truncate(start + step.produced);
        if out.len() > ctx.limit {
            return Err(ctx.too_large());
        }
        if step.stream_end {
            dec.finish(resched)?;
            return Ok(out);
        }
        if step.consumed == 0 && step.produced == 0 {
            return Err(ctx.err(format!(
                "stream ends without its end marker after {consumed} input bytes"
            )));
        }
        resched.tick_step()?;
    }
}

/// Reads a `Read` decoder to its end, with at most `limit` bytes of output.
fn read_all(
    mut reader: impl Read,
    capacity: usize,
    ctx: &Ctx,
    resched: &mut Resched,
) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(capacity.min(ctx.limit + 1));
    loop {
        let start = ctx.next_step(&mut out)?;
        let got = match reader.read(&mut out[start..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                out.truncate(start);
                continue;
            }
            Err(e) => return Err(ctx.err(e.to_string())),
        };
        out.truncate(start + got);
        if got == 0 {
            break;
        }
        resched.tick_step()?;
    }
    if out.len() > ctx.limit {
        return Err(ctx.too_large());
    }
    if out.is_empty() {
        return Err(ctx.err("stream decodes to nothing".into()));
    }
    Ok(out)
}

/// Magic of the legacy LZ4 frame format (`lz4 -l`) used by the kernel build.
pub(crate) const LZ4_LEGACY_MAGIC: u32 = 0x184C_2102;
/// Each legacy LZ4 block decompresses to at most 8 MiB.
const LZ4_LEGACY_BLOCK_MAX: usize = 8 << 20;

/// Decodes the legacy LZ4 frame: the magic, then blocks of `u32 LE compressed size` + LZ4 block
/// data. A repeated magic starts another frame (as `lz4 -l` concatenations do). Anything that
/// cannot be a block (fewer than 4 bytes left, or a size larger than what remains: the appended
/// decompressed size) ends the stream, as the kernel's `unlz4` does at the end of its input.
fn lz4_legacy(
    input: &[u8],
    capacity: usize,
    ctx: &Ctx,
    resched: &mut Resched,
) -> Result<Vec<u8>, ImageError> {
    let read_u32 = |p: usize| -> Option<u32> {
        input
            .get(p..p + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if read_u32(0) != Some(LZ4_LEGACY_MAGIC) {
        return Err(ctx.err("missing legacy LZ4 magic 0x184c2102".into()));
    }
    let mut out: Vec<u8> = Vec::with_capacity(capacity.min(ctx.limit + 1));
    let mut pos = 4;
    let mut blocks = 0usize;
    while let Some(size) = read_u32(pos) {
        if size == LZ4_LEGACY_MAGIC {
            pos += 4;
            continue;
        }
        let size = size as usize;
        let Some(block) = input.get(pos + 4..pos + 4 + size) else {
            if blocks == 0 {
                return Err(ctx.err(format!(
                    "block at {pos:#x} claims {size} bytes, only {} remain",
                    input.len() - pos - 4
                )));
            }
            break;
        };
        let start = out.len();
        let want = (start + LZ4_LEGACY_BLOCK_MAX).min(ctx.limit + 1);
        out.resize(want, 0);
        let written = lz4_flex::block::decompress_into(block, &mut out[start..])
            .map_err(|e| ctx.err(format!("block at {pos:#x}: {e}")))?;
        out.truncate(start + written);
        if out.len() > ctx.limit {
            return Err(ctx.too_large());
        }
        pos += 4 + size;
        blocks += 1;
        resched.tick_step()?;
    }
    if blocks == 0 {
        return Err(ctx.err("no LZ4 block after the magic".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sample() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| format!("sym_{i} ").into_bytes())
            .collect()
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn xz_roundtrip_ignores_trailing_size_field() {
        let data = sample();
        let mut c = xz(&data);
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        let out = decompress(
            Compression::Xz,
            &c,
            0,
            Some(data.len()),
            1 << 30,
            &mut Resched::none(),
        )
        .unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn every_codec_roundtrips_and_enforces_the_limit() {
        let data = sample();
        let mut streams: Vec<(Compression, Vec<u8>)> = vec![(Compression::Xz, xz(&data))];
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(&data).unwrap();
        streams.push((Compression::Gzip, g.finish().unwrap()));
        let mut b = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        b.write_all(&data).unwrap();
        streams.push((Compression::Bzip2, b.finish().unwrap()));
        streams.push((Compression::Zstd, zstd::encode_all(&data[..], 3).unwrap()));
        let opts = xz2::stream::LzmaOptions::new_preset(1).unwrap();
        let mut l = xz2::write::XzEncoder::new_stream(
            Vec::new(),
            xz2::stream::Stream::new_lzma_encoder(&opts).unwrap(),
        );
        l.write_all(&data).unwrap();
        streams.push((Compression::Lzma, l.finish().unwrap()));
        let mut lz = LZ4_LEGACY_MAGIC.to_le_bytes().to_vec();
        for chunk in data.chunks(LZ4_LEGACY_BLOCK_MAX / 64) {
            let block = lz4_flex::block::compress(chunk);
            lz.extend_from_slice(&(block.len() as u32).to_le_bytes());
            lz.extend_from_slice(&block);
        }
        lz.extend_from_slice(&(data.len() as u32).to_le_bytes());
        streams.push((Compression::Lz4Legacy, lz));
        for (c, s) in &streams {
            let out = decompress(*c, s, 0, None, 1 << 30, &mut Resched::none()).unwrap();
            assert_eq!(out.len(), data.len(), "{c}");
            assert!(out == data, "{c}");
            let err = decompress(*c, s, 7, None, data.len() - 1, &mut Resched::none()).unwrap_err();
            assert!(
                matches!(err, ImageError::TooLarge { offset: 7, .. }),
                "{c}: {err}"
            );
            // Exactly at the limit is fine.
            assert_eq!(
                decompress(*c, s, 0, None, data.len(), &mut Resched::none())
                    .unwrap()
                    .len(),
                data.len()
            );
        }
    }

    #[test]
    fn every_codec_reaches_points_and_can_be_cancelled() {
        let data = sample();
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(&data).unwrap();
        let streams = [
            (Compression::Xz, xz(&data)),
            (Compression::Gzip, g.finish().unwrap()),
            (Compression::Zstd, zstd::encode_all(&data[..], 3).unwrap()),
        ];
        for (c, s) in &streams {
            // Every step of at most STEP bytes but the last (which ends the stream) counts.
            let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
            let out = decompress(*c, s, 0, None, 1 << 30, &mut r).unwrap();
            assert!(
                r.stats().items + 1 >= (out.len() / STEP) as u64,
                "{c}: {} bytes, {:?}",
                out.len(),
                r.stats()
            );
            let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
            let mut r = Resched::none()
                .with_interval(std::time::Duration::from_micros(1))
                .with_cancel_flag(flag);
            let err = decompress(*c, s, 0, None, 1 << 30, &mut r).unwrap_err();
            assert!(matches!(err, ImageError::Cancelled), "{c}: {err}");
        }
    }

    /// A zstd payload with the kernel's size field decodes in place; a wrong field falls back
    /// to the stream, and limits, truncation and cancellation hold either way.
    #[test]
    fn zstd_with_a_size_field_decodes_in_place_or_falls_back() {
        let data = sample();
        let z = zstd::encode_all(&data[..], 3).unwrap();
        let rs = &mut Resched::none();
        let n = data.len();
        for hint in [n, n - 1, n / 3, n + 1, 2 * n] {
            let out = decompress(Compression::Zstd, &z, 0, Some(hint), 1 << 30, rs).unwrap();
            assert!(out == data, "hint {hint}");
        }
        // The limit: exactly the size is fine, one less is too large, hint or not.
        assert_eq!(
            decompress(Compression::Zstd, &z, 0, Some(n), n, rs)
                .unwrap()
                .len(),
            n
        );
        for hint in [Some(n - 1), Some(n)] {
            let err = decompress(Compression::Zstd, &z, 5, hint, n - 1, rs).unwrap_err();
            assert!(
                matches!(err, ImageError::TooLarge { offset: 5, .. }),
                "{err}"
            );
        }
        // Half a stream with the right size field.
        let err = decompress(
            Compression::Zstd,
            &z[..z.len() / 2],
            0,
            Some(n),
            1 << 30,
            rs,
        )
        .unwrap_err();
        assert!(matches!(err, ImageError::Decompress { .. }), "{err}");
        // Damage inside the frame is an error, never a panic.
        let mut bad = z.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0xff;
        bad[mid + 1] ^= 0x55;
        let _ = decompress(Compression::Zstd, &bad, 0, Some(n), 1 << 30, rs);
        // Points are reached, and a cancel stops it.
        let mut r = Resched::none().with_interval(std::time::Duration::from_secs(3600));
        decompress(Compression::Zstd, &z, 0, Some(n), 1 << 30, &mut r).unwrap();
        assert!(
            r.stats().items + 1 >= (z.len() / ZSTD_IN_STEP) as u64,
            "{:?}",
            r.stats()
        );
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut r = Resched::none()
            .with_interval(std::time::Duration::from_micros(1))
            .with_cancel_flag(flag);
        let err = decompress(Compression::Zstd, &z, 0, Some(n), 1 << 30, &mut r).unwrap_err();
        assert!(matches!(err, ImageError::Cancelled), "{err}");
    }

    #[test]
    fn truncated_streams_are_errors() {
        let data = sample();
        let c = xz(&data);
        let err = decompress(
            Compression::Xz,
            &c[..c.len() / 2],
            0,
            None,
            1 << 30,
            &mut Resched::none(),
        )
        .unwrap_err();
        assert!(matches!(err, ImageError::Decompress { .. }), "{err}");
        let z = zstd::encode_all(&data[..], 3).unwrap();
        assert!(decompress(
            Compression::Zstd,
            &z[..z.len() / 2],
            0,
            None,
            1 << 30,
            &mut Resched::none()
        )
        .is_err());
        assert!(decompress(
            Compression::Lz4Legacy,
            &[2, 0x21, 0x4c],
            0,
            None,
            100,
            &mut Resched::none()
        )
        .is_err());
    }
}
