//! Decoding the located tables: names through the token table, addresses for each era's
//! `kallsyms_sym_address`, and the name-sorted index checked against the names.

use crate::layout::{Addressing, NameLengthEncoding};
use crate::tables::{read_len, u32_at, u64_at, Names, Tokens};
use crate::ImageError;

/// Expands every name; returns (type letter, name) in kallsyms order.
///
/// Each compressed byte is a token code; the expansion's first character is the type letter
/// (what the kernel prints), the rest the name.
pub(crate) fn decode_names(
    data: &[u8],
    tokens: &Tokens,
    names: &Names,
) -> Result<Vec<(u8, String)>, ImageError> {
    let table: Vec<&[u8]> = (0..=255u8).map(|c| tokens.token(data, c)).collect();
    let enc = if names.encoding == NameLengthEncoding::OneByte {
        NameLengthEncoding::OneByte
    } else {
        NameLengthEncoding::Uleb128
    };
    let mut out = Vec::with_capacity(names.num_syms as usize);
    let mut at = names.start;
    let mut buf = Vec::with_capacity(128);
    for i in 0..names.num_syms as usize {
        let bad = |what: &str| ImageError::Inconsistent {
            table: "kallsyms_names",
            offset: at,
            expected: format!("symbol {i}: {what}"),
            found: "end of data".into(),
        };
        let (len, pre) = read_len(data, at, enc).ok_or_else(|| bad("a length"))?;
        let codes = data
            .get(at + pre..at + pre + len)
            .ok_or_else(|| bad("compressed bytes"))?;
        buf.clear();
        for &c in codes {
            buf.extend_from_slice(table[usize::from(c)]);
        }
        let Some((&kind, name)) = buf.split_first() else {
            return Err(bad("a type letter"));
        };
        let name = match std::str::from_utf8(name) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(name).into_owned(),
        };
        out.push((kind, name));
        at += pre + len;
    }
    Ok(out)
}

/// Reads `n` signed 32-bit offsets.
pub(crate) fn read_offsets(data: &[u8], at: usize, n: u32) -> Option<Vec<i32>> {
    let bytes = data.get(at..at.checked_add(4 * n as usize)?)?;
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Applies one era's `kallsyms_sym_address` to every entry.
pub(crate) fn addresses(offsets: &[i32], addressing: Addressing) -> Vec<u64> {
    match addressing {
        Addressing::Absolute => Vec::new(),
        Addressing::BaseRelative { relative_base } => offsets
            .iter()
            .map(|&o| relative_base.wrapping_add(u64::from(o as u32)))
            .collect(),
        Addressing::AbsolutePercpu { relative_base } => offsets
            .iter()
            .map(|&o| {
                if o >= 0 {
                    o as u64
                } else {
                    relative_base.wrapping_sub(1).wrapping_sub(o as i64 as u64)
                }
            })
            .collect(),
        Addressing::PcRelative { offsets_vaddr } => offsets
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                offsets_vaddr
                    .wrapping_add(4 * i as u64)
                    .wrapping_add(o as i64 as u64)
            })
            .collect(),
    }
}

/// Reads `n` absolute 64-bit addresses (`kallsyms_addresses`).
pub(crate) fn read_absolute(data: &[u8], at: usize, n: u32) -> Option<Vec<u64>> {
    (0..n as usize).map(|i| u64_at(data, at + 8 * i)).collect()
}

/// kallsyms order is address order: the decoded addresses must never decrease.
pub(crate) fn sorted(addrs: &[u64]) -> bool {
    addrs.windows(2).all(|w| w[0] <= w[1])
}

/// Reads `kallsyms_seqs_of_names` (3-byte big-endian indexes) and checks it is a permutation.
pub(crate) fn read_seqs(data: &[u8], at: usize, n: u32) -> Option<Vec<u32>> {
    let bytes = data.get(at..at.checked_add(3 * n as usize)?)?;
    let mut seen = vec![false; n as usize];
    let mut out = Vec::with_capacity(n as usize);
    for c in bytes.chunks_exact(3) {
        let v = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        let slot = seen.get_mut(v as usize)?;
        if *slot {
            return None;
        }
        *slot = true;
        out.push(v);
    }
    Some(out)
}

/// Whether the names, taken in `seqs` order, are sorted by name then address (the order
/// `scripts/kallsyms.c` sorts them). Clang LTO builds sort on names cut at the first '.', so
/// this is a check that may report a false mismatch there, not a hard requirement.
pub(crate) fn seqs_sort_names(seqs: &[u32], names: &[(u8, String)], addrs: &[u64]) -> bool {
    seqs.windows(2).all(|w| {
        let (a, b) = (w[0] as usize, w[1] as usize);
        match names[a].1.as_bytes().cmp(names[b].1.as_bytes()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => addrs.get(a) <= addrs.get(b),
            std::cmp::Ordering::Greater => false,
        }
    })
}

/// The relative base is the lowest symbol address, a kernel-space address on 64-bit kernels.
pub(crate) fn plausible_kernel_address(v: u64) -> bool {
    v >= 0xffff_0000_0000_0000 || (v >= 0xc000_0000 && v <= u64::from(u32::MAX))
}

/// `u32` at `at` as a count, for error messages.
pub(crate) fn count_at(data: &[u8], at: usize) -> String {
    u32_at(data, at).map_or_else(|| "end of data".into(), |v| v.to_string())
}
