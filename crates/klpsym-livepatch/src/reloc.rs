//! The values the kernel writes for a RELA relocation, with its overflow checks and messages.
//!
//! x86_64 follows arch/x86/kernel/module.c `__write_relocate_add()`: compute
//! `val = S + A` (minus the place for PC-relative types), check overflow for 32/32S, then
//! refuse a target whose existing bytes are not zero, then write (before 6.3 the nonzero
//! check came first; see `x86_64()`). arm64 follows
//! arch/arm64/kernel/module.c `apply_relocate_add()` (`reloc_data`, `reloc_insn_movw`,
//! `reloc_insn_imm`): no zero-target check, instruction fields re-encoded in place.
//!
//! Offline the place P (where the patch module's section lands) is often unknown: values that
//! depend on it come back as `None` with the expression `S + A - P`, and overflow checks that
//! depend on it are reported as `overflow_unknown` unless the module window (`Site::window`)
//! decides them: certain to overflow, or certain to fit. Known limits: the arm64 erratum 843419
//! ADRP rewrite and the PLT veneers of JUMP26/CALL26 (whose address only the loader knows)
//! are reported as notes, not computed.

use crate::consts as elf;
use serde::Serialize;

use crate::elf::Arch;

/// -ENOEXEC, what the arch relocation code returns.
pub const ENOEXEC: i32 = 8;

/// Which kernel applies a relocation, and where it sits: the architectures' messages changed
/// over versions and since 6.19 (x86_64) name the relocation section and the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// The kernel's `major.minor`.
    pub kernel: (u32, u32),
    /// The relocation section's index in the module.
    pub rela_section: u32,
    /// The entry's index in its section.
    pub index: usize,
    /// Where the loader may place a module on this kernel (below and above the kernel
    /// image), when known: with P unknown, a PC-relative field that overflows for every
    /// place in it overflows for sure.
    pub window: Option<[(u64, u64); 2]>,
}

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
    /// The kernel and the entry's position.
    pub site: Site,
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
        (Arch::Aarch64, elf::R_AARCH64_NONE) => "R_AARCH64_NONE",
        (Arch::Aarch64, elf::R_AARCH64_ABS64) => "R_AARCH64_ABS64",
        (Arch::Aarch64, elf::R_AARCH64_ABS32) => "R_AARCH64_ABS32",
        (Arch::Aarch64, elf::R_AARCH64_ABS16) => "R_AARCH64_ABS16",
        (Arch::Aarch64, elf::R_AARCH64_PREL64) => "R_AARCH64_PREL64",
        (Arch::Aarch64, elf::R_AARCH64_PREL32) => "R_AARCH64_PREL32",
        (Arch::Aarch64, elf::R_AARCH64_PREL16) => "R_AARCH64_PREL16",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G0) => "R_AARCH64_MOVW_UABS_G0",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G0_NC) => "R_AARCH64_MOVW_UABS_G0_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G1) => "R_AARCH64_MOVW_UABS_G1",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G1_NC) => "R_AARCH64_MOVW_UABS_G1_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G2) => "R_AARCH64_MOVW_UABS_G2",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G2_NC) => "R_AARCH64_MOVW_UABS_G2_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_UABS_G3) => "R_AARCH64_MOVW_UABS_G3",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_SABS_G0) => "R_AARCH64_MOVW_SABS_G0",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_SABS_G1) => "R_AARCH64_MOVW_SABS_G1",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_SABS_G2) => "R_AARCH64_MOVW_SABS_G2",
        (Arch::Aarch64, elf::R_AARCH64_LD_PREL_LO19) => "R_AARCH64_LD_PREL_LO19",
        (Arch::Aarch64, elf::R_AARCH64_ADR_PREL_LO21) => "R_AARCH64_ADR_PREL_LO21",
        (Arch::Aarch64, elf::R_AARCH64_ADR_PREL_PG_HI21) => "R_AARCH64_ADR_PREL_PG_HI21",
        (Arch::Aarch64, elf::R_AARCH64_ADR_PREL_PG_HI21_NC) => "R_AARCH64_ADR_PREL_PG_HI21_NC",
        (Arch::Aarch64, elf::R_AARCH64_ADD_ABS_LO12_NC) => "R_AARCH64_ADD_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_LDST8_ABS_LO12_NC) => "R_AARCH64_LDST8_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_TSTBR14) => "R_AARCH64_TSTBR14",
        (Arch::Aarch64, elf::R_AARCH64_CONDBR19) => "R_AARCH64_CONDBR19",
        (Arch::Aarch64, elf::R_AARCH64_JUMP26) => "R_AARCH64_JUMP26",
        (Arch::Aarch64, elf::R_AARCH64_CALL26) => "R_AARCH64_CALL26",
        (Arch::Aarch64, elf::R_AARCH64_LDST16_ABS_LO12_NC) => "R_AARCH64_LDST16_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_LDST32_ABS_LO12_NC) => "R_AARCH64_LDST32_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_LDST64_ABS_LO12_NC) => "R_AARCH64_LDST64_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G0) => "R_AARCH64_MOVW_PREL_G0",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G0_NC) => "R_AARCH64_MOVW_PREL_G0_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G1) => "R_AARCH64_MOVW_PREL_G1",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G1_NC) => "R_AARCH64_MOVW_PREL_G1_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G2) => "R_AARCH64_MOVW_PREL_G2",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G2_NC) => "R_AARCH64_MOVW_PREL_G2_NC",
        (Arch::Aarch64, elf::R_AARCH64_MOVW_PREL_G3) => "R_AARCH64_MOVW_PREL_G3",
        (Arch::Aarch64, elf::R_AARCH64_LDST128_ABS_LO12_NC) => "R_AARCH64_LDST128_ABS_LO12_NC",
        (Arch::Aarch64, elf::R_AARCH64_TLSDESC_CALL) => "R_AARCH64_TLSDESC_CALL",
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

/// x86_64 (arch/x86/kernel/module.c, whose pr_fmt prefixes every line with "module: ").
/// Before 6.3 each type checks the place for nonzero bytes before its overflow check and
/// the message says "Skipping" with val = S + A; 6.3 (the livepatch clearing rework,
/// `__write_relocate_add()`) checks overflow first and prints the final value; 6.19 names
/// the section and the entry and prints the place unhashed.
fn x86_64(module: &str, r: &RelocInput<'_>) -> Result<Option<Applied>, RelocFailure> {
    let val = r.symbol_value.wrapping_add(r.addend as u64);
    let t = r.r_type;
    let site = r.site;
    let since = |v: (u32, u32)| site.kernel >= v;
    let overflow = |val: u64| RelocFailure {
        lines: vec![
            if since((6, 19)) {
                format!(
                    "module: overflow in relocation type {t} val {val:x} sec {} idx {}",
                    site.rela_section, site.index
                )
            } else {
                format!("module: overflow in relocation type {t} val {val:x}")
            },
            format!("module: `{module}' likely not compiled with -mcmodel=kernel"),
        ],
        errno: ENOEXEC,
    };
    let (width, pcrel, fits) = match t {
        elf::R_X86_64_NONE => return Ok(None),
        elf::R_X86_64_64 => (8u8, false, true),
        elf::R_X86_64_32 => (4, false, val == u64::from(val as u32)),
        elf::R_X86_64_32S => (4, false, val as i64 == i64::from(val as i32)),
        elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 => (4, true, true),
        elf::R_X86_64_PC64 => (8, true, true),
        _ => {
            return Err(RelocFailure {
                lines: vec![format!("module: {module}: Unknown rela relocation: {t}")],
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
    let dirty = r.existing.len() < w || r.existing[..w].iter().any(|&b| b != 0);
    if !fits && (since((6, 3)) || !dirty) {
        return Err(overflow(val));
    }
    if dirty {
        let line = if since((6, 19)) {
            format!(
                "module: x86/modules: Invalid relocation target, existing value is nonzero for sec {}, idx {}, type {t}, loc {}, val {}",
                site.rela_section,
                site.index,
                r.place.map_or_else(|| "<P>".to_string(), |p| format!("{p:x}")),
                value.map_or_else(|| "<S+A-P>".to_string(), |v| format!("{v:x}"))
            )
        } else if since((6, 3)) {
            format!(
                "module: x86/modules: Invalid relocation target, existing value is nonzero for type {t}, loc <hashed %p>, val {}",
                value.map_or_else(|| "<S+A-P>".to_string(), |v| format!("{v:x}"))
            )
        } else {
            format!(
                "module: x86/modules: Skipping invalid relocation target, existing value is nonzero for type {t}, loc <hashed %p>, val {val:x}"
            )
        };
        return Err(RelocFailure {
            lines: vec![line],
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

/// What a PC-relative arm64 field with an unknown place does wherever in `r.site.window`
/// the loader may put the module.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placed {
    /// It overflows at both ends of each part of the window, on the same side: the value is
    /// monotonic in P, so it overflows at every place between.
    Overflows,
    /// It fits at both ends of each part: so at every place between.
    Fits,
    /// It depends on the place (or no window is known).
    Depends,
}

fn window_verdict(module: &str, r: &RelocInput<'_>, op: Op, val: u64) -> Placed {
    let Some(window) = r.site.window else {
        return Placed::Depends;
    };
    let side = |p: u64| do_reloc(op, p, val) >= 0;
    // Some(true): overflows at p; Some(false): fits (a branch out of range takes a PLT
    // veneer: fits); None: another failure (the field runs past its section).
    let overflows = |p: u64| {
        let at = RelocInput {
            place: Some(p),
            site: Site {
                window: None,
                ..r.site
            },
            ..*r
        };
        match aarch64(module, &at) {
            Ok(_) => Some(false),
            Err(e) if e.lines[0].contains("overflow in relocation") => Some(true),
            Err(_) => None,
        }
    };
    let ends: Vec<(u64, u64)> = window
        .iter()
        .map(|&(lo, hi)| (lo & !3, hi.saturating_sub(4) & !3))
        .collect();
    if ends.iter().any(|&(a, b)| a > b) {
        return Placed::Depends;
    }
    let all_over = ends.iter().all(|&(a, b)| {
        overflows(a) == Some(true) && overflows(b) == Some(true) && side(a) == side(b)
    });
    if all_over {
        return Placed::Overflows;
    }
    if ends
        .iter()
        .all(|&(a, b)| overflows(a) == Some(false) && overflows(b) == Some(false))
    {
        return Placed::Fits;
    }
    Placed::Depends
}

/// arm64 (arch/arm64/kernel/module.c). Since 6.5 (3e35d303ab7d, the module VA range
/// rework) its pr_fmt prefixes every line with "Modules: ".
fn aarch64(module: &str, r: &RelocInput<'_>) -> Result<Option<Applied>, RelocFailure> {
    use elf::*;
    let val = r.symbol_value.wrapping_add(r.addend as u64);
    let t = r.r_type;
    let prefix = if r.site.kernel >= (6, 5) {
        "Modules: "
    } else {
        ""
    };
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
                lines: vec![format!(
                    "{prefix}module {module}: unsupported RELA relocation: {t}"
                )],
                errno: ENOEXEC,
            })
        }
    };
    let overflow = RelocFailure {
        lines: vec![format!(
            "{prefix}module {module}: overflow in relocation type {t} val {val:x}"
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
        let verdict = if checks {
            window_verdict(module, r, op, val)
        } else {
            Placed::Fits
        };
        if verdict == Placed::Overflows {
            return Err(overflow);
        }
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
            overflow_unknown: verdict == Placed::Depends,
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
mod tests;
