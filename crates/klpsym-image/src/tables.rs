//! Locating the compressed kallsyms tables in a kernel image without symbols.
//!
//! The anchor is the token table: 256 NUL-terminated strings immediately followed (after at most
//! 7 bytes of alignment padding) by `kallsyms_token_index`, 256 `u16` offsets that must be
//! exactly the offsets of those strings. Codes of characters that occur in symbol names stand
//! for themselves, so the digits `0`..`9` appear as ten consecutive one-character tokens: that is
//! the fast path (`memmem`); a slower scan for the index itself is the fallback.
//!
//! From the token table, `kallsyms_markers` (an entry every 256 symbols, first one 0) is found
//! just before it (or before `kallsyms_seqs_of_names` in 6.2/6.3), and `kallsyms_num_syms` just
//! before `kallsyms_names`; each candidate is checked by walking every name length.

use klpsym_resched::resched::{Cancelled, Resched};
use std::ops::Range;

use memchr::memchr;

use crate::layout::NameLengthEncoding;
use klpsym_resched::ChunkedFinder;

/// Longest symbol name the kernel accepts (KSYM_NAME_LEN since 6.1), plus the type letter.
const MAX_SYMBOL_LEN: usize = 512 + 1;
/// Bytes a compressed name can take at most: 2 length bytes + one code per character.
const MAX_ENTRY: usize = 2 + MAX_SYMBOL_LEN;

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at.checked_add(2)?)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
}

fn zeros(b: &[u8], from: usize, to: usize) -> bool {
    b.get(from..to).is_some_and(|s| s.iter().all(|&x| x == 0))
}

/// The token table and its index.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    pub table: usize,
    pub index: usize,
    /// (start, len) of each token's string in the image.
    pub spans: [(usize, usize); 256],
}

impl Tokens {
    pub fn token<'a>(&self, data: &'a [u8], code: u8) -> &'a [u8] {
        let (s, l) = self.spans[usize::from(code)];
        &data[s..s + l]
    }
}

/// Checks that a token index at `index` describes a token table at `table` ending (with zero
/// padding) right before `index`.
fn check_index(data: &[u8], table: usize, index: usize) -> Option<Tokens> {
    let mut spans = [(0usize, 0usize); 256];
    let mut expect = 0usize;
    let mut empty = 0usize;
    for (code, span) in spans.iter_mut().enumerate() {
        let off = usize::from(u16_at(data, index + 2 * code)?);
        if off != expect {
            return None;
        }
        let start = table + off;
        let s = data.get(start..(start + MAX_SYMBOL_LEN + 1).min(data.len()))?;
        let len = memchr(0, s)?;
        // Codes the compressor never needed are empty strings (only in tiny kernels).
        if s[..len].iter().any(|&c| !(0x20..0x7f).contains(&c)) {
            return None;
        }
        empty += usize::from(len == 0);
        *span = (start, len);
        expect = off + len + 1;
    }
    let end = table + expect;
    (empty <= 192 && end <= index && index - end < 8 && zeros(data, end, index)).then_some(Tokens {
        table,
        index,
        spans,
    })
}

/// Finds every token table + index pair in `data` whose table starts inside `spans`
/// (ascending ranges; `[0..data.len()]` for all of it).
pub(crate) fn find_tokens(
    data: &[u8],
    spans: &[Range<usize>],
    resched: &mut Resched,
) -> Result<Vec<Tokens>, Cancelled> {
    let mut found = Vec::new();
    let digits = ChunkedFinder::new(b"0\x001\x002\x003\x004\x005\x006\x007\x008\x009\x00");
    let mut next = 0;
    while let Some(hit) = digits.find_in(data, spans, next, resched)? {
        next = hit + 1;
        resched.tick()?;
        // Walk the strings of codes 0x30..=0xff to the end of the table.
        let mut pos = hit;
        let mut ok = true;
        for _ in 0x30..=0xff {
            match data
                .get(pos..)
                .and_then(|s| memchr(0, &s[..s.len().min(MAX_SYMBOL_LEN + 1)]))
            {
                Some(l) => pos += l + 1,
                _ => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            continue;
        }
        for index in pos..pos + 8 {
            let Some(off30) = u16_at(data, index + 2 * 0x30) else {
                break;
            };
            let Some(table) = hit.checked_sub(usize::from(off30)) else {
                continue;
            };
            if let Some(t) = check_index(data, table, index) {
                found.push(t);
                break;
            }
        }
    }
    if found.is_empty() {
        for span in spans {
            found.extend(scan_for_index(data, span.clone(), resched)?);
        }
    }
    Ok(found)
}

/// Fallback: every 2-aligned position whose 256 `u16` start at 0 and grow by 2..=514 is tried
/// as a token index; the table must then end right before it.
fn scan_for_index(
    data: &[u8],
    span: Range<usize>,
    resched: &mut Resched,
) -> Result<Vec<Tokens>, Cancelled> {
    let mut found = Vec::new();
    let mut q = span.start.next_multiple_of(2);
    while q + 512 <= data.len().min(span.end) {
        resched.tick()?;
        // Cheap filter: u16 0, then a small positive step, then growth.
        let a = u16_at(data, q + 2).unwrap_or(0);
        if data[q] == 0 && data[q + 1] == 0 && (1..=514).contains(&a) {
            let mut prev = 0u16;
            let mut good = true;
            for c in 1..256 {
                let v = u16_at(data, q + 2 * c).unwrap_or(0);
                if v < prev + 1 || usize::from(v - prev) > MAX_SYMBOL_LEN + 1 {
                    good = false;
                    break;
                }
                prev = v;
            }
            if good {
                // The last token's length is unknown: try each, the table must end at q - pad.
                for pad in 0..8 {
                    let Some(end) = q.checked_sub(pad) else { break };
                    if !zeros(data, end, q) || end == 0 || data[end - 1] != 0 {
                        continue;
                    }
                    let last = end - 1;
                    let from = last.saturating_sub(MAX_SYMBOL_LEN);
                    let Some(nul) = memchr::memrchr(0, &data[from..last]) else {
                        continue;
                    };
                    let start_last = from + nul + 1;
                    if let Some(table) = start_last.checked_sub(usize::from(prev)) {
                        if let Some(t) = check_index(data, table, q) {
                            found.push(t);
                            break;
                        }
                    }
                }
            }
        }
        q += 2;
    }
    Ok(found)
}

/// `kallsyms_markers`: where, how wide, and its entries.
#[derive(Debug, Clone)]
pub(crate) struct Markers {
    pub start: usize,
    pub width: usize,
    pub values: Vec<u64>,
}

fn read_marker(data: &[u8], at: usize, width: usize) -> Option<u64> {
    if width == 4 {
        u32_at(data, at).map(u64::from)
    } else {
        u64_at(data, at)
    }
}

/// Plausible growth of the names offset over 256 symbols.
fn marker_step_ok(step: u64) -> bool {
    (2 * 256..=(MAX_ENTRY as u64) * 256).contains(&step)
}

/// Markers ending right before `end` (with up to 7 zero bytes of padding), read backwards to the
/// first entry (0).
pub(crate) fn markers_before(
    data: &[u8],
    end: usize,
    resched: &mut Resched,
) -> Result<Vec<Markers>, Cancelled> {
    let mut out = Vec::new();
    for width in [4usize, 8] {
        for pad in 0..8 {
            let Some(me) = end.checked_sub(pad) else {
                break;
            };
            if me % 4 != 0 || !zeros(data, me, end) {
                continue;
            }
            let mut values = Vec::new();
            let mut at = me;
            let mut ok = false;
            while let Some(a) = at.checked_sub(width) {
                resched.tick()?;
                let Some(v) = read_marker(data, a, width) else {
                    break;
                };
                if let Some(&next) = values.last() {
                    if v >= next || !marker_step_ok(next - v) {
                        break;
                    }
                }
                values.push(v);
                at = a;
                if v == 0 {
                    ok = true;
                    break;
                }
                if values.len() > (1 << 16) {
                    break;
                }
            }
            if ok {
                values.reverse();
                out.push(Markers {
                    start: at,
                    width,
                    values,
                });
            }
        }
    }
    Ok(out)
}

/// Markers followed by `kallsyms_seqs_of_names` (6.2/6.3) before `end`: returns the markers and
/// the symbol count implied by the size of the seqs table.
pub(crate) fn markers_before_seqs(
    data: &[u8],
    end: usize,
    resched: &mut Resched,
) -> Result<Vec<(Markers, u32, usize)>, Cancelled> {
    let mut out = Vec::new();
    let lowest = end.saturating_sub(3 * (1 << 21));
    let mut s = end.saturating_sub(4) & !3;
    while s > lowest {
        s -= 4;
        resched.tick()?;
        if u32_at(data, s) != Some(0) {
            continue;
        }
        // Walk forward while the values grow like markers.
        let mut values = vec![0u64];
        let mut at = s + 4;
        loop {
            resched.tick()?;
            // Each prefix of the walk is a candidate markers table.
            let m = values.len();
            for align in [4usize, 8] {
                let seqs = at.next_multiple_of(align);
                for pad in 0..8 {
                    let Some(te) = end.checked_sub(pad) else {
                        break;
                    };
                    if te < seqs || (te - seqs) % 3 != 0 || !zeros(data, te, end) {
                        continue;
                    }
                    let n = (te - seqs) / 3;
                    if n > (m - 1) * 256 && n <= m * 256 && zeros(data, at, seqs) {
                        out.push((
                            Markers {
                                start: s,
                                width: 4,
                                values: values.clone(),
                            },
                            n as u32,
                            seqs,
                        ));
                    }
                }
            }
            match u32_at(data, at).map(u64::from) {
                Some(v) if v > values[m - 1] && marker_step_ok(v - values[m - 1]) && at < end => {
                    values.push(v);
                    at += 4;
                }
                _ => break,
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    Ok(out)
}

/// Reads one name-length prefix at `at`: (compressed length, prefix size).
#[inline]
pub(crate) fn read_len(data: &[u8], at: usize, enc: NameLengthEncoding) -> Option<(usize, usize)> {
    let b = *data.get(at)?;
    if b & 0x80 != 0 && enc == NameLengthEncoding::Uleb128 {
        let hi = *data.get(at + 1)?;
        Some(((usize::from(b) & 0x7f) | (usize::from(hi) << 7), 2))
    } else {
        Some((usize::from(b), 1))
    }
}

/// Walks `n` names from `start`, checking every marker; returns the end offset and whether a
/// two-byte length was seen.
pub(crate) fn walk_names(
    data: &[u8],
    start: usize,
    n: u32,
    markers: &[u64],
    enc: NameLengthEncoding,
    resched: &mut Resched,
) -> Result<Option<(usize, bool)>, Cancelled> {
    let mut at = start;
    let mut long = false;
    for i in 0..n as usize {
        resched.tick()?;
        if i & 0xff == 0 && markers.get(i >> 8).copied() != Some((at - start) as u64) {
            return Ok(None);
        }
        let Some((len, pre)) = read_len(data, at, enc) else {
            return Ok(None);
        };
        if len == 0 || len > MAX_SYMBOL_LEN {
            return Ok(None);
        }
        long |= pre == 2 || len >= 0x80;
        at += pre + len;
    }
    Ok((at <= data.len()).then_some((at, long)))
}

/// The names table and the symbol count in front of it.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub num_syms_at: usize,
    pub start: usize,
    pub num_syms: u32,
    pub encoding: NameLengthEncoding,
}

/// Finds `kallsyms_num_syms` + `kallsyms_names` ending at `markers.start` (with padding). When
/// `known_n` is set (from the seqs table) the count must match it.
pub(crate) fn names_before(
    data: &[u8],
    markers: &Markers,
    known_n: Option<u32>,
    resched: &mut Resched,
) -> Result<Vec<Names>, Cancelled> {
    let mut out = Vec::new();
    let m = markers.values.len();
    let last = markers.values[m - 1] as usize;
    let Some(hi) = markers.start.checked_sub(last + 1 + 4) else {
        return Ok(out);
    };
    let lo = hi.saturating_sub(256 * MAX_ENTRY + 8);
    let mut pos = hi & !3;
    loop {
        resched.tick()?;
        if let Some(n) = u32_at(data, pos) {
            let in_range = n as usize > (m - 1) * 256 && n as usize <= m * 256;
            if in_range && known_n.is_none_or(|k| k == n) {
                for start in [pos + 4, pos + 8] {
                    if !zeros(data, pos + 4, start) {
                        continue;
                    }
                    for enc in [NameLengthEncoding::Uleb128, NameLengthEncoding::OneByte] {
                        if let Some((end, long)) =
                            walk_names(data, start, n, &markers.values, enc, resched)?
                        {
                            if end <= markers.start
                                && markers.start - end < 8
                                && zeros(data, end, markers.start)
                            {
                                let encoding = if long {
                                    enc
                                } else {
                                    NameLengthEncoding::ShortOnly
                                };
                                out.push(Names {
                                    num_syms_at: pos,
                                    start,
                                    num_syms: n,
                                    encoding,
                                });
                                break;
                            }
                        }
                    }
                }
            }
        }
        if pos < lo + 4 {
            break;
        }
        pos -= 4;
    }
    Ok(out)
}
