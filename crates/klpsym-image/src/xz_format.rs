//! The pieces of the XZ format a reader cutting a stream into blocks needs (the xz file format
//! 1.0.4): the stream header and footer, a block header's sizes, variable-length integers, and
//! the index and footer of a stream of one block, made to decode a block on its own; the
//! check of a stream's index and footer against its blocks.

use std::io::{self, BufRead};

use klpsym_resched::resched::Resched;

/// Decoded bytes handed out per read (from a block a worker decoded into the caller's buffer).
pub(crate) const COPY_STEP: usize = 16 << 10;

/// Compressed bytes read in per step: one page, so a step is at most one fault on the input's
/// pages and one on the block's buffer (`klpsym-bench resched` measured 16 KiB steps at up to
/// 0.8 ms on this project's VM, 5.7 page faults each on average).
pub(crate) const READ_STEP: usize = 4 << 10;

pub(crate) const HEADER_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
pub(crate) const FOOTER_MAGIC: [u8; 2] = *b"YZ";

pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(bytes);
    c.sum()
}

pub(crate) fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The size of a check field for check ID `id` (the xz file format 1.0.4, 3.4).
pub(crate) fn check_size(id: u8) -> u64 {
    [0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64][usize::from(id & 0x0f)]
}

/// Bytes of padding after `n` bytes, to a multiple of four.
pub(crate) fn pad4(n: u64) -> u64 {
    (4 - n % 4) % 4
}

/// A variable-length integer at `*at` of `b` (the xz file format 1.0.4, 1.2); `None` when cut
/// short, longer than 9 bytes or not in its shortest form.
pub(crate) fn vli(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..9 {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (i == 0 || byte != 0).then_some(v);
        }
    }
    None
}

pub(crate) fn vli_encode(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The stream flags of a 12-byte stream header, or what is wrong with it.
pub(crate) fn stream_flags(h: &[u8]) -> Result<[u8; 2], &'static str> {
    if h.len() < 12 || h[..6] != HEADER_MAGIC {
        return Err("no XZ stream header");
    }
    if crc32(&h[6..8]) != le32(&h[8..12]) {
        return Err("the stream header's CRC32 does not match");
    }
    if h[6] != 0 || h[7] & 0xf0 != 0 {
        return Err("unsupported stream flags");
    }
    Ok([h[6], h[7]])
}

/// A block header's sizes (the xz file format 1.0.4, 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    /// The header's own size, 8 to 1024 bytes.
    pub(crate) size: usize,
    pub(crate) compressed: Option<u64>,
    pub(crate) uncompressed: Option<u64>,
}

/// Reads a whole block header (its first byte tells its size); its filters are liblzma's to
/// check.
pub(crate) fn block_header(h: &[u8]) -> Result<BlockHeader, &'static str> {
    let size = (usize::from(h[0]) + 1) * 4;
    if h.len() < size {
        return Err("the block header is cut short");
    }
    if crc32(&h[..size - 4]) != le32(&h[size - 4..size]) {
        return Err("the block header's CRC32 does not match");
    }
    let flags = h[1];
    if flags & 0x3c != 0 {
        return Err("unsupported block flags");
    }
    let mut at = 2;
    let mut field = |present: bool| -> Result<Option<u64>, &'static str> {
        if !present {
            return Ok(None);
        }
        vli(&h[..size - 4], &mut at)
            .map(Some)
            .ok_or("a size in the block header is malformed")
    };
    let compressed = field(flags & 0x40 != 0)?;
    let uncompressed = field(flags & 0x80 != 0)?;
    if compressed == Some(0) {
        return Err("the block header gives a compressed size of 0");
    }
    Ok(BlockHeader {
        size,
        compressed,
        uncompressed,
    })
}

/// The stream header with `flags`.
pub(crate) fn stream_header(flags: [u8; 2]) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[..6].copy_from_slice(&HEADER_MAGIC);
    h[6..8].copy_from_slice(&flags);
    h[8..].copy_from_slice(&crc32(&flags).to_le_bytes());
    h
}

/// The index and footer of a stream with one block of `unpadded` and `uncompressed` bytes.
pub(crate) fn one_block_end(flags: [u8; 2], unpadded: u64, uncompressed: u64) -> Vec<u8> {
    let mut index = vec![0u8];
    vli_encode(1, &mut index);
    vli_encode(unpadded, &mut index);
    vli_encode(uncompressed, &mut index);
    index.resize(index.len() + pad4(index.len() as u64) as usize, 0);
    let crc = crc32(&index);
    index.extend_from_slice(&crc.to_le_bytes());
    let backward = (index.len() / 4 - 1) as u32;
    let mut footer = [0u8; 12];
    footer[4..8].copy_from_slice(&backward.to_le_bytes());
    footer[8..10].copy_from_slice(&flags);
    footer[10..].copy_from_slice(&FOOTER_MAGIC);
    let crc = crc32(&footer[4..10]);
    footer[..4].copy_from_slice(&crc.to_le_bytes());
    index.extend_from_slice(&footer);
    index
}

/// The largest compressed size a block of `uncompressed` bytes can have (LZMA2 stores what
/// does not compress in chunks of 64 KiB with a 3-byte header; other filters add less).
pub(crate) fn max_compressed(uncompressed: u64) -> u64 {
    uncompressed + uncompressed / 1024 + (64 << 10)
}

/// Malformed data, said by `what`.
pub(crate) fn data_error(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads `n` more bytes of `input` into `out`, [`READ_STEP`] at a time with a reschedule
/// point each; `Ok(false)` when the input ends first.
pub(crate) fn read_more(
    input: &mut dyn BufRead,
    out: &mut Vec<u8>,
    mut n: u64,
    resched: &mut Resched,
) -> io::Result<bool> {
    while n > 0 {
        resched.tick_step().map_err(io::Error::other)?;
        let avail = match input.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(false);
        }
        let k = avail.len().min(READ_STEP).min(n as usize);
        out.extend_from_slice(&avail[..k]);
        input.consume(k);
        n -= k as u64;
    }
    Ok(true)
}

/// Reads the index (its indicator byte read already, at offset `start` of the stream) and the
/// footer, and checks them against the blocks read, `records` (each one's unpadded and
/// uncompressed size), and the stream's `flags` (the xz file format 1.0.4, 2.1.2 and 4): the
/// offset after the footer.
pub(crate) fn check_end(
    input: &mut dyn BufRead,
    records: &[(u64, u64)],
    flags: [u8; 2],
    start: u64,
    resched: &mut Resched,
) -> io::Result<u64> {
    let bad = |what: String| data_error(format!("XZ stream: index at offset {start}: {what}"));
    let mut index = vec![0u8];
    // A number at a time: at most 9 bytes each.
    let mut next_vli = |index: &mut Vec<u8>, resched: &mut Resched| -> io::Result<u64> {
        let from = index.len();
        loop {
            if !read_more(input, index, 1, resched)? {
                return Err(bad("cut short".into()));
            }
            let last = index[index.len() - 1];
            if last & 0x80 == 0 || index.len() - from == 9 {
                break;
            }
        }
        let mut at = from;
        vli(index, &mut at).ok_or_else(|| bad("a malformed number".into()))
    };
    let count = next_vli(&mut index, resched)?;
    if count != records.len() as u64 {
        return Err(bad(format!(
            "lists {count} blocks, the stream holds {}",
            records.len()
        )));
    }
    for (i, &(unpadded, uncompressed)) in records.iter().enumerate() {
        let u = next_vli(&mut index, resched)?;
        let d = next_vli(&mut index, resched)?;
        if (u, d) != (unpadded, uncompressed) {
            return Err(bad(format!(
                "block {i}: {u} bytes stored and {d} decoded, the block's header says {unpadded} and {uncompressed}"
            )));
        }
    }
    let pad = pad4(index.len() as u64);
    if !read_more(input, &mut index, pad + 4, resched)? {
        return Err(bad("cut short".into()));
    }
    let body = index.len() - 4;
    if index[body - pad as usize..body].iter().any(|&b| b != 0) {
        return Err(bad("nonzero padding".into()));
    }
    if crc32(&index[..body]) != le32(&index[body..]) {
        return Err(bad("its CRC32 does not match".into()));
    }
    let mut footer = Vec::with_capacity(12);
    if !read_more(input, &mut footer, 12, resched)? {
        return Err(bad("the stream footer is cut short".into()));
    }
    let at = start + index.len() as u64;
    let bad_footer = |what: &str| data_error(format!("XZ stream: footer at offset {at}: {what}"));
    if footer[10..] != FOOTER_MAGIC {
        return Err(bad_footer("no YZ magic"));
    }
    if crc32(&footer[4..10]) != le32(&footer[..4]) {
        return Err(bad_footer("its CRC32 does not match"));
    }
    if (u64::from(le32(&footer[4..8])) + 1) * 4 != index.len() as u64 {
        return Err(bad_footer("its backward size is not the index's"));
    }
    if footer[8..10] != flags {
        return Err(bad_footer("its stream flags are not the header's"));
    }
    Ok(at + 12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_one_block_ends_follow_the_format() {
        for v in [0u64, 1, 127, 128, 300, 1 << 40, (1 << 63) - 1] {
            let mut b = Vec::new();
            vli_encode(v, &mut b);
            let mut at = 0;
            assert_eq!(vli(&b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        // Not the shortest form, cut short.
        assert_eq!(vli(&[0x80, 0x00], &mut 0), None);
        assert_eq!(vli(&[0x80], &mut 0), None);
        let flags = [0, 4];
        let h = stream_header(flags);
        assert_eq!(stream_flags(&h), Ok(flags));
        let end = one_block_end(flags, 1234, 65536);
        assert_eq!(end.len() % 4, 0);
        assert_eq!(&end[end.len() - 2..], b"YZ");
    }
}
