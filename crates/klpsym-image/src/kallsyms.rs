//! `find_kallsyms`: tries every table layout era on the located token table, keeps the
//! candidates that pass every cross-check, and decodes the one that remains.

use klpsym_resched::bulk::free_with_points;
use klpsym_resched::resched::{Cancelled, Resched};

use crate::container::is_arm64_image;
use crate::crcs::{image_crcs, AddressMap};
use crate::decode::{
    addresses, count_at, decode_names, plausible_kernel_address, read_absolute, read_offsets,
    read_seqs, seqs_sort_names, sorted,
};
use crate::elfinfo::ElfInfo;
use crate::identity::{banner_release, find_build_id, find_vermagic, find_version};
use crate::layout::{Addressing, LayoutEra, TableLayout, TableOffsets};
use crate::tables::{
    find_tokens, markers_before, markers_before_seqs, names_before, u64_at, Names, Tokens,
};
use crate::{Arch, ImageError, ImageFormat, ImageSymbols, KallsymsEntry};

/// Link address of `_text` assumed for raw images in the place-relative era, where the table
/// itself does not say where it was linked: arm64 KIMAGE_VADDR (48-bit VA, 2 GiB modules area)
/// and the x86_64 default (`__START_KERNEL_map` + CONFIG_PHYSICAL_START 16 MiB).
const ARM64_TEXT: u64 = 0xffff_8000_8000_0000;
const X86_64_TEXT: u64 = 0xffff_ffff_8100_0000;

/// One layout that passed every structural check, with its decoded addresses.
#[derive(Debug)]
struct Candidate {
    layout: TableLayout,
    addrs: Vec<u64>,
    seqs: Option<Vec<u32>>,
    notes: Vec<String>,
}

struct Ctx<'a> {
    data: &'a [u8],
    elf: Option<ElfInfo>,
    arch: Arch,
}

/// Locates and decodes the kallsyms tables in a decompressed kernel (ELF or raw).
pub fn find_kallsyms(vmlinux: &[u8]) -> Result<ImageSymbols, ImageError> {
    find_kallsyms_with(vmlinux, &mut Resched::none())
}

/// [`find_kallsyms`], reaching a reschedule point through `resched` per table entry, per
/// candidate position and every 256 KiB of scanning; a cancelled point ends it with
/// [`ImageError::Cancelled`].
pub fn find_kallsyms_with(
    vmlinux: &[u8],
    resched: &mut Resched,
) -> Result<ImageSymbols, ImageError> {
    let elf = if vmlinux.starts_with(b"\x7fELF") {
        ElfInfo::parse(vmlinux, resched)?
    } else {
        None
    };
    let (format, mut arch) = match &elf {
        Some(e) => (
            ImageFormat::ElfVmlinux,
            e.arch.clone().unwrap_or(Arch::Unknown),
        ),
        None if is_arm64_image(vmlinux) => {
            (ImageFormat::Arm64Image { compression: None }, Arch::Arm64)
        }
        None => (ImageFormat::RawVmlinux, Arch::Unknown),
    };
    let mut notes = Vec::new();
    if vmlinux.starts_with(b"\x7fELF") && elf.is_none() {
        notes.push(
            "input starts with the ELF magic but does not parse as ELF; searched as raw bytes"
                .into(),
        );
    }
    let spans: Vec<std::ops::Range<usize>> = match &elf {
        Some(e) if !e.data_spans.is_empty() => e.data_spans.clone(),
        _ => klpsym_resched::EVERYWHERE.to_vec(),
    };
    let ctx = Ctx {
        data: vmlinux,
        elf,
        arch: arch.clone(),
    };
    let all_tokens = find_tokens(vmlinux, &spans, resched)?;
    if all_tokens.is_empty() {
        return Err(ImageError::NoKallsyms {
            detail: format!("searched {} bytes", vmlinux.len()),
        });
    }
    let mut cands: Vec<(Tokens, Names, Candidate)> = Vec::new();
    for tokens in &all_tokens {
        for m in markers_before(vmlinux, tokens.table, resched)? {
            for names in names_before(vmlinux, &m, None, resched)? {
                let mut found = after_index(&ctx, tokens, &names, resched)?;
                found.extend(before_num_syms(&ctx, &names, None, resched)?);
                for c in found {
                    let mut c = c;
                    c.layout.marker_width = m.width;
                    c.layout.offsets.markers = m.start;
                    c.layout.offsets.token_table = tokens.table;
                    c.layout.offsets.token_index = tokens.index;
                    cands.push((tokens.clone(), names.clone(), c));
                }
            }
        }
    }
    if cands.is_empty() {
        for tokens in &all_tokens {
            for (m, n, seqs_at) in markers_before_seqs(vmlinux, tokens.table, resched)? {
                for names in names_before(vmlinux, &m, Some(n), resched)? {
                    for mut c in before_num_syms(&ctx, &names, Some(seqs_at), resched)? {
                        c.layout.marker_width = m.width;
                        c.layout.offsets.markers = m.start;
                        c.layout.offsets.token_table = tokens.table;
                        c.layout.offsets.token_index = tokens.index;
                        cands.push((tokens.clone(), names.clone(), c));
                    }
                }
            }
        }
    }
    let Some((tokens, names, cand)) = pick(cands, resched)? else {
        let t = &all_tokens[0];
        return Err(ImageError::NoKallsyms {
            detail: format!(
                "found {} token table(s) (first at {:#x}, index at {:#x}) but no markers/names/addresses around them pass the checks (u32 before the table: {})",
                all_tokens.len(),
                t.table,
                t.index,
                count_at(vmlinux, t.table.saturating_sub(4))
            ),
        });
    };
    notes.extend(cand.notes);
    let decoded = decode_names(vmlinux, &tokens, &names, resched)?;
    if let Some(seqs) = &cand.seqs {
        if !seqs_sort_names(seqs, &decoded, &cand.addrs, resched)? {
            notes.push("kallsyms_seqs_of_names is a permutation but does not sort the names bytewise (expected for Clang LTO builds, which sort on names cut at '.')".into());
        }
    }
    if let Some(e) = &ctx.elf {
        cross_check_symtab(e, &cand.layout, &mut notes)?;
    }
    if arch == Arch::Unknown {
        arch = guess_arch(&cand.addrs, &mut notes);
    }
    let mut entries = Vec::with_capacity(decoded.len());
    let mut decoded = decoded;
    for ((kind, name), &addr) in decoded.iter_mut().zip(&cand.addrs) {
        resched.tick()?;
        entries.push(KallsymsEntry {
            addr,
            kind: *kind,
            name: std::mem::take(name),
        });
    }
    // Megabytes of intermediate tables: given back in steps.
    free_with_points(decoded, resched)?;
    free_with_points(cand.addrs, resched)?;
    if let Some(s) = cand.seqs {
        free_with_points(s, resched)?;
    }
    let version = find_version(vmlinux, &spans, resched)?;
    let text = entries.iter().find(|e| e.name == "_text").map(|e| e.addr);
    let map = match (&ctx.elf, text) {
        (Some(e), _) => Some(AddressMap::Segments(&e.segments)),
        (None, Some(base)) => Some(AddressMap::Linear { base }),
        (None, None) => None,
    };
    let crcs = match map {
        Some(m) => image_crcs(vmlinux, &m, &entries, resched)?,
        None => None,
    };
    Ok(ImageSymbols {
        crcs,
        entries,
        format,
        build_id: find_build_id(vmlinux, &spans, resched)?,
        vermagic: match &version {
            Some(v) => find_vermagic(
                vmlinux,
                &spans,
                banner_release(v).unwrap_or_default(),
                resched,
            )?,
            None => None,
        },
        version,
        arch,
        layout: cand.layout,
        notes,
    })
}

/// Keeps one candidate; identical decodings found twice in a row (e.g. both alignments)
/// count once. Addresses are compared, and duplicates freed, in steps.
fn pick(
    all: Vec<(Tokens, Names, Candidate)>,
    resched: &mut Resched,
) -> Result<Option<(Tokens, Names, Candidate)>, ImageError> {
    let mut cands: Vec<(Tokens, Names, Candidate)> = Vec::with_capacity(all.len());
    for c in all {
        let dup = match cands.last() {
            Some(last) => last.1.start == c.1.start && same(&last.2.addrs, &c.2.addrs, resched)?,
            None => false,
        };
        if dup {
            free_with_points(c.2.addrs, resched)?;
            if let Some(s) = c.2.seqs {
                free_with_points(s, resched)?;
            }
        } else {
            cands.push(c);
        }
    }
    match cands.len() {
        0 => Ok(None),
        1 => Ok(cands.pop()),
        n => Err(ImageError::Ambiguous {
            count: n,
            detail: cands
                .iter()
                .map(|(_, names, c)| format!("{:?} with names at {:#x}", c.layout.era, names.start))
                .collect::<Vec<_>>()
                .join("; "),
        }),
    }
}

/// `a == b`, compared 4,096 elements a step.
fn same(a: &[u64], b: &[u64], resched: &mut Resched) -> Result<bool, Cancelled> {
    if a.len() != b.len() {
        return Ok(false);
    }
    for (x, y) in a.chunks(4096).zip(b.chunks(4096)) {
        if x != y {
            return Ok(false);
        }
        resched.tick_step()?;
    }
    Ok(true)
}

/// A copy of `v`, made in steps.
fn copied(v: &[u32], resched: &mut Resched) -> Result<Vec<u32>, Cancelled> {
    let mut out = Vec::new();
    klpsym_resched::bulk::extend_from_slice(&mut out, v, resched)?;
    Ok(out)
}

fn layout(
    era: LayoutEra,
    names: &Names,
    addressing: Addressing,
    offsets: TableOffsets,
) -> TableLayout {
    TableLayout {
        era,
        name_length: names.encoding,
        addressing,
        marker_width: 4,
        num_syms: names.num_syms,
        offsets,
    }
}

/// Relative addressing for a base-relative table: with any negative offset it can only be the
/// x86_64 absolute-percpu scheme (plain offsets are unsigned from the lowest address).
fn relative(
    offsets: &[i32],
    relative_base: u64,
    resched: &mut Resched,
) -> Result<Addressing, Cancelled> {
    for &o in offsets {
        resched.tick()?;
        if o < 0 {
            return Ok(Addressing::AbsolutePercpu { relative_base });
        }
    }
    Ok(Addressing::BaseRelative { relative_base })
}

/// Eras 6.4+: offsets (and relative base, then seqs) after the token index.
fn after_index(
    ctx: &Ctx<'_>,
    tokens: &Tokens,
    names: &Names,
    resched: &mut Resched,
) -> Result<Vec<Candidate>, Cancelled> {
    let mut out = Vec::new();
    let n = names.num_syms;
    let end_index = tokens.index + 512;
    let mut starts = vec![end_index.next_multiple_of(4), end_index.next_multiple_of(8)];
    starts.dedup();
    for off_at in starts {
        let Some(offs) = read_offsets(ctx.data, off_at, n, resched)? else {
            continue;
        };
        let off_end = off_at + 4 * n as usize;
        let base_offsets = TableOffsets {
            num_syms: names.num_syms_at,
            names: names.start,
            addresses: off_at,
            ..TableOffsets::default()
        };
        // 6.4 .. 2026: relative base after the offsets, seqs after it.
        let rb_at = off_end.next_multiple_of(8);
        if let Some(rb) = u64_at(ctx.data, rb_at).filter(|&v| plausible_kernel_address(v)) {
            let addressing = relative(&offs, rb, resched)?;
            let addrs = addresses(&offs, addressing, resched)?;
            let seqs = if sorted(&addrs, resched)? {
                read_seqs(ctx.data, rb_at + 8, n, resched)?
            } else {
                None
            };
            match seqs {
                Some(seqs) => {
                    let offsets = TableOffsets {
                        relative_base: Some(rb_at),
                        seqs_of_names: Some(rb_at + 8),
                        ..base_offsets
                    };
                    out.push(Candidate {
                        layout: layout(LayoutEra::TokensBeforeOffsets, names, addressing, offsets),
                        addrs,
                        seqs: Some(seqs),
                        notes: Vec::new(),
                    });
                }
                // A table of a hundred thousand addresses: given back in steps.
                None => free_with_points(addrs, resched)?,
            }
        }
        // 2026+: place-relative offsets, seqs right after them.
        let seqs_at = off_end.next_multiple_of(4);
        if let Some(seqs) = read_seqs(ctx.data, seqs_at, n, resched)? {
            let mut notes = Vec::new();
            let vaddr = match ctx.elf.as_ref().and_then(|e| e.vaddr(off_at)) {
                Some(v) => v,
                None => {
                    let text = if ctx.arch == Arch::X86_64 {
                        X86_64_TEXT
                    } else {
                        ARM64_TEXT
                    };
                    notes.push(format!(
                        "place-relative kallsyms_offsets in an image without load addresses: assumed file offset 0 is _text at {text:#x}; addresses are exact relative to _text only"
                    ));
                    text + off_at as u64
                }
            };
            let addressing = Addressing::PcRelative {
                offsets_vaddr: vaddr,
            };
            let addrs = addresses(&offs, addressing, resched)?;
            if sorted(&addrs, resched)? {
                let offsets = TableOffsets {
                    seqs_of_names: Some(seqs_at),
                    ..base_offsets
                };
                out.push(Candidate {
                    layout: layout(LayoutEra::PcRelative, names, addressing, offsets),
                    addrs,
                    seqs: Some(seqs),
                    notes,
                });
            } else {
                free_with_points(addrs, resched)?;
                free_with_points(seqs, resched)?;
            }
        }
        free_with_points(offs, resched)?;
    }
    Ok(out)
}

/// Eras up to 6.3: offsets + relative base (or absolute addresses) before `kallsyms_num_syms`.
/// `seqs_at` is set for 6.2/6.3, where `kallsyms_seqs_of_names` sits after the markers.
fn before_num_syms(
    ctx: &Ctx<'_>,
    names: &Names,
    seqs_at: Option<usize>,
    resched: &mut Resched,
) -> Result<Vec<Candidate>, Cancelled> {
    let mut out = Vec::new();
    let n = names.num_syms;
    let p = names.num_syms_at;
    let era = if seqs_at.is_some() {
        LayoutEra::AddressesFirstWithSeqs
    } else {
        LayoutEra::AddressesFirst
    };
    let seqs = match seqs_at {
        Some(at) => match read_seqs(ctx.data, at, n, resched)? {
            Some(s) => Some(s),
            None => return Ok(out),
        },
        None => None,
    };
    let base_offsets = TableOffsets {
        num_syms: p,
        names: names.start,
        seqs_of_names: seqs_at,
        ..TableOffsets::default()
    };
    if let Some(rb_at) = p.checked_sub(8) {
        if let Some(rb) = u64_at(ctx.data, rb_at).filter(|&v| plausible_kernel_address(v)) {
            if let Some(raw) = rb_at.checked_sub(4 * n as usize) {
                let mut starts = vec![raw, raw & !7];
                starts.dedup();
                for off_at in starts {
                    let Some(offs) = read_offsets(ctx.data, off_at, n, resched)? else {
                        continue;
                    };
                    let gap_ok = ctx.data[off_at + 4 * n as usize..rb_at]
                        .iter()
                        .all(|&b| b == 0);
                    let addressing = relative(&offs, rb, resched)?;
                    let addrs = addresses(&offs, addressing, resched)?;
                    free_with_points(offs, resched)?;
                    if gap_ok && sorted(&addrs, resched)? {
                        let offsets = TableOffsets {
                            addresses: off_at,
                            relative_base: Some(rb_at),
                            ..base_offsets
                        };
                        let seqs = match &seqs {
                            Some(s) => Some(copied(s, resched)?),
                            None => None,
                        };
                        out.push(Candidate {
                            layout: layout(era, names, addressing, offsets),
                            addrs,
                            seqs,
                            notes: Vec::new(),
                        });
                    } else {
                        free_with_points(addrs, resched)?;
                    }
                }
            }
        }
    }
    if out.is_empty() {
        if let Some(at) = p.checked_sub(8 * n as usize) {
            if let Some(addrs) = read_absolute(ctx.data, at, n, resched)? {
                if sorted(&addrs, resched)?
                    && addrs.last().is_some_and(|&a| plausible_kernel_address(a))
                {
                    out.push(Candidate {
                        layout: layout(
                            era,
                            names,
                            Addressing::Absolute,
                            TableOffsets {
                                addresses: at,
                                ..base_offsets
                            },
                        ),
                        addrs,
                        seqs,
                        notes: Vec::new(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// When `.symtab` still names the tables, they must be where the scan found them.
fn cross_check_symtab(
    e: &ElfInfo,
    l: &TableLayout,
    notes: &mut Vec<String>,
) -> Result<(), ImageError> {
    let o = &l.offsets;
    let mut checked = 0;
    let expect = [
        ("kallsyms_num_syms", Some(o.num_syms)),
        ("kallsyms_names", Some(o.names)),
        ("kallsyms_markers", Some(o.markers)),
        ("kallsyms_token_table", Some(o.token_table)),
        ("kallsyms_token_index", Some(o.token_index)),
        ("kallsyms_relative_base", o.relative_base),
        ("kallsyms_seqs_of_names", o.seqs_of_names),
    ];
    for (name, found) in expect {
        let (Some(sym), Some(found)) = (e.symbol(name), found) else {
            continue;
        };
        checked += 1;
        if sym != found {
            return Err(ImageError::Inconsistent {
                table: "table location",
                offset: found,
                expected: format!("{name} at file offset {sym:#x} (from .symtab)"),
                found: format!("{found:#x} (from the scan)"),
            });
        }
    }
    if checked > 0 {
        notes.push(format!(
            "{checked} table locations confirmed by the ELF .symtab"
        ));
    }
    Ok(())
}

/// Architecture from the address range, when no header said it.
fn guess_arch(addrs: &[u64], notes: &mut Vec<String>) -> Arch {
    let Some(&last) = addrs.last() else {
        return Arch::Unknown;
    };
    let arch = if last >= 0xffff_ffff_8000_0000 {
        Arch::X86_64
    } else if (0xffff_0000_0000_0000..0xffff_ffff_0000_0000).contains(&last) {
        Arch::Arm64
    } else {
        return Arch::Unknown;
    };
    notes.push(format!("architecture {arch:?} guessed from the address range (highest {last:#x}); no ELF or Image header"));
    arch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::NameLengthEncoding;

    use klpsym_testkit::kallsyms::{encode, symbols, Options, Sym};

    /// The test kit's name for the same era (its encoder is written apart from this decoder).
    fn era_of(e: LayoutEra) -> klpsym_testkit::kallsyms::LayoutEra {
        use klpsym_testkit::kallsyms::LayoutEra as E;
        match e {
            LayoutEra::AddressesFirst => E::AddressesFirst,
            LayoutEra::AddressesFirstWithSeqs => E::AddressesFirstWithSeqs,
            LayoutEra::TokensBeforeOffsets => E::TokensBeforeOffsets,
            LayoutEra::PcRelative => E::PcRelative,
        }
    }

    fn opts(era: LayoutEra) -> Options {
        Options {
            era: era_of(era),
            uleb: true,
            wide_markers: false,
            percpu: false,
            absolute: false,
            vbase: ARM64_TEXT,
            prefix: 4096 + 40,
        }
    }

    fn check(syms: &[Sym], o: Options) -> ImageSymbols {
        let img = encode(syms, o);
        let got = find_kallsyms(&img).unwrap_or_else(|e| panic!("{:?}: {e}", o));
        assert_eq!(era_of(got.layout.era), o.era, "{o:?}");
        assert_eq!(got.entries.len(), syms.len());
        for (i, (g, s)) in got.entries.iter().zip(syms).enumerate() {
            assert_eq!(
                (g.addr, g.kind, g.name.as_str()),
                (s.addr, s.kind, s.name.as_str()),
                "symbol {i} {o:?}"
            );
        }
        got
    }

    #[test]
    fn every_era_roundtrips_with_long_names_and_aliases() {
        let syms = symbols(3000, true, 0);
        for era in [
            LayoutEra::AddressesFirst,
            LayoutEra::AddressesFirstWithSeqs,
            LayoutEra::TokensBeforeOffsets,
            LayoutEra::PcRelative,
        ] {
            let syms: Vec<Sym> = if era == LayoutEra::PcRelative {
                // Place-relative offsets reach +-2 GiB: use arm64-like addresses near the image.
                syms.iter()
                    .map(|s| Sym {
                        addr: s.addr - X86_64_TEXT + ARM64_TEXT + 0x10_0000,
                        ..s.clone()
                    })
                    .collect()
            } else {
                syms.clone()
            };
            let got = check(&syms, opts(era));
            assert_eq!(
                got.layout.name_length,
                NameLengthEncoding::Uleb128,
                "{era:?}"
            );
            assert_eq!(got.layout.offsets.token_table % 4, 0);
            match era {
                LayoutEra::PcRelative => {
                    assert!(matches!(
                        got.layout.addressing,
                        Addressing::PcRelative { .. }
                    ));
                    assert!(got.notes.iter().any(|n| n.contains("place-relative")));
                }
                _ => assert_eq!(
                    got.layout.addressing,
                    Addressing::BaseRelative {
                        relative_base: syms[0].addr
                    }
                ),
            }
        }
    }

    #[test]
    fn old_one_byte_lengths_and_wide_markers() {
        let syms = symbols(2000, false, 0);
        let mut o = opts(LayoutEra::AddressesFirst);
        o.uleb = false;
        o.wide_markers = true;
        let got = check(&syms, o);
        assert_eq!(got.layout.marker_width, 8);
        assert_eq!(got.layout.name_length, NameLengthEncoding::ShortOnly);
    }

    #[test]
    fn absolute_percpu_on_x86_64() {
        let syms = symbols(1500, true, 40);
        for era in [
            LayoutEra::AddressesFirstWithSeqs,
            LayoutEra::TokensBeforeOffsets,
        ] {
            let mut o = opts(era);
            o.percpu = true;
            let got = check(&syms, o);
            assert_eq!(
                got.layout.addressing,
                Addressing::AbsolutePercpu {
                    relative_base: syms[40].addr
                }
            );
            assert_eq!(got.arch, Arch::X86_64, "guessed from addresses");
        }
    }

    #[test]
    fn absolute_addresses_table() {
        let syms = symbols(700, false, 0);
        let mut o = opts(LayoutEra::AddressesFirst);
        o.absolute = true;
        let got = check(&syms, o);
        assert_eq!(got.layout.addressing, Addressing::Absolute);
    }

    #[test]
    fn tiny_table_without_every_digit_uses_the_index_scan() {
        // Names without '7': the ten-digit fast path cannot match.
        let syms: Vec<Sym> = (0..300u64)
            .map(|i| Sym {
                addr: 0xffff_8000_8000_0000 + i * 16,
                kind: b't',
                name: format!(
                    "{}_{}",
                    [
                        "alpha",
                        "beta",
                        "gamma",
                        "delta",
                        "kernel",
                        "sched",
                        "mutex",
                        "spin_lock"
                    ][i as usize % 8],
                    i.to_string().replace('7', "x")
                ),
                percpu: false,
            })
            .collect();
        check(&syms, opts(LayoutEra::TokensBeforeOffsets));
    }

    #[test]
    fn seqs_of_names_is_checked() {
        let syms = symbols(1000, false, 0);
        let mut img = encode(&syms, opts(LayoutEra::TokensBeforeOffsets));
        let got = find_kallsyms(&img).unwrap();
        let at = got.layout.offsets.seqs_of_names.unwrap();
        // Duplicate an index: no longer a permutation, so no layout survives.
        img.copy_within(at..at + 3, at + 3);
        assert!(find_kallsyms(&img).is_err());
    }

    #[test]
    fn truncated_tables_are_errors() {
        let syms = symbols(1200, true, 0);
        for era in [LayoutEra::AddressesFirst, LayoutEra::TokensBeforeOffsets] {
            let img = encode(&syms, opts(era));
            let got = find_kallsyms(&img).unwrap();
            let cut = got.layout.offsets.names + 100;
            let err = find_kallsyms(&img[..cut]).unwrap_err();
            assert!(matches!(err, ImageError::NoKallsyms { .. }), "{err}");
            let cut = got.layout.offsets.token_index + 100;
            assert!(find_kallsyms(&img[..cut]).is_err());
        }
    }

    #[test]
    fn random_bytes_and_non_kernels_are_errors() {
        let mut x = 1u64;
        let random: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        assert!(matches!(
            find_kallsyms(&random),
            Err(ImageError::NoKallsyms { .. })
        ));
        assert!(matches!(
            find_kallsyms(&[]),
            Err(ImageError::NoKallsyms { .. })
        ));
        // A "kernel" with a banner and rodata but no kallsyms.
        let mut k = random.clone();
        k.extend_from_slice(b"Linux version 6.1.0 (x@y) #1 SMP\n\0");
        assert!(matches!(
            find_kallsyms(&k),
            Err(ImageError::NoKallsyms { .. })
        ));
        // An ELF object that is not a kernel.
        let mut obj = object::write::Object::new(
            object::BinaryFormat::Elf,
            object::Architecture::X86_64,
            object::Endianness::Little,
        );
        let sec = obj.section_id(object::write::StandardSection::ReadOnlyData);
        obj.append_section_data(sec, b"0\x001\x002\x00hello\0", 8);
        let elf = obj.write().unwrap();
        assert!(matches!(
            find_kallsyms(&elf),
            Err(ImageError::NoKallsyms { .. })
        ));
    }

    #[test]
    fn version_banner_is_read() {
        let mut img = encode(
            &symbols(300, false, 0),
            opts(LayoutEra::TokensBeforeOffsets),
        );
        img.extend_from_slice(b"%s version %s\0Linux version 6.18.0-1-arm64 (b@h) #1 SMP\n\0");
        let got = find_kallsyms(&img).unwrap();
        assert_eq!(
            got.version.as_deref(),
            Some("Linux version 6.18.0-1-arm64 (b@h) #1 SMP")
        );
    }

    #[test]
    fn extract_decompresses_then_decodes() {
        use std::io::Write;
        let syms = symbols(800, true, 0);
        let img = encode(&syms, opts(LayoutEra::TokensBeforeOffsets));
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(&img).unwrap();
        let xz = e.finish().unwrap();
        let got = crate::extract(&xz, 1 << 24).unwrap();
        assert_eq!(got.entries.len(), 800);
        assert!(matches!(
            got.format,
            ImageFormat::Compressed {
                compression: crate::Compression::Xz
            }
        ));
        let text = got.to_proc_kallsyms();
        assert_eq!(
            text.lines().next().unwrap(),
            format!(
                "{:016x} {} {}",
                syms[0].addr,
                char::from(syms[0].kind),
                syms[0].name
            )
        );
    }
}
