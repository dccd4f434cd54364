//! A package is read to its end before its answers count: a file cut short (a download that
//! stopped at 30 of 70 MB) must not answer as if whole because what was asked for lay in its
//! first part. Where reading stops early, the rest of the compressed member is read as it is
//! stored (not decompressed: a `-dbg` package holds gigabytes of debug modules after its
//! vmlinux) and its compression's own end is checked from its bytes: XZ's stream footer (magic
//! `YZ`, its CRC32, the stream flags of the header) and its index's CRC32; zstd's frames
//! walked block by block (each block header gives its length) to the last block of the last
//! frame and its checksum. Any other compression (gzip, bzip2, LZMA) has no end a reader can
//! find without decoding, so its stream is decoded to its end. The archive's own end is
//! checked as well: a `.deb`'s `ar` member reaches the size its header gives, a tar its end
//! blocks (when its stream is decoded to the end), an RPM its signature header's size and the
//! cpio trailer.

use std::io::{self, Read};

use klpsym_image::Compression;

use crate::input::Input;
use klpsym_resched::resched::Resched;

/// How many of the last bytes of a member are kept: an XZ index with thousands of blocks
/// fits.
const TAIL: usize = 256 << 10;

/// Bytes read per step when what is left of a member is read through: 32 KiB (256 KiB, a
/// read and a copy of it into the tail, were stretches of 0.6-0.75 ms in a quarter of the
/// steps, `klpsym-bench resched` on the 6.1 image package, 2026-12-07).
const STEP: usize = 32 << 10;

/// A reader of an archive's compressed member that sees every byte read from it: how many,
/// the first and the last ones, and the structure of zstd frames.
pub(crate) struct Probe<R> {
    inner: R,
    seen: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
    zstd: ZstdWalk,
}

impl<R: Input> Probe<R> {
    pub(crate) fn new(inner: R) -> Probe<R> {
        Probe {
            inner,
            seen: 0,
            head: Vec::with_capacity(16),
            tail: Vec::new(),
            zstd: ZstdWalk::default(),
        }
    }

    /// Bytes read through so far.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }

    /// Reads what is left of the member through (and drops it), a step at a time with a
    /// reschedule point each. When its end is to be checked from its last bytes
    /// (`end_in_tail`: an XZ stream's, see [`Probe::check_end`]) and the input can, the bytes
    /// before the last [`TAIL`] are passed over instead: never decoded, they need not be read
    /// (the rest of a `-dbg` package is a gigabyte).
    pub(crate) fn read_through(
        &mut self,
        end_in_tail: bool,
        resched: &mut Resched,
    ) -> io::Result<()> {
        if end_in_tail {
            if let Some(left) = self.inner.remaining() {
                let passed = self.inner.pass_over(left.saturating_sub(TAIL as u64))?;
                if passed > 0 {
                    // What the tail held is no longer next to what comes.
                    self.tail.clear();
                    self.seen += passed;
                }
            }
        }
        let mut buf = vec![0u8; STEP];
        loop {
            resched.tick_step().map_err(io::Error::other)?;
            match self.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether the bytes read so far end as a `compression` stream ends: `Err` says what is
    /// missing.
    pub(crate) fn check_end(&self, compression: Option<Compression>) -> Result<(), String> {
        match compression {
            Some(Compression::Xz) => xz_end(&self.head, &self.tail),
            Some(Compression::Zstd) => self.zstd.end(),
            Some(c) => Err(format!("{c}: its end is only found by decoding it")),
            None => Err("an uncompressed archive's end is found by reading it".into()),
        }
    }
}

impl<R: Read> Read for Probe<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        self.seen += n as u64;
        if self.head.len() < 16 {
            let k = (16 - self.head.len()).min(n);
            self.head.extend_from_slice(&got[..k]);
        }
        if n >= TAIL {
            self.tail.clear();
            self.tail.extend_from_slice(&got[n - TAIL..]);
        } else {
            self.tail.extend_from_slice(got);
            if self.tail.len() > 2 * TAIL {
                let cut = self.tail.len() - TAIL;
                self.tail.drain(..cut);
            }
        }
        self.zstd.feed(got);
        Ok(n)
    }
}

/// Whether a compression's end can be checked from its stored bytes, without decoding (the
/// others are decoded to their end, the archive read to its end marker).
pub(crate) fn end_in_bytes(compression: Option<Compression>) -> bool {
    matches!(compression, Some(Compression::Xz | Compression::Zstd))
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// An XZ stream's end (the xz file format 1.0.4, 2.1.2 and 4): after optional stream
/// padding (null bytes in fours), the stream footer: the CRC32 of the backward size and the
/// stream flags, the backward size, the flags (those of the stream header), `YZ`; before it
/// the index, starting with its indicator (0x00) and ending with its own CRC32.
fn xz_end(head: &[u8], tail: &[u8]) -> Result<(), String> {
    let mut end = tail.len();
    while end >= 4 && tail[end - 4..end] == [0, 0, 0, 0] {
        end -= 4;
    }
    let t = &tail[..end];
    if t.len() < 12 || &t[t.len() - 2..] != b"YZ" {
        return Err("the XZ stream ends without its footer (magic YZ): the data is cut".into());
    }
    let footer = &t[t.len() - 12..];
    if crc32fast::hash(&footer[4..10]) != le32(&footer[..4]) {
        return Err("the XZ stream footer's CRC32 does not match it".into());
    }
    if head.len() >= 8 && head[6..8] != footer[8..10] {
        return Err("the XZ stream footer's flags are not those of its header".into());
    }
    let index_len = (u64::from(le32(&footer[4..8])) + 1) * 4;
    let Some(index_at) = (t.len() as u64 - 12).checked_sub(index_len) else {
        return Err(format!(
            "the XZ stream's index ({index_len} bytes) does not fit before its footer"
        ));
    };
    // An index longer than what was kept is left at its footer's word.
    if let Some(index) = usize::try_from(index_at).ok().map(|i| &t[i..t.len() - 12]) {
        let (body, crc) = index.split_at(index.len() - 4);
        if body.first() != Some(&0) || crc32fast::hash(body) != le32(crc) {
            return Err("the XZ stream's index is damaged (indicator or CRC32)".into());
        }
    }
    Ok(())
}

/// Where a walk of zstd frames is (RFC 8878, 3.1): between frames, or in a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ZstdState {
    /// Reading a frame's magic (4 bytes): between frames.
    #[default]
    Magic,
    /// Reading the frame header descriptor (1 byte).
    Descriptor,
    /// Reading a skippable frame's size (4 bytes).
    SkippableSize,
    /// Reading a block header (3 bytes).
    BlockHeader,
    /// Skipping bytes, then what [`ZstdWalk::after`] says.
    Skip,
    /// Not a zstd stream, or a malformed one.
    Broken,
}

/// What comes after bytes skipped in a zstd stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum After {
    /// A block header.
    #[default]
    Block,
    /// The 4-byte content checksum, then the frame's end.
    Checksum,
    /// The end of a frame (or of a skippable frame): a magic, or the stream's end.
    FrameEnd,
}

/// The frames of a zstd stream walked as its bytes pass, without decoding: each header and
/// block header says how many bytes follow it.
#[derive(Debug, Default)]
pub(crate) struct ZstdWalk {
    state: ZstdState,
    /// The bytes of the field being read.
    field: [u8; 4],
    have: usize,
    /// Bytes left to skip in [`ZstdState::Skip`].
    skip: u64,
    after: After,
    /// The frame has a content checksum (4 bytes after its last block).
    checksum: bool,
    /// Frames ended.
    frames: u64,
    why: Option<&'static str>,
}

impl ZstdWalk {
    fn field_len(&self) -> usize {
        match self.state {
            ZstdState::Magic | ZstdState::SkippableSize => 4,
            ZstdState::Descriptor => 1,
            ZstdState::BlockHeader => 3,
            ZstdState::Skip | ZstdState::Broken => 0,
        }
    }

    fn broken(&mut self, why: &'static str) {
        self.state = ZstdState::Broken;
        self.why = Some(why);
    }

    fn feed(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            match self.state {
                ZstdState::Broken => return,
                ZstdState::Skip => {
                    let k = self.skip.min(b.len() as u64);
                    self.skip -= k;
                    b = &b[k as usize..];
                    if self.skip == 0 {
                        self.skipped();
                    }
                }
                _ => {
                    let need = self.field_len() - self.have;
                    let k = need.min(b.len());
                    self.field[self.have..self.have + k].copy_from_slice(&b[..k]);
                    self.have += k;
                    b = &b[k..];
                    if self.have == self.field_len() {
                        self.have = 0;
                        self.field_done();
                    }
                }
            }
        }
    }

    /// Skips `n` bytes, then goes on as `after` says.
    fn skip_then(&mut self, n: u64, after: After) {
        self.after = after;
        self.skip = n;
        self.state = ZstdState::Skip;
        if n == 0 {
            self.skipped();
        }
    }

    fn skipped(&mut self) {
        match self.after {
            After::Block => self.state = ZstdState::BlockHeader,
            After::Checksum => self.skip_then(4, After::FrameEnd),
            After::FrameEnd => {
                self.frames += 1;
                self.state = ZstdState::Magic;
            }
        }
    }

    fn field_done(&mut self) {
        let f = self.field;
        match self.state {
            ZstdState::Magic => match le32(&f) {
                0xFD2F_B528 => self.state = ZstdState::Descriptor,
                m if m & 0xFFFF_FFF0 == 0x184D_2A50 => self.state = ZstdState::SkippableSize,
                _ => self.broken("a zstd frame does not start with its magic"),
            },
            // A skippable frame: its content, then the next frame.
            ZstdState::SkippableSize => self.skip_then(u64::from(le32(&f)), After::FrameEnd),
            ZstdState::Descriptor => {
                let d = f[0];
                if d & 0x08 != 0 {
                    return self.broken("a zstd frame header's reserved bit is set");
                }
                let single = d & 0x20 != 0;
                self.checksum = d & 0x04 != 0;
                let window = u64::from(!single);
                let dict = [0, 1, 2, 4][usize::from(d & 3)];
                let fcs = match d >> 6 {
                    0 => u64::from(single),
                    1 => 2,
                    2 => 4,
                    _ => 8,
                };
                self.skip_then(window + dict + fcs, After::Block);
            }
            ZstdState::BlockHeader => {
                let h = u32::from(f[0]) | u32::from(f[1]) << 8 | u32::from(f[2]) << 16;
                let after = match (h & 1 != 0, self.checksum) {
                    (false, _) => After::Block,
                    (true, true) => After::Checksum,
                    (true, false) => After::FrameEnd,
                };
                let size = u64::from(h >> 3);
                match (h >> 1) & 3 {
                    // Raw and compressed blocks store `size` bytes; an RLE block one.
                    0 | 2 => self.skip_then(size, after),
                    1 => self.skip_then(1, after),
                    _ => self.broken("a zstd block of the reserved type"),
                }
            }
            ZstdState::Skip | ZstdState::Broken => {}
        }
    }

    /// Whether the bytes walked end where a frame ends (after at least one frame).
    fn end(&self) -> Result<(), String> {
        if let Some(why) = self.why {
            return Err(why.to_string());
        }
        if self.state == ZstdState::Magic && self.have == 0 && self.frames > 0 {
            Ok(())
        } else {
            Err(
                "the zstd stream ends inside a frame (before its last block): the data is cut"
                    .into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn data() -> Vec<u8> {
        (0..400_000u32)
            .flat_map(|i| (i.wrapping_mul(2_654_435_761) % 97).to_le_bytes())
            .collect()
    }

    fn probed(bytes: &[u8], chunk: usize) -> Probe<&[u8]> {
        let mut p = Probe::new(bytes);
        let mut buf = vec![0u8; chunk];
        while p.read(&mut buf).unwrap() > 0 {}
        p
    }

    #[test]
    fn an_xz_stream_ends_with_its_footer_and_a_cut_one_does_not() {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(&data()).unwrap();
        let whole = e.finish().unwrap();
        assert_eq!(
            probed(&whole, 4096).check_end(Some(Compression::Xz)),
            Ok(())
        );
        // Stream padding is allowed after the footer.
        let mut padded = whole.clone();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(
            probed(&padded, 999).check_end(Some(Compression::Xz)),
            Ok(())
        );
        for cut in [whole.len() / 3, whole.len() - 1, whole.len() - 13] {
            let e = probed(&whole[..cut], 4096).check_end(Some(Compression::Xz));
            assert!(e.is_err(), "cut at {cut} of {}", whole.len());
        }
        let mut bad = whole.clone();
        let n = bad.len();
        bad[n - 14] ^= 1; // the index's CRC32
        assert!(probed(&bad, 4096).check_end(Some(Compression::Xz)).is_err());
    }

    /// A buffer that counts the bytes read from it (passed-over ones are not).
    struct Counting<'a> {
        left: &'a [u8],
        read: usize,
    }

    impl Read for Counting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.left.read(buf)?;
            self.read += n;
            Ok(n)
        }
    }

    impl Input for Counting<'_> {
        fn remaining(&mut self) -> Option<u64> {
            self.left.remaining()
        }

        fn pass_over(&mut self, n: u64) -> io::Result<u64> {
            self.left.pass_over(n)
        }
    }

    /// An XZ stream's rest is passed over to its last bytes, and its end is judged from them as
    /// when every byte is read: whole, cut anywhere, or with a damaged index.
    #[test]
    fn an_xz_stream_s_rest_is_passed_over_and_its_end_judged_the_same() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..3_000_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(&noise).unwrap();
        let whole = e.finish().unwrap();
        assert!(whole.len() > 4 * TAIL, "{} bytes", whole.len());
        let mut bad = whole.clone();
        let n = bad.len();
        bad[n - 14] ^= 1;
        let cases: [(&[u8], bool); 4] = [
            (&whole, true),
            (&whole[..whole.len() - 1], false),
            (&whole[..whole.len() / 2], false),
            (&bad, false),
        ];
        for (bytes, whole_stream) in cases {
            for pass in [true, false] {
                let mut input = Counting {
                    left: bytes,
                    read: 0,
                };
                let mut p = Probe::new(&mut input);
                // The start read, as a decoder that stopped early reads it.
                let mut buf = vec![0u8; 100_000];
                p.read_exact(&mut buf).unwrap();
                p.read_through(pass, &mut Resched::none()).unwrap();
                assert_eq!(p.seen(), bytes.len() as u64);
                let end = p.check_end(Some(Compression::Xz));
                assert_eq!(
                    end.is_ok(),
                    whole_stream,
                    "{} bytes, pass {pass}: {end:?}",
                    bytes.len()
                );
                drop(p);
                if pass {
                    assert!(input.read <= 100_000 + TAIL, "{} read", input.read);
                } else {
                    assert_eq!(input.read, bytes.len());
                }
            }
        }
    }

    #[test]
    fn zstd_frames_are_walked_to_their_end_in_any_chunking() {
        let d = data();
        for level in [1, 19] {
            let mut whole = zstd::encode_all(&d[..], level).unwrap();
            // A second frame with a content checksum, and a skippable frame between.
            whole.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
            let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            enc.include_checksum(true).unwrap();
            enc.write_all(&d[..5000]).unwrap();
            whole.extend_from_slice(&enc.finish().unwrap());
            for chunk in [1, 7, 4096, 1 << 20] {
                assert_eq!(
                    probed(&whole, chunk).check_end(Some(Compression::Zstd)),
                    Ok(()),
                    "level {level}, chunk {chunk}"
                );
            }
            let mut cuts = 0;
            for cut in (1..whole.len()).step_by(whole.len() / 50) {
                if probed(&whole[..cut], 4096)
                    .check_end(Some(Compression::Zstd))
                    .is_err()
                {
                    cuts += 1;
                }
            }
            // Every cut but one landing exactly between two frames is found.
            assert!(cuts >= 48, "{cuts} of 50 cuts found");
        }
        assert!(probed(b"not zstd at all", 4)
            .check_end(Some(Compression::Zstd))
            .is_err());
    }
}
