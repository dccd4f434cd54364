//! BTF, the kernel's own type information (Documentation/bpf/btf.rst): what
//! `/sys/kernel/btf/vmlinux` holds and what an image's or a vmlinux's `.BTF` section holds: a
//! 24-byte header (magic 0xeB9F, version, flags, hdr_len, type_off/len, str_off/len relative to
//! the header's end), a type section of variable-length records (12-byte `btf_type` and a
//! kind-specific tail), and a string section. Only what is needed to find structs and their
//! members is decoded; every record is bounds-checked and unknown kinds stop the walk with an
//! error (their length is unknown). No I/O.

use klpsym_resched::resched::{Cancelled, Resched};
use klpsym_resched::ChunkedFinder;

/// Why BTF could not give the layouts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    /// Not BTF, or broken.
    #[error("BTF: {0}")]
    Malformed(String),
    /// A struct or member the kernel always has is missing (CONFIG_LIVEPATCH off?).
    #[error("BTF has no {0} (is CONFIG_LIVEPATCH enabled on the target?)")]
    Missing(String),
    /// A reschedule point was cancelled.
    #[error("operation cancelled")]
    Cancelled,
}

impl From<Cancelled> for BtfError {
    fn from(_: Cancelled) -> Self {
        BtfError::Cancelled
    }
}

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;

struct Reader<'a> {
    d: &'a [u8],
    be: bool,
}

impl Reader<'_> {
    fn u32(&self, at: usize) -> Result<u32, BtfError> {
        let b = self
            .d
            .get(at..at + 4)
            .ok_or_else(|| BtfError::Malformed(format!("read past the end at {at:#x}")))?;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if self.be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
}

/// A struct found in BTF: size and members (name, byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfStruct {
    /// `sizeof`.
    pub size: u64,
    /// Members with their byte offsets (bitfields at their containing byte).
    pub members: Vec<(String, u64)>,
}

impl BtfStruct {
    /// The byte offset of member `m` of struct `sname`, or the error naming it.
    pub fn offset(&self, sname: &str, m: &str) -> Result<u64, BtfError> {
        self.members
            .iter()
            .find(|(n, _)| n == m)
            .map(|(_, o)| *o)
            .ok_or_else(|| BtfError::Missing(format!("{sname}.{m}")))
    }
}

/// Finds the structs named in `wanted` (first definition of each).
pub fn find_structs(btf: &[u8], wanted: &[&str]) -> Result<Vec<Option<BtfStruct>>, BtfError> {
    find_structs_with(btf, wanted, &mut Resched::none())
}

/// [`find_structs`] reaching a reschedule point through `resched` per type record (a
/// kernel's BTF has over a hundred thousand: a millisecond and more in one stretch
/// otherwise); a cancelled point ends it with [`BtfError::Cancelled`].
pub fn find_structs_with(
    btf: &[u8],
    wanted: &[&str],
    resched: &mut Resched,
) -> Result<Vec<Option<BtfStruct>>, BtfError> {
    if btf.len() < 24 {
        return Err(BtfError::Malformed("shorter than its header".into()));
    }
    let be = match u16::from_le_bytes([btf[0], btf[1]]) {
        BTF_MAGIC => false,
        0x9feb => true,
        m => return Err(BtfError::Malformed(format!("bad magic {m:#06x}"))),
    };
    let r = Reader { d: btf, be };
    let hdr_len = r.u32(4)? as usize;
    let (type_off, type_len) = (r.u32(8)? as usize, r.u32(12)? as usize);
    let (str_off, str_len) = (r.u32(16)? as usize, r.u32(20)? as usize);
    let span = |off: usize, len: usize| -> Result<(usize, usize), BtfError> {
        let start = hdr_len
            .checked_add(off)
            .ok_or_else(|| BtfError::Malformed("offset overflow".into()))?;
        let end = start.checked_add(len).filter(|&e| e <= btf.len());
        end.map(|e| (start, e)).ok_or_else(|| {
            BtfError::Malformed(format!(
                "section {start:#x}+{len:#x} past the end ({:#x})",
                btf.len()
            ))
        })
    };
    let (ts, te) = span(type_off, type_len)?;
    let (ss, se) = span(str_off, str_len)?;
    let strings = &btf[ss..se];
    // A mapped vmlinux's BTF (megabytes) asked into the page cache in steps first: a fault of
    // the walk would otherwise read ahead inside one stretch (the DWARF pass's reason).
    klpsym_resched::bulk::prefetch_with(&btf[ts..te], resched)?;
    klpsym_resched::bulk::prefetch_with(strings, resched)?;
    let name = |off: u32| -> String {
        strings
            .get(off as usize..)
            .and_then(|s| {
                s.iter()
                    .position(|&b| b == 0)
                    .map(|n| String::from_utf8_lossy(&s[..n]).into_owned())
            })
            .unwrap_or_default()
    };
    let mut found: Vec<Option<BtfStruct>> = vec![None; wanted.len()];
    let mut at = ts;
    while at + 12 <= te {
        resched.tick()?;
        let name_off = r.u32(at)?;
        let info = r.u32(at + 4)?;
        let size = r.u32(at + 8)?;
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        let kflag = info >> 31 == 1;
        let tail = match kind {
            1 | 14 | 17 => 4,
            2 | 7..=12 | 16 | 18 => 0,
            3 => 12,
            4 | 5 => 12 * vlen,
            6 | 13 => 8 * vlen,
            15 | 19 => 12 * vlen,
            k => return Err(BtfError::Malformed(format!("unknown kind {k} at {at:#x}"))),
        };
        let body = at + 12;
        if body + tail > te {
            return Err(BtfError::Malformed(format!(
                "type at {at:#x} runs past the type section"
            )));
        }
        if kind == KIND_STRUCT {
            let n = name(name_off);
            if let Some(i) = wanted.iter().position(|w| *w == n) {
                if found[i].is_none() {
                    let mut members = Vec::with_capacity(vlen);
                    for k in 0..vlen {
                        let m = body + 12 * k;
                        let off = r.u32(m + 8)?;
                        let bits = if kflag { off & 0x00ff_ffff } else { off };
                        members.push((name(r.u32(m)?), u64::from(bits / 8)));
                    }
                    found[i] = Some(BtfStruct {
                        size: u64::from(size),
                        members,
                    });
                }
            }
        }
        at = body + tail;
    }
    Ok(found)
}

/// The BTF blob of a kernel's bytes: an ELF's `.BTF` section, else a blob found by its header
/// (magic 0xeB9F little-endian, version 1, 24-byte header) whose sections fit the data (an
/// arm64 Image has no section headers). `None` when there is none.
pub fn find_btf(data: &[u8]) -> Option<&[u8]> {
    match find_btf_with(data, &mut Resched::none()) {
        Ok(b) => b,
        Err(Cancelled) => unreachable!("a driver without a cancel flag never cancels"),
    }
}

/// [`find_btf`] reaching reschedule points through `resched` while it searches data without
/// section headers (tens of megabytes of an arm64 Image: milliseconds of `memmem`).
pub fn find_btf_with<'d>(
    data: &'d [u8],
    resched: &mut Resched,
) -> Result<Option<&'d [u8]>, Cancelled> {
    use object::{Object, ObjectSection};
    if let Ok(f) = object::File::parse(data) {
        if let Some(s) = f.section_by_name(".BTF") {
            return Ok(s.data().ok().filter(|d| !d.is_empty()));
        }
    }
    resched.tick_step()?;
    const HEAD: [u8; 8] = [0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
    let u32_at = |d: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
    };
    let finder = ChunkedFinder::new(&HEAD);
    let mut from = 0;
    while let Some(at) = finder.find_from(data, from, resched)? {
        from = at + 1;
        let (Some(toff), Some(tlen), Some(soff), Some(slen)) = (
            u32_at(data, at + 8),
            u32_at(data, at + 12),
            u32_at(data, at + 16),
            u32_at(data, at + 20),
        ) else {
            continue;
        };
        let end = [toff as u64 + tlen as u64, soff as u64 + slen as u64]
            .into_iter()
            .max()
            .unwrap_or(0)
            + 24;
        if toff == 0 && tlen > 0 && slen > 0 && (at as u64 + end) <= data.len() as u64 {
            return Ok(data.get(at..at + end as usize));
        }
    }
    Ok(None)
}
