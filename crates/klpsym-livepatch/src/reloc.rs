//! The values the kernel writes for a RELA relocation, with its overflow checks and messages.
//!
//! x86_64 follows arch/x86/kernel/module.c `__write_relocate_add()`: compute
//! `val = S + A` (minus the place for PC-relative types), check overflow for 32/32S, then
//! refuse a target whose existing bytes are not zero, then write. arm64 follows
//! arch/arm64/kernel/module.c `apply_relocate_add()` (`reloc_data`, `reloc_insn_movw`,
//! `reloc_insn_imm`): no zero-target check, instruction fields re-encoded in place.
//!
//! Offline the place P (where the patch module's section lands) is often unknown: values that
//! depend on it come back as `None` with the expression `S + A - P`, and overflow checks that
//! depend on it are reported as `overflow_unknown`. Known limits: the arm64 erratum 843419
//! ADRP rewrite and the PLT veneers of JUMP26/CALL26 (whose address only the loader knows)
//! are reported as notes, not computed.

use crate::consts as elf;
use serde::Serialize;

use crate::elf::Arch;

/// -ENOEXEC, what the arch relocation code returns.
pub const ENOEXEC: i32 = 8;

/// One relocation to compute.
#[derive(Debug, Clone, Copy)]
pub struct RelocInput<'a> {
    /// Relocation type.
    pub r_type: u32,
    /// S: the resolved symbol value.
    pub symbol_value: u64,
    /// A.
    pub addend: i64,
    /// P, when the target section's address is known.
    pub place: Option<u64>,
    /// The bytes currently at the place (at least the relocation's width; fewer means the
    /// relocation runs past its section).
    pub existing: &'a [u8],
}

/// What the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// S + A.
    pub s_plus_a: u64,
    /// `S + A` or `S + A - P` (or the arm64 page form).
    pub expression: &'static str,
    /// The value computed (before truncation to the field); `None` when it needs P.
    pub value: Option<u64>,
    /// Bytes written at the place (the whole instruction for arm64 instruction types);
    /// `None` when they need P.
    pub bytes: Option<Vec<u8>>,
    /// Width of the write in bytes.
    pub width: u8,
    /// True when an overflow check applies but depends on the unknown P.
    pub overflow_unknown: bool,
    /// A remark (PLT veneer, erratum).
    pub note: Option<String>,
}

/// A relocation the kernel refuses: its log lines and errno.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelocFailure {
    /// The kernel's lines, in order, as printed (no `livepatch: ` prefix: these come from
    /// arch code).
    pub lines: Vec<String>,
    /// The errno the load fails with.
    pub errno: i32,
}

/// The name of a relocation type, for reports.
pub fn type_name(arch: Arch, t: u32) -> String {
    let n = match (arch, t) {
        (Arch::X86_64, elf::R_X86_64_NONE) => "R_X86_64_NONE",
        (Arch::X86_64, elf::R_X86_64_64) => "R_X86_64_64",
        (Arch::X86_64, elf::R_X86_64_32) => "R_X86_64_32",
        (Arch::X86_64, elf::R_X86_64_32S) => "R_X86_64_32S",
        (Arch::X86_64, elf::R_X86_64_PC32) => "R_X86_64_PC32",
        (Arch::X86_64, elf::R_X86_64_PLT32) => "R_X86_64_PLT32",
        (Arch::X86_64, elf::R_X86_64_PC64) => "R_X86_64_PC64",
        (Arch::Aarch64, elf::R_AARCH64_ABS64) => "R_AARCH64_ABS64",
        (Arch::Aarch64, elf::R_AARCH64_PREL32) => "R_AARCH64_PREL32",
        (Arch::Aarch64, elf::R_AARCH64_CALL26) => "R_AARCH64_CALL26",
        (Arch::Aarch64, elf::R_AARCH64_JUMP26) => "R_AARCH64_JUMP26",
        (Arch::Aarch64, elf::R_AARCH64_ADR_PREL_PG_HI21) => "R_AARCH64_ADR_PREL_PG_HI21",
        (Arch::Aarch64, elf::R_AARCH64_ADD_ABS_LO12_NC) => "R_AARCH64_ADD_ABS_LO12_NC",
        _ => return format!("type {t}"),
    };
    n.to_string()
}

/// Computes one relocation like the kernel. `module` is the patch module's name (arch
/// messages print it). `Ok(None)` is a NONE relocation (nothing written).
pub fn apply(
    arch: Arch,
    module: &str,
    input: &RelocInput<'_>,
) -> Result<Option<Applied>, RelocFailure> {
    match arch {
        Arch::X86_64 => x86_64(module, input),
        Arch::Aarch64 => aarch64(module, input),
    }
}

fn x86_64(module: &str, r: &RelocInput<'_>) -> Result<Option<Applied>, RelocFailure> {
    let val = r.symbol_value.wrapping_add(r.addend as u64);
    let t = r.r_type;
    let overflow = |val: u64| RelocFailure {
        lines: vec![
            format!("overflow in relocation type {t} val {val:x}"),
            format!("`{module}' likely not compiled with -mcmodel=kernel"),
        ],
        errno: ENOEXEC,
    };
    let (width, pcrel) = match t {
        elf::R_X86_64_NONE => return Ok(None),
        elf::R_X86_64_64 => (8u8, false),
        elf::R_X86_64_32 => {
            if val != u64::from(val as u32) {
                return Err(overflow(val));
            }
            (4, false)
        }
        elf::R_X86_64_32S => {
            if val as i64 != i64::from(val as i32) {
                return Err(overflow(val));
            }
            (4, false)
        }
        elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 => (4, true),
        elf::R_X86_64_PC64 => (8, true),
        _ => {
            return Err(RelocFailure {
                lines: vec![format!("{module}: Unknown rela relocation: {t}")],
                errno: ENOEXEC,
            })
        }
    };
    let value = if pcrel {
        r.place.map(|p| val.wrapping_sub(p))
    } else {
        Some(val)
    };
    let w = usize::from(width);
    if r.existing.len() < w || r.existing[..w].iter().any(|&b| b != 0) {
        let shown = value.map_or_else(|| "<S+A-P>".to_string(), |v| format!("{v:x}"));
        return Err(RelocFailure {
            lines: vec![format!(
                "x86/modules: Invalid relocation target, existing value is nonzero for type {t}, loc <hashed %p>, val {shown}"
            )],
            errno: ENOEXEC,
        });
    }
    Ok(Some(Applied {
        s_plus_a: val,
        expression: if pcrel { "S + A - P" } else { "S + A" },
        value,
        bytes: value.map(|v| v.to_le_bytes()[..w].to_vec()),
        width,
        overflow_unknown: false,
        note: None,
    }))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Abs,
    Prel,
    Page,
}

#[derive(Clone, Copy)]
enum Imm {
    Movw16,
    Imm26,
    Imm19,
    Imm14,
    Imm12,
    Adr,
}

/// `aarch64_insn_encode_immediate()`.
fn encode_imm(kind: Imm, insn: u32, imm: u64) -> u32 {
    let (mask, shift, imm) = match kind {
        Imm::Imm26 => ((1u32 << 26) - 1, 0, imm),
        Imm::Imm19 => ((1u32 << 19) - 1, 5, imm),
        Imm::Movw16 => ((1u32 << 16) - 1, 5, imm),
        Imm::Imm14 => ((1u32 << 14) - 1, 5, imm),
        Imm::Imm12 => ((1u32 << 12) - 1, 10, imm),
        Imm::Adr => {
            let immlo = imm & 3;
            let immhi = (imm >> 2) & 0x7ffff;
            ((3u32 << 24) | 0x7ffff, 5, (immlo << 24) | immhi)
        }
    };
    (insn & !(mask << shift)) | (((imm as u32) & mask) << shift)
}

fn do_reloc(op: Op, place: u64, val: u64) -> i64 {
    match op {
        Op::Abs => val as i64,
        Op::Prel => val.wrapping_sub(place) as i64,
        Op::Page => ((val & !0xfff).wrapping_sub(place & !0xfff)) as i64,
    }
}

/// `reloc_insn_imm()`: new instruction and whether it overflowed.
fn insn_imm(op: Op, place: u64, val: u64, insn: u32, lsb: u32, len: u32, kind: Imm) -> (u32, bool) {
    let sval = do_reloc(op, place, val) >> lsb;
    let imm_mask = ((1u64 << (lsb + len)) - 1) >> lsb;
    let insn = encode_imm(kind, insn, sval as u64 & imm_mask);
    let upper = (sval & !((imm_mask >> 1) as i64)) >> (len - 1);
    (insn, (upper.wrapping_add(1) as u64) >= 2)
}

/// `reloc_insn_movw()`.
fn insn_movw(op: Op, place: u64, val: u64, insn: u32, lsb: u32, signed: bool) -> (u32, bool) {
    let sval = do_reloc(op, place, val);
    let mut imm = (sval >> lsb) as u64;
    let mut insn = insn;
    if signed {
        insn &= !(3 << 29);
        if sval >= 0 {
            insn |= 2 << 29;
        } else {
            imm = !imm;
        }
    }
    (
        encode_imm(Imm::Movw16, insn, imm),
        imm > u64::from(u16::MAX),
    )
}

/// `reloc_data()`: bytes written and whether it overflowed.
fn data(op: Op, place: u64, val: u64, bits: u32) -> (Vec<u8>, bool) {
    let sval = do_reloc(op, place, val);
    match bits {
        16 => {
            let ovf = match op {
                Op::Abs => !(0..=i64::from(u16::MAX)).contains(&sval),
                _ => !(i64::from(i16::MIN)..=i64::from(i16::MAX)).contains(&sval),
            };
            ((sval as i16).to_le_bytes().to_vec(), ovf)
        }
        32 => {
            let ovf = match op {
                Op::Abs => !(0..=i64::from(u32::MAX)).contains(&sval),
                _ => !(i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&sval),
            };
            ((sval as i32).to_le_bytes().to_vec(), ovf)
        }
        _ => (sval.to_le_bytes().to_vec(), false),
    }
}

fn aarch64(module: &str, r: &RelocInput<'_>) -> Result<Option<Applied>, RelocFailure> {
    use elf::*;
    let val = r.symbol_value.wrapping_add(r.addend as u64);
    let t = r.r_type;
    enum K {
        Data(Op, u32, bool),
        Movw(Op, u32, bool, bool),
        Insn(Op, u32, u32, Imm, bool),
    }
    let k = match t {
        0 | R_AARCH64_NONE => return Ok(None),
        R_AARCH64_ABS64 => K::Data(Op::Abs, 64, false),
        R_AARCH64_ABS32 => K::Data(Op::Abs, 32, true),
        R_AARCH64_ABS16 => K::Data(Op::Abs, 16, true),
        R_AARCH64_PREL64 => K::Data(Op::Prel, 64, false),
        R_AARCH64_PREL32 => K::Data(Op::Prel, 32, true),
        R_AARCH64_PREL16 => K::Data(Op::Prel, 16, true),
        R_AARCH64_MOVW_UABS_G0_NC => K::Movw(Op::Abs, 0, false, false),
        R_AARCH64_MOVW_UABS_G0 => K::Movw(Op::Abs, 0, false, true),
        R_AARCH64_MOVW_UABS_G1_NC => K::Movw(Op::Abs, 16, false, false),
        R_AARCH64_MOVW_UABS_G1 => K::Movw(Op::Abs, 16, false, true),
        R_AARCH64_MOVW_UABS_G2_NC => K::Movw(Op::Abs, 32, false, false),
        R_AARCH64_MOVW_UABS_G2 => K::Movw(Op::Abs, 32, false, true),
        R_AARCH64_MOVW_UABS_G3 => K::Movw(Op::Abs, 48, false, false),
        R_AARCH64_MOVW_SABS_G0 => K::Movw(Op::Abs, 0, true, true),
        R_AARCH64_MOVW_SABS_G1 => K::Movw(Op::Abs, 16, true, true),
        R_AARCH64_MOVW_SABS_G2 => K::Movw(Op::Abs, 32, true, true),
        R_AARCH64_MOVW_PREL_G0_NC => K::Movw(Op::Prel, 0, false, false),
        R_AARCH64_MOVW_PREL_G0 => K::Movw(Op::Prel, 0, true, true),
        R_AARCH64_MOVW_PREL_G1_NC => K::Movw(Op::Prel, 16, false, false),
        R_AARCH64_MOVW_PREL_G1 => K::Movw(Op::Prel, 16, true, true),
        R_AARCH64_MOVW_PREL_G2_NC => K::Movw(Op::Prel, 32, false, false),
        R_AARCH64_MOVW_PREL_G2 => K::Movw(Op::Prel, 32, true, true),
        R_AARCH64_MOVW_PREL_G3 => K::Movw(Op::Prel, 48, true, false),
        R_AARCH64_LD_PREL_LO19 => K::Insn(Op::Prel, 2, 19, Imm::Imm19, true),
        R_AARCH64_ADR_PREL_LO21 => K::Insn(Op::Prel, 0, 21, Imm::Adr, true),
        R_AARCH64_ADR_PREL_PG_HI21 => K::Insn(Op::Page, 12, 21, Imm::Adr, true),
        R_AARCH64_ADR_PREL_PG_HI21_NC => K::Insn(Op::Page, 12, 21, Imm::Adr, false),
        R_AARCH64_ADD_ABS_LO12_NC | R_AARCH64_LDST8_ABS_LO12_NC => {
            K::Insn(Op::Abs, 0, 12, Imm::Imm12, false)
        }
        R_AARCH64_LDST16_ABS_LO12_NC => K::Insn(Op::Abs, 1, 11, Imm::Imm12, false),
        R_AARCH64_LDST32_ABS_LO12_NC => K::Insn(Op::Abs, 2, 10, Imm::Imm12, false),
        R_AARCH64_LDST64_ABS_LO12_NC => K::Insn(Op::Abs, 3, 9, Imm::Imm12, false),
        R_AARCH64_LDST128_ABS_LO12_NC => K::Insn(Op::Abs, 4, 8, Imm::Imm12, false),
        R_AARCH64_TSTBR14 => K::Insn(Op::Prel, 2, 14, Imm::Imm14, true),
        R_AARCH64_CONDBR19 => K::Insn(Op::Prel, 2, 19, Imm::Imm19, true),
        R_AARCH64_JUMP26 | R_AARCH64_CALL26 => K::Insn(Op::Prel, 2, 26, Imm::Imm26, true),
        _ => {
            return Err(RelocFailure {
                lines: vec![format!("module {module}: unsupported RELA relocation: {t}")],
                errno: ENOEXEC,
            })
        }
    };
    let overflow = RelocFailure {
        lines: vec![format!(
            "module {module}: overflow in relocation type {t} val {val:x}"
        )],
        errno: ENOEXEC,
    };
    let op = match k {
        K::Data(op, ..) | K::Movw(op, ..) | K::Insn(op, ..) => op,
    };
    let needs_place = op != Op::Abs;
    let expression = match op {
        Op::Abs => "S + A",
        Op::Prel => "S + A - P",
        Op::Page => "Page(S + A) - Page(P)",
    };
    let Some(place) = r.place.or((!needs_place).then_some(0)) else {
        let checks = match k {
            K::Data(_, _, c) | K::Movw(_, _, _, c) | K::Insn(.., c) => c,
        };
        let width = if let K::Data(_, bits, _) = k {
            (bits / 8) as u8
        } else {
            4
        };
        return Ok(Some(Applied {
            s_plus_a: val,
            expression,
            value: None,
            bytes: None,
            width,
            overflow_unknown: checks,
            note: matches!(t, R_AARCH64_JUMP26 | R_AARCH64_CALL26).then(|| {
                "out of range branches go through a PLT veneer the loader emits".to_string()
            }),
        }));
    };
    let insn = || -> Result<u32, RelocFailure> {
        r.existing
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| RelocFailure {
                lines: vec![format!(
                    "relocation type {t} runs past the end of its section"
                )],
                errno: ENOEXEC,
            })
    };
    let (bytes, ovf, check, width, note) = match k {
        K::Data(_, bits, _) if r.existing.len() < (bits / 8) as usize => {
            return Err(RelocFailure {
                lines: vec![format!(
                    "relocation type {t} runs past the end of its section"
                )],
                errno: ENOEXEC,
            })
        }
        K::Data(op, bits, check) => {
            let (b, o) = data(op, place, val, bits);
            (b, o, check, (bits / 8) as u8, None)
        }
        K::Movw(op, lsb, signed, check) => {
            let (i, o) = insn_movw(op, place, val, insn()?, lsb, signed);
            (i.to_le_bytes().to_vec(), o, check, 4, None)
        }
        K::Insn(op, lsb, len, kind, check) => {
            let (i, o) = insn_imm(op, place, val, insn()?, lsb, len, kind);
            if o && matches!(t, R_AARCH64_JUMP26 | R_AARCH64_CALL26) {
                return Ok(Some(Applied {
                    s_plus_a: val,
                    expression,
                    value: None,
                    bytes: None,
                    width: 4,
                    overflow_unknown: false,
                    note: Some(
                        "out of branch range: the loader redirects it through a PLT veneer".into(),
                    ),
                }));
            }
            (i.to_le_bytes().to_vec(), o, check, 4, None)
        }
    };
    if check && ovf {
        return Err(overflow);
    }
    Ok(Some(Applied {
        s_plus_a: val,
        expression,
        value: Some(do_reloc(op, place, val) as u64),
        bytes: Some(bytes),
        width,
        overflow_unknown: false,
        note,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn x86(t: u32, s: u64, a: i64, p: Option<u64>) -> Result<Option<Applied>, RelocFailure> {
        apply(
            Arch::X86_64,
            "lp",
            &RelocInput {
                r_type: t,
                symbol_value: s,
                addend: a,
                place: p,
                existing: &[0; 8],
            },
        )
    }

    #[test]
    fn x86_types_and_overflow() {
        let k = 0xffff_ffff_8100_0000u64;
        assert_eq!(x86(elf::R_X86_64_NONE, k, 0, None), Ok(None));
        let a = x86(elf::R_X86_64_64, k, 8, None).unwrap().unwrap();
        assert_eq!(a.bytes.unwrap(), (k + 8).to_le_bytes().to_vec());
        let a = x86(elf::R_X86_64_32S, k, 0, None).unwrap().unwrap();
        assert_eq!(a.bytes.unwrap(), vec![0, 0, 0, 0x81]);
        let e = x86(elf::R_X86_64_32, k, 0, None).unwrap_err();
        assert_eq!(
            e.lines[0],
            "overflow in relocation type 10 val ffffffff81000000"
        );
        assert_eq!(e.lines[1], "`lp' likely not compiled with -mcmodel=kernel");
        assert_eq!(e.errno, ENOEXEC);
        // a module address above the kernel's 2 GiB window overflows 32S
        let e = x86(
            elf::R_X86_64_32S,
            0xffff_ffff_c000_0000 - 0x1_0000_0000,
            0,
            None,
        )
        .unwrap_err();
        assert!(e.lines[0].starts_with("overflow in relocation type 11 val "));
        // PC32 needs P; with P it is S + A - P truncated
        let a = x86(elf::R_X86_64_PC32, k, -4, None).unwrap().unwrap();
        assert_eq!((a.value, a.expression), (None, "S + A - P"));
        let a = x86(elf::R_X86_64_PLT32, k, -4, Some(k - 0x100))
            .unwrap()
            .unwrap();
        assert_eq!(a.bytes.unwrap(), 0xfcu32.to_le_bytes().to_vec());
        let a = x86(elf::R_X86_64_PC64, 0x10, 0, Some(0x20))
            .unwrap()
            .unwrap();
        assert_eq!(a.value, Some(u64::MAX - 0xf));
        let e = x86(elf::R_X86_64_GOTPCREL, k, 0, None).unwrap_err();
        assert_eq!(e.lines, vec!["lp: Unknown rela relocation: 9".to_string()]);
    }

    #[test]
    fn x86_nonzero_target() {
        let r = RelocInput {
            r_type: elf::R_X86_64_64,
            symbol_value: 0x1234,
            addend: 0,
            place: None,
            existing: &[0, 0, 0, 0, 1, 0, 0, 0],
        };
        let e = apply(Arch::X86_64, "lp", &r).unwrap_err();
        assert_eq!(
            e.lines[0],
            "x86/modules: Invalid relocation target, existing value is nonzero for type 1, loc <hashed %p>, val 1234"
        );
        // only the relocation's width is checked
        let r = RelocInput {
            r_type: elf::R_X86_64_32S,
            existing: &[0, 0, 0, 0, 1, 0, 0, 0],
            ..r
        };
        assert!(apply(Arch::X86_64, "lp", &r).is_ok());
    }

    fn a64(t: u32, s: u64, p: Option<u64>, insn: u32) -> Result<Option<Applied>, RelocFailure> {
        apply(
            Arch::Aarch64,
            "lp",
            &RelocInput {
                r_type: t,
                symbol_value: s,
                addend: 0,
                place: p,
                existing: &insn.to_le_bytes(),
            },
        )
    }

    #[test]
    fn arm64_types() {
        use elf::*;
        let bl = 0x9400_0000u32;
        let a = a64(R_AARCH64_CALL26, 0x1000, Some(0x800), bl)
            .unwrap()
            .unwrap();
        assert_eq!(a.bytes.unwrap(), (bl | (0x800 >> 2)).to_le_bytes().to_vec());
        // out of range: PLT veneer, not an error
        let a = a64(R_AARCH64_CALL26, 0x1000_0000_0000, Some(0), bl)
            .unwrap()
            .unwrap();
        assert!(a.note.unwrap().contains("PLT"));
        let e = a64(R_AARCH64_CONDBR19, 0x10_0000, Some(0), 0x5400_0000).unwrap_err();
        assert_eq!(
            e.lines,
            vec![format!(
                "module lp: overflow in relocation type {R_AARCH64_CONDBR19} val 100000"
            )]
        );
        // adrp x0, page ; add x0, x0, lo12
        let a = a64(
            R_AARCH64_ADR_PREL_PG_HI21,
            0x12345,
            Some(0x1000),
            0x9000_0000,
        )
        .unwrap()
        .unwrap();
        let insn = u32::from_le_bytes(a.bytes.unwrap().try_into().unwrap());
        let imm = ((insn >> 29) & 3) | (((insn >> 5) & 0x7ffff) << 2);
        assert_eq!(imm, 0x11);
        let a = a64(R_AARCH64_ADD_ABS_LO12_NC, 0x12345, None, 0x9100_0000)
            .unwrap()
            .unwrap();
        let insn = u32::from_le_bytes(a.bytes.unwrap().try_into().unwrap());
        assert_eq!((insn >> 10) & 0xfff, 0x345);
        let a = a64(R_AARCH64_LDST64_ABS_LO12_NC, 0x12348, None, 0xf940_0000)
            .unwrap()
            .unwrap();
        let insn = u32::from_le_bytes(a.bytes.unwrap().try_into().unwrap());
        assert_eq!((insn >> 10) & 0xfff, 0x348 >> 3);
        // data
        let e = a64(R_AARCH64_ABS32, 0x1_0000_0000, None, 0).unwrap_err();
        assert!(e.lines[0].starts_with("module lp: overflow in relocation type 258"));
        let e = a64(R_AARCH64_ABS16, 0x1_0000, None, 0).unwrap_err();
        assert!(e.lines[0].contains("type 259"));
        let a = a64(R_AARCH64_PREL32, 0x100, None, 0).unwrap().unwrap();
        assert!(a.overflow_unknown);
        let e = a64(R_AARCH64_PREL32, 0x1_0000_0000, Some(0), 0).unwrap_err();
        assert!(e.lines[0].contains("type 261"));
        // movw: MOVZ/MOVN selection for signed groups
        let a = a64(R_AARCH64_MOVW_SABS_G0, (-2i64) as u64, None, 0x9280_0000)
            .unwrap()
            .unwrap();
        let insn = u32::from_le_bytes(a.bytes.unwrap().try_into().unwrap());
        assert_eq!(((insn >> 29) & 3, (insn >> 5) & 0xffff), (0, 1));
        let e = a64(R_AARCH64_MOVW_UABS_G0, 0x1_0000, None, 0xd280_0000).unwrap_err();
        assert!(e.lines[0].contains("type 263"));
        assert!(a64(R_AARCH64_MOVW_UABS_G0_NC, 0x1_0000, None, 0xd280_0000).is_ok());
        assert!(a64(R_AARCH64_MOVW_UABS_G3, u64::MAX, None, 0xd280_0000).is_ok());
        let e = a64(R_AARCH64_TLSDESC_CALL, 0, None, 0).unwrap_err();
        assert_eq!(
            e.lines[0],
            format!("module lp: unsupported RELA relocation: {R_AARCH64_TLSDESC_CALL}")
        );
    }

    proptest! {
        /// x86: the value written equals an i128 reference computation of S + A (- P), and the
        /// overflow verdicts match the field ranges.
        #[test]
        fn x86_matches_reference(s in any::<u64>(), a in any::<i32>(), p in any::<u64>(), t in 0usize..6) {
            let types = [elf::R_X86_64_64, elf::R_X86_64_32, elf::R_X86_64_32S, elf::R_X86_64_PC32, elf::R_X86_64_PLT32, elf::R_X86_64_PC64];
            let ty = types[t];
            let exact = i128::from(s) + i128::from(a);
            let sa = exact.rem_euclid(1i128 << 64);
            let pcrel = matches!(ty, elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 | elf::R_X86_64_PC64);
            let v = if pcrel { (sa - i128::from(p)).rem_euclid(1i128 << 64) } else { sa };
            let res = x86(ty, s, i64::from(a), Some(p));
            let fits = match ty {
                elf::R_X86_64_32 => sa <= i128::from(u32::MAX),
                elf::R_X86_64_32S => {
                    let signed = if sa >= 1i128 << 63 { sa - (1i128 << 64) } else { sa };
                    (i128::from(i32::MIN)..=i128::from(i32::MAX)).contains(&signed)
                }
                _ => true,
            };
            match res {
                Ok(Some(app)) => {
                    prop_assert!(fits);
                    let w = usize::from(app.width);
                    let expect = (v as u64).to_le_bytes()[..w].to_vec();
                    prop_assert_eq!(app.bytes.unwrap(), expect);
                }
                Err(e) => { prop_assert!(!fits); prop_assert!(e.lines[0].starts_with("overflow")); }
                Ok(None) => prop_assert!(false),
            }
        }

        /// arm64 branches: the encoded imm26 decodes back to S + A - P when in range.
        #[test]
        fn arm64_call26_round_trips(p in 0u64..(1 << 40), d in -(1i64 << 27)..(1i64 << 27)) {
            let p = p & !3;
            let d = d & !3;
            let s = p.wrapping_add(d as u64);
            let a = a64(elf::R_AARCH64_CALL26, s, Some(p), 0x9400_0000).unwrap().unwrap();
            let insn = u32::from_le_bytes(a.bytes.unwrap().try_into().unwrap());
            let imm = i64::from(((insn & 0x3ff_ffff) << 6) as i32 >> 6) << 2;
            prop_assert_eq!(imm, d);
            prop_assert_eq!(insn >> 26, 0x25);
        }
    }
}
