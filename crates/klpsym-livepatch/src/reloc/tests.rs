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
            site: SITE61,
        },
    )
}

const SITE61: Site = Site {
    kernel: (6, 1),
    rela_section: 7,
    index: 3,
    window: None,
};

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
        "module: overflow in relocation type 10 val ffffffff81000000"
    );
    assert_eq!(
        e.lines[1],
        "module: `lp' likely not compiled with -mcmodel=kernel"
    );
    assert_eq!(e.errno, ENOEXEC);
    // a module address above the kernel's 2 GiB window overflows 32S
    let e = x86(
        elf::R_X86_64_32S,
        0xffff_ffff_c000_0000 - 0x1_0000_0000,
        0,
        None,
    )
    .unwrap_err();
    assert!(e.lines[0].starts_with("module: overflow in relocation type 11 val "));
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
    assert_eq!(
        e.lines,
        vec!["module: lp: Unknown rela relocation: 9".to_string()]
    );
}

#[test]
fn x86_nonzero_target() {
    let r = RelocInput {
        r_type: elf::R_X86_64_64,
        symbol_value: 0x1234,
        addend: 0,
        place: None,
        existing: &[0, 0, 0, 0, 1, 0, 0, 0],
        site: SITE61,
    };
    let e = apply(Arch::X86_64, "lp", &r).unwrap_err();
    assert_eq!(
            e.lines[0],
            "module: x86/modules: Skipping invalid relocation target, existing value is nonzero for type 1, loc <hashed %p>, val 1234"
        );
    // 6.3 rewords it and prints the final value; 6.19 names the entry and the place.
    let pc = RelocInput {
        r_type: elf::R_X86_64_PC32,
        symbol_value: 0x1234,
        addend: -4,
        place: Some(0x1000),
        existing: &[1, 0, 0, 0],
        site: Site {
            kernel: (6, 3),
            ..SITE61
        },
    };
    let e = apply(Arch::X86_64, "lp", &pc).unwrap_err();
    assert_eq!(
            e.lines[0],
            "module: x86/modules: Invalid relocation target, existing value is nonzero for type 2, loc <hashed %p>, val 230"
        );
    let site = Site {
        kernel: (6, 19),
        ..SITE61
    };
    let e = apply(Arch::X86_64, "lp", &RelocInput { site, ..pc }).unwrap_err();
    assert_eq!(
            e.lines[0],
            "module: x86/modules: Invalid relocation target, existing value is nonzero for sec 7, idx 3, type 2, loc 1000, val 230"
        );
    // before 6.3 a dirty place is reported before an overflow; from 6.3 after it
    let dirty32 = RelocInput {
        r_type: elf::R_X86_64_32,
        symbol_value: 0xffff_ffff_8100_0000,
        addend: 0,
        place: None,
        existing: &[1, 0, 0, 0],
        site: SITE61,
    };
    let e = apply(Arch::X86_64, "lp", &dirty32).unwrap_err();
    assert!(e.lines[0].contains("Skipping invalid"), "{e:?}");
    let site = Site {
        kernel: (6, 19),
        ..SITE61
    };
    let e = apply(Arch::X86_64, "lp", &RelocInput { site, ..dirty32 }).unwrap_err();
    assert_eq!(
        e.lines[0],
        "module: overflow in relocation type 10 val ffffffff81000000 sec 7 idx 3"
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
            site: SITE61,
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
    // P unknown: an overflow wherever the loader may put the module is certain.
    let (text, end) = (0xffff_8000_8000_0000u64, 0xffff_8000_8300_0000u64);
    let site = Site {
        kernel: (6, 12),
        window: Some([(end - (2 << 30), text), (end, text + (2 << 30))]),
        ..SITE61
    };
    let adr = |s: u64, t: u32| RelocInput {
        r_type: t,
        symbol_value: s,
        addend: 0,
        place: None,
        existing: &[0; 4],
        site,
    };
    let deep = text + 0x205_79c0;
    assert!(apply(Arch::Aarch64, "m", &adr(deep, R_AARCH64_ADR_PREL_LO21)).is_err());
    assert!(apply(Arch::Aarch64, "m", &adr(deep, R_AARCH64_PREL16)).is_err());
    // near the image's end a module right above it is in range: not certain
    let a = apply(
        Arch::Aarch64,
        "m",
        &adr(end - 0x100, R_AARCH64_ADR_PREL_LO21),
    );
    assert!(a.unwrap().unwrap().overflow_unknown);
    // a branch out of range takes a PLT veneer: never an error, whatever the place
    let a = apply(Arch::Aarch64, "m", &adr(deep, R_AARCH64_CALL26));
    assert!(!a.unwrap().unwrap().overflow_unknown);
    // ADRP reaches ±4 GiB: from anywhere in the 2 GiB window it fits for sure
    let a = apply(Arch::Aarch64, "m", &adr(deep, R_AARCH64_ADR_PREL_PG_HI21));
    assert!(!a.unwrap().unwrap().overflow_unknown);
    // without a window nothing is certain
    let none = RelocInput {
        site: SITE61,
        ..adr(deep, R_AARCH64_ADR_PREL_LO21)
    };
    assert!(
        apply(Arch::Aarch64, "m", &none)
            .unwrap()
            .unwrap()
            .overflow_unknown
    );
    // 6.5 on: the arm64 module code's pr_fmt
    let r = RelocInput {
        r_type: R_AARCH64_ABS32,
        symbol_value: 0xffff_8000_8205_79c0,
        addend: 0,
        place: None,
        existing: &[0; 4],
        site: Site {
            kernel: (6, 12),
            ..SITE61
        },
    };
    assert_eq!(
        apply(Arch::Aarch64, "m", &r).unwrap_err().lines,
        vec!["Modules: module m: overflow in relocation type 258 val ffff8000820579c0".to_string()]
    );
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
            Err(e) => { prop_assert!(!fits); prop_assert!(e.lines[0].starts_with("module: overflow")); }
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
