//! A package's bytes as the readers take them: in order, and — where the input is a file or a
//! buffer — passed over without being read. What a package holds after what was asked for (a
//! `-dbg` package's gigabyte of debug modules after its vmlinux) is never decoded; an XZ
//! stream's end is found in its last bytes (`end.rs`), so the bytes before them need not be
//! read either: reading them through was hundreds of megabytes copied for nothing, in steps
//! each a kernel copy of its own.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, Take};

/// Bytes read in order, some of which can be passed over.
pub(crate) trait Input: Read {
    /// How many bytes are left, when the input knows (a file: its length less the position;
    /// a buffer: its length).
    fn remaining(&mut self) -> Option<u64> {
        None
    }

    /// Passes over at most `n` of the bytes left without reading them; how many were passed
    /// (0 where the input cannot: a stream is read).
    fn pass_over(&mut self, _n: u64) -> io::Result<u64> {
        Ok(0)
    }
}

impl<T: Input + ?Sized> Input for &mut T {
    fn remaining(&mut self) -> Option<u64> {
        (**self).remaining()
    }

    fn pass_over(&mut self, n: u64) -> io::Result<u64> {
        (**self).pass_over(n)
    }
}

impl Input for &[u8] {
    fn remaining(&mut self) -> Option<u64> {
        Some(self.len() as u64)
    }

    fn pass_over(&mut self, n: u64) -> io::Result<u64> {
        let k = usize::try_from(n).unwrap_or(usize::MAX).min(self.len());
        *self = &self[k..];
        Ok(k as u64)
    }
}

/// A package file, read a buffer at a time.
impl Input for BufReader<File> {
    fn remaining(&mut self) -> Option<u64> {
        let len = self.get_ref().metadata().ok()?.len();
        let at = self.stream_position().ok()?;
        Some(len.saturating_sub(at))
    }

    fn pass_over(&mut self, n: u64) -> io::Result<u64> {
        // Never past the file's end: what is not there is not passed (a file cut short is
        // then found short by the reads that follow).
        let n = n.min(self.remaining().unwrap_or(0));
        self.seek_relative(i64::try_from(n).map_err(io::Error::other)?)?;
        Ok(n)
    }
}

/// A reader with no way to pass over bytes (a pipe, a caller's reader): read through.
pub(crate) struct Stream<'a>(pub(crate) &'a mut dyn Read);

impl Read for Stream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Input for Stream<'_> {}

/// An archive member: the input limited to its size.
impl<R: Input> Input for Take<R> {
    fn remaining(&mut self) -> Option<u64> {
        let limit = self.limit();
        self.get_mut().remaining().map(|r| r.min(limit))
    }

    fn pass_over(&mut self, n: u64) -> io::Result<u64> {
        let limit = self.limit();
        let passed = self.get_mut().pass_over(n.min(limit))?;
        self.set_limit(limit - passed);
        Ok(passed)
    }
}

/// The input after its first bytes were read to tell the format: those bytes first.
pub(crate) struct Headed<'a> {
    pub(crate) head: &'a [u8],
    pub(crate) rest: &'a mut dyn Input,
}

impl Read for Headed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.head.is_empty() {
            return self.rest.read(buf);
        }
        self.head.read(buf)
    }
}

impl Input for Headed<'_> {
    fn remaining(&mut self) -> Option<u64> {
        let rest = self.rest.remaining()?;
        Some(rest + self.head.len() as u64)
    }

    fn pass_over(&mut self, n: u64) -> io::Result<u64> {
        let from_head = self.head.pass_over(n)?;
        Ok(from_head + self.rest.pass_over(n - from_head)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_passes_over_no_more_than_it_holds_and_reads_on_from_there() {
        let bytes: Vec<u8> = (0..100u8).collect();
        let mut outer: &[u8] = &bytes;
        let mut headed = Headed {
            head: &[200, 201],
            rest: &mut outer,
        };
        assert_eq!(headed.remaining(), Some(102));
        let mut b = [0u8; 3];
        {
            let mut member = Read::take(&mut headed as &mut dyn Input, 50);
            assert_eq!(member.remaining(), Some(50));
            // Past the head, into the rest.
            assert_eq!(member.pass_over(5).unwrap(), 5);
            member.read_exact(&mut b).unwrap();
            assert_eq!(b, [3, 4, 5]);
            // Never past the member's end.
            assert_eq!(member.pass_over(1000).unwrap(), 42);
            assert_eq!(member.remaining(), Some(0));
            assert_eq!(member.read(&mut b).unwrap(), 0);
        }
        // The input goes on after the member.
        assert_eq!(headed.remaining(), Some(52));
        headed.read_exact(&mut b).unwrap();
        assert_eq!(b, [48, 49, 50]);
    }

    #[test]
    fn a_file_passes_over_up_to_its_end_only() {
        let p = std::env::temp_dir().join(format!("klpsym-input-{}", std::process::id()));
        std::fs::write(&p, (0..=255u8).cycle().take(300_000).collect::<Vec<u8>>()).unwrap();
        let mut r = BufReader::with_capacity(4096, File::open(&p).unwrap());
        let mut b = [0u8; 10];
        r.read_exact(&mut b).unwrap();
        assert_eq!(r.remaining(), Some(299_990));
        assert_eq!(r.pass_over(100_000).unwrap(), 100_000);
        r.read_exact(&mut b[..1]).unwrap();
        assert_eq!(b[0], (100_010 % 256) as u8);
        assert_eq!(r.pass_over(u64::MAX).unwrap(), 199_989);
        assert_eq!(r.read(&mut b).unwrap(), 0);
        // A stream passes nothing.
        let mut s = Stream(&mut r);
        assert_eq!(s.pass_over(5).unwrap(), 0);
        assert_eq!(s.remaining(), None);
        std::fs::remove_file(&p).unwrap();
    }
}
