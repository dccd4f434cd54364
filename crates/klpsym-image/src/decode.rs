//! Decoding the located tables: names through the token table, addresses for each era's
//! `kallsyms_sym_address`, and the name-sorted index checked against the names.

use klpsym_resched::resched::{Cancelled, Resched};

use crate::layout::{Addressing, NameLengthEncoding};
use crate::tables::{read_len, u32_at, u64_at, Names, Tokens};
use crate::ImageError;

/// Longest expansion of one `kallsyms_names` entry: the type letter and KSYM_NAME_LEN - 1
/// (512 since 6.1, 128 before) name bytes.
const MAX_EXPANDED: usize = 1 + 511;

/// Bound on all expanded names per byte of the (decompressed) kernel. Real kernels' names are a
/// few percent of it.
const NAME_BYTES_PER_DATA_BYTE: usize = 8;

/// Expands every name; returns (type letter, name) in kallsyms order.
///
/// Each compressed byte is a token code; the expansion's first character is the type letter
/// (what the kernel prints), the rest the name.
pub(crate) fn decode_names(
    data: &[u8],
    tokens: &Tokens,
    names: &Names,
    resched: &mut Resched,
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
    // Token expansion multiplies bytes: a crafted table whose codes stand for long tokens
    // would make a small (or well-compressed) image expand to gigabytes of names. No kernel
    // name is longer than KSYM_NAME_LEN - 1 (scripts/kallsyms drops longer ones), and names
    // are a small part of any kernel: refuse past either bound.
    let mut names_left = data
        .len()
        .saturating_mul(NAME_BYTES_PER_DATA_BYTE)
        .max(1 << 20);
    for i in 0..names.num_syms as usize {
        resched.tick()?;
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
            if buf.len() > MAX_EXPANDED {
                return Err(ImageError::Inconsistent {
                    table: "kallsyms_names",
                    offset: at,
                    expected: format!(
                        "symbol {i}: a type letter and a name of at most {} bytes (KSYM_NAME_LEN - 1)",
                        MAX_EXPANDED - 1
                    ),
                    found: format!("more than {MAX_EXPANDED} bytes after token expansion"),
                });
            }
        }
        names_left = names_left
            .checked_sub(buf.len())
            .ok_or_else(|| ImageError::Inconsistent {
                table: "kallsyms_names",
                offset: at,
                expected: format!(
                    "names totalling at most {NAME_BYTES_PER_DATA_BYTE}x the {}-byte kernel",
                    data.len()
                ),
                found: format!("more by symbol {i}"),
            })?;
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
pub(crate) fn read_offsets(
    data: &[u8],
    at: usize,
    n: u32,
    resched: &mut Resched,
) -> Result<Option<Vec<i32>>, Cancelled> {
    let Some(bytes) = at
        .checked_add(4 * n as usize)
        .and_then(|end| data.get(at..end))
    else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(n as usize);
    for c in bytes.chunks_exact(4) {
        resched.tick()?;
        out.push(i32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    Ok(Some(out))
}

/// Applies one era's `kallsyms_sym_address` to every entry.
pub(crate) fn addresses(
    offsets: &[i32],
    addressing: Addressing,
    resched: &mut Resched,
) -> Result<Vec<u64>, Cancelled> {
    let mut out = Vec::with_capacity(offsets.len());
    for (i, &o) in offsets.iter().enumerate() {
        resched.tick()?;
        out.push(match addressing {
            Addressing::Absolute => return Ok(Vec::new()),
            Addressing::BaseRelative { relative_base } => {
                relative_base.wrapping_add(u64::from(o as u32))
            }
            Addressing::AbsolutePercpu { relative_base } => {
                if o >= 0 {
                    o as u64
                } else {
                    relative_base.wrapping_sub(1).wrapping_sub(o as i64 as u64)
                }
            }
            Addressing::PcRelative { offsets_vaddr } => offsets_vaddr
                .wrapping_add(4 * i as u64)
                .wrapping_add(o as i64 as u64),
        });
    }
    Ok(out)
}

/// Reads `n` absolute 64-bit addresses (`kallsyms_addresses`).
pub(crate) fn read_absolute(
    data: &[u8],
    at: usize,
    n: u32,
    resched: &mut Resched,
) -> Result<Option<Vec<u64>>, Cancelled> {
    let Some(bytes) = at
        .checked_add(8 * n as usize)
        .and_then(|end| data.get(at..end))
    else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(n as usize);
    for c in bytes.chunks_exact(8) {
        resched.tick()?;
        out.push(u64_at(c, 0).unwrap_or(0));
    }
    Ok(Some(out))
}

/// kallsyms order is address order: the decoded addresses must never decrease.
pub(crate) fn sorted(addrs: &[u64], resched: &mut Resched) -> Result<bool, Cancelled> {
    for w in addrs.windows(2) {
        resched.tick()?;
        if w[0] > w[1] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Reads `kallsyms_seqs_of_names` (3-byte big-endian indexes) and checks it is a permutation.
pub(crate) fn read_seqs(
    data: &[u8],
    at: usize,
    n: u32,
    resched: &mut Resched,
) -> Result<Option<Vec<u32>>, Cancelled> {
    let Some(bytes) = at
        .checked_add(3 * n as usize)
        .and_then(|end| data.get(at..end))
    else {
        return Ok(None);
    };
    let mut seen = vec![false; n as usize];
    let mut out = Vec::with_capacity(n as usize);
    for c in bytes.chunks_exact(3) {
        resched.tick()?;
        let v = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        let Some(slot) = seen.get_mut(v as usize) else {
            return Ok(None);
        };
        if *slot {
            return Ok(None);
        }
        *slot = true;
        out.push(v);
    }
    Ok(Some(out))
}

/// Whether the names, taken in `seqs` order, are sorted by name then address (the order
/// `scripts/kallsyms.c` sorts them). Clang LTO builds sort on names cut at the first '.', so
/// this is a check that may report a false mismatch there, not a hard requirement.
pub(crate) fn seqs_sort_names(
    seqs: &[u32],
    names: &[(u8, String)],
    addrs: &[u64],
    resched: &mut Resched,
) -> Result<bool, Cancelled> {
    for w in seqs.windows(2) {
        resched.tick()?;
        let (a, b) = (w[0] as usize, w[1] as usize);
        let (Some(na), Some(nb)) = (names.get(a), names.get(b)) else {
            return Ok(false);
        };
        let ok = match na.1.as_bytes().cmp(nb.1.as_bytes()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => addrs.get(a) <= addrs.get(b),
            std::cmp::Ordering::Greater => false,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The relative base is the lowest symbol address, a kernel-space address on 64-bit kernels.
pub(crate) fn plausible_kernel_address(v: u64) -> bool {
    v >= 0xffff_0000_0000_0000 || (v >= 0xc000_0000 && v <= u64::from(u32::MAX))
}

/// `u32` at `at` as a count, for error messages.
pub(crate) fn count_at(data: &[u8], at: usize) -> String {
    u32_at(data, at).map_or_else(|| "end of data".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use klpsym_testkit::kallsyms::LayoutEra;
    use klpsym_testkit::kallsyms::{encode, symbols, Options, Sym};

    fn opts() -> Options {
        Options {
            era: LayoutEra::TokensBeforeOffsets,
            uleb: true,
            wide_markers: false,
            percpu: false,
            absolute: false,
            vbase: 0,
            prefix: 4096 + 40,
        }
    }

    /// Found while checking the fuzz allocation budget: nothing bounded a name's expansion,
    /// so codes standing for long tokens multiplied the image's bytes without limit.
    #[test]
    fn a_name_longer_than_ksym_name_len_is_refused() {
        let mut syms = symbols(600, false, 0);
        let ok = crate::find_kallsyms(&encode(&syms, opts())).expect("the plain tables decode");
        assert_eq!(ok.entries.len(), 600);
        let long: String = (0..600)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        syms[300] = Sym {
            name: long,
            ..syms[300].clone()
        };
        let err = crate::find_kallsyms(&encode(&syms, opts()))
            .expect_err("a 600-byte name is no kernel's")
            .to_string();
        assert!(err.contains("KSYM_NAME_LEN"), "{err}");
    }
}
