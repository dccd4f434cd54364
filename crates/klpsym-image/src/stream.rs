//! Decompressing readers for archives' compressed members (a package's `data.tar.xz`, an RPM's
//! payload), read through `std::io::Read` by archive crates: each `read` produces at most
//! [`STEP`](crate::codecs::STEP) bytes and is a reschedule point, and the total output is
//! bounded, as for kernel payloads.

use std::io::{self, BufRead, Read};

use klpsym_resched::resched::{Cancelled, Resched};

use crate::codecs::STEP;
use crate::Compression;

/// A decompressing reader over a compressed stream, in memory or read as it goes (a package
/// streamed from its file: never held whole). Errors are `io::Error`s;
/// a cancelled reschedule point is one whose inner error is [`Cancelled`] (see
/// [`is_cancelled`]); output past the limit is an `InvalidData` error saying so.
pub struct StreamDecoder<'a, 'r> {
    inner: Inner<'a>,
    resched: &'r mut Resched,
    limit: u64,
    produced: u64,
}

impl std::fmt::Debug for StreamDecoder<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("limit", &self.limit)
            .field("produced", &self.produced)
            .finish()
    }
}

enum Inner<'a> {
    Plain(&'a [u8]),
    Xz {
        dec: Option<crate::xz::Decoder>,
        input: XzInput<'a>,
    },
    /// A stream of many blocks decoded on worker threads (`xz_blocks.rs`).
    XzBlocks(Box<crate::xz_blocks::BlockReader<'a>>),
    Other(Box<dyn Read + 'a>),
}

/// The decoder of an archive's `compression` read through its library's reader: gzip, bzip2
/// and zstd (XZ and LZMA have decoders of their own here; LZ4 and LZO, kernel-image codecs,
/// never compress an archive).
fn library_decoder<'a, R: BufRead + 'a>(
    compression: Compression,
    input: R,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match compression {
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(input)?;
            d.window_log_max(31)?;
            Box::new(d)
        }
        c => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{c} is not used by archives"),
            ))
        }
    })
}

/// Where an XZ stream's compressed bytes come from.
enum XzInput<'a> {
    Slice(&'a [u8]),
    Reader(Box<dyn BufRead + 'a>),
}

/// True when `e` is a cancelled reschedule point passed through `Read`.
pub fn is_cancelled(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<Cancelled>())
}

impl<'a, 'r> StreamDecoder<'a, 'r> {
    /// A reader of `input` decompressed with `compression` (`None`: stored as is), at most
    /// `limit` bytes of output.
    pub fn new(
        compression: Option<Compression>,
        input: &'a [u8],
        limit: u64,
        resched: &'r mut Resched,
    ) -> io::Result<StreamDecoder<'a, 'r>> {
        let other = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let inner = match compression {
            None => Inner::Plain(input),
            Some(Compression::Xz) => Inner::Xz {
                dec: Some(crate::xz::Decoder::new(crate::xz::Kind::Xz).map_err(other)?),
                input: XzInput::Slice(input),
            },
            Some(Compression::Lzma) => Inner::Xz {
                dec: Some(crate::xz::Decoder::new(crate::xz::Kind::Lzma).map_err(other)?),
                input: XzInput::Slice(input),
            },
            Some(c) => Inner::Other(library_decoder(c, input)?),
        };
        Ok(StreamDecoder {
            inner,
            resched,
            limit,
            produced: 0,
        })
    }

    /// A reader of what `input` gives, decompressed with `compression` (`None`: stored as
    /// is), at most `limit` bytes of output: the compressed bytes are read as they are needed,
    /// a buffer at a time.
    ///
    /// An XZ stream of blocks whose headers give their sizes (as a multithreaded `xz` writes
    /// them) is decoded a block per worker thread, as many workers as CPUs (at most three in
    /// the process, shared by every such reader; none with one CPU), and read in order.
    pub fn from_reader(
        compression: Option<Compression>,
        input: Box<dyn BufRead + 'a>,
        limit: u64,
        resched: &'r mut Resched,
    ) -> io::Result<StreamDecoder<'a, 'r>> {
        let workers = crate::xz_blocks::workers();
        StreamDecoder::from_reader_workers(compression, input, limit, resched, workers)
    }

    /// [`StreamDecoder::from_reader`] with at most `workers` workers for an XZ stream's
    /// blocks (fewer than two: decoded serially).
    pub(crate) fn from_reader_workers(
        compression: Option<Compression>,
        input: Box<dyn BufRead + 'a>,
        limit: u64,
        resched: &'r mut Resched,
        workers: usize,
    ) -> io::Result<StreamDecoder<'a, 'r>> {
        let other = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let xz = |kind, input| -> io::Result<Inner<'a>> {
            Ok(Inner::Xz {
                dec: Some(crate::xz::Decoder::new(kind).map_err(other)?),
                input: XzInput::Reader(input),
            })
        };
        let inner = match compression {
            None => Inner::Other(input),
            Some(Compression::Xz) => match crate::xz_blocks::open(input, workers, resched)? {
                crate::xz_blocks::Opened::Blocks(b) => Inner::XzBlocks(b),
                crate::xz_blocks::Opened::Serial(input) => xz(crate::xz::Kind::Xz, input)?,
            },
            Some(Compression::Lzma) => xz(crate::xz::Kind::Lzma, input)?,
            Some(c) => Inner::Other(library_decoder(c, input)?),
        };
        Ok(StreamDecoder {
            inner,
            resched,
            limit,
            produced: 0,
        })
    }

    /// Bytes produced so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// Ends the stream here, read to its end or not, giving the decoder's memory back in
    /// steps (an XZ dictionary is megabytes: dropped, it is freed at once).
    pub fn close(self) -> Result<(), klpsym_resched::Cancelled> {
        let StreamDecoder { inner, resched, .. } = self;
        match inner {
            Inner::Xz { dec: Some(d), .. } => d.finish(resched)?,
            Inner::XzBlocks(b) => b.close(resched)?,
            _ => {}
        }
        Ok(())
    }
}

impl Read for StreamDecoder<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.resched.tick_step().map_err(io::Error::other)?;
        let serial = buf.len().min(STEP);
        let got = match &mut self.inner {
            // Copies of blocks decoded already: bigger steps.
            Inner::XzBlocks(b) => b.read(buf, self.resched)?,
            inner => step_read(inner, &mut buf[..serial], self.resched)?,
        };
        self.produced += got as u64;
        if self.produced > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("decompresses to more than {} bytes", self.limit),
            ));
        }
        Ok(got)
    }
}

/// One step of `inner` into `buf` (at most [`STEP`] bytes, cut by the caller).
fn step_read(inner: &mut Inner<'_>, buf: &mut [u8], resched: &mut Resched) -> io::Result<usize> {
    match inner {
        Inner::Plain(rest) => {
            let k = rest.len().min(buf.len());
            buf[..k].copy_from_slice(&rest[..k]);
            *rest = &rest[k..];
            Ok(k)
        }
        Inner::Xz { dec, input } => {
            let Some(d) = dec.as_mut() else {
                return Ok(0);
            };
            let mut got = 0;
            // A step may consume input without output (block headers): go on until some
            // output or the end.
            while got == 0 {
                let avail: &[u8] = match input {
                    XzInput::Slice(s) => s,
                    XzInput::Reader(r) => r.fill_buf()?,
                };
                let step = d
                    .step(avail, buf, resched)
                    .map_err(io::Error::other)?
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                match input {
                    XzInput::Slice(s) => *s = &s[step.consumed..],
                    XzInput::Reader(r) => r.consume(step.consumed),
                }
                got = step.produced;
                if step.stream_end {
                    if let Some(d) = dec.take() {
                        d.finish(resched).map_err(io::Error::other)?;
                    }
                    break;
                }
                if step.consumed == 0 && step.produced == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "XZ stream ends without its end marker",
                    ));
                }
            }
            Ok(got)
        }
        Inner::Other(r) => r.read(buf),
        Inner::XzBlocks(b) => b.read(buf, resched),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn roundtrip(c: Option<Compression>, data: &[u8]) -> Vec<u8> {
        let enc: Vec<u8> = match c {
            None => data.to_vec(),
            Some(Compression::Xz) => {
                let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Some(Compression::Gzip) => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Some(Compression::Zstd) => zstd::encode_all(data, 3).unwrap(),
            Some(Compression::Bzip2) => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            _ => unreachable!(),
        };
        if c.is_some() {
            assert_eq!(crate::sniff_compression(&enc), c);
        }
        let mut rs = Resched::none();
        let mut d = StreamDecoder::new(c, &enc, 1 << 30, &mut rs).unwrap();
        let mut out = Vec::new();
        d.read_to_end(&mut out).unwrap();
        // The same read as it goes, through a small buffer (a package streamed from its file).
        let mut rs = Resched::none();
        let input = Box::new(io::BufReader::with_capacity(4096, &enc[..]));
        let mut d = StreamDecoder::from_reader(c, input, 1 << 30, &mut rs).unwrap();
        let mut streamed = Vec::new();
        d.read_to_end(&mut streamed).unwrap();
        assert_eq!(streamed, out, "{c:?} from a reader");
        out
    }

    #[test]
    fn every_archive_compression_round_trips_in_steps() {
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in [
            None,
            Some(Compression::Xz),
            Some(Compression::Gzip),
            Some(Compression::Zstd),
            Some(Compression::Bzip2),
        ] {
            assert_eq!(roundtrip(c, &data), data, "{c:?}");
        }
    }

    #[test]
    fn the_limit_holds_for_blocks_decoded_on_workers() {
        // A threaded xz's stream of 64 KiB blocks (xz_blocks.rs).
        let data: Vec<u8> = (0..500_000u32)
            .flat_map(|i| (i % 1021).to_le_bytes())
            .collect();
        let stream = xz2::stream::MtStreamBuilder::new()
            .threads(2)
            .block_size(64 << 10)
            .preset(1)
            .encoder()
            .unwrap();
        let mut e = xz2::write::XzEncoder::new_stream(Vec::new(), stream);
        e.write_all(&data).unwrap();
        let enc = e.finish().unwrap();
        for (limit, whole) in [(100_000, false), (1 << 30, true)] {
            let mut rs = Resched::none();
            let input = Box::new(&enc[..]);
            let mut d =
                StreamDecoder::from_reader_workers(Some(Compression::Xz), input, limit, &mut rs, 2)
                    .unwrap();
            assert!(matches!(d.inner, Inner::XzBlocks(_)));
            let mut out = Vec::new();
            match d.read_to_end(&mut out) {
                Ok(_) => assert!(whole && out == data),
                Err(e) => assert!(!whole && e.to_string().contains("more than 100000"), "{e}"),
            }
            d.close().unwrap();
        }
    }

    #[test]
    fn output_past_the_limit_and_truncated_streams_are_errors() {
        let data = vec![7u8; 100_000];
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
        e.write_all(&data).unwrap();
        let enc = e.finish().unwrap();
        let mut rs = Resched::none();
        let mut d = StreamDecoder::new(Some(Compression::Xz), &enc, 10_000, &mut rs).unwrap();
        let err = d.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("more than 10000"), "{err}");
        let mut rs = Resched::none();
        let cut = &enc[..enc.len() / 2];
        let mut d = StreamDecoder::new(Some(Compression::Xz), cut, 1 << 20, &mut rs).unwrap();
        assert!(d.read_to_end(&mut Vec::new()).is_err());
    }
}
