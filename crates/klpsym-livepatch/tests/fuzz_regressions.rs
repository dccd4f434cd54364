//! Inputs the fuzz targets (fuzz/fuzz_targets/livepatch_*.rs) found, rebuilt by code, each
//! named after what broke. Run under the test profile (overflow checks on), so an arithmetic
//! overflow is a failure here as it was under the fuzzer.

use klpsym_core::{ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};
use klpsym_livepatch::{check, convert, Arch, KernelRules, LivepatchModule, Target};
use object::write::{Object, Relocation, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};

const R_X86_64_64: u32 = 1;

fn kernel() -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    b.push(ObjectId::VMLINUX, 0xffff_ffff_8100_0000, b'T', "_text")
        .unwrap();
    b.push(
        ObjectId::VMLINUX,
        0xffff_ffff_8110_0000,
        b't',
        "cmdline_proc_show",
    )
    .unwrap();
    let m = b.object("dummy", ObjectKind::Module);
    b.push(m, 0xffff_ffff_c000_1000, b't', "dummy_get_stats64")
        .unwrap();
    b.build()
}

/// A livepatch-marked module whose `.data` holds one relocation against `__this_module` at
/// `r_offset` (the layout heuristic looks for `klp_patch.mod = THIS_MODULE`).
fn module_with_this_module_reloc_at(r_offset: u64) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let data = obj.add_section(Vec::new(), b".data".to_vec(), SectionKind::Data);
    obj.append_section_data(data, &[0u8; 64], 8);
    let modinfo = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    obj.append_section_data(modinfo, b"livepatch=Y\0name=lp_fuzz\0", 1);
    let this = obj.add_section(
        Vec::new(),
        b".gnu.linkonce.this_module".to_vec(),
        SectionKind::Data,
    );
    let mut tm = vec![0u8; 0x380];
    tm[24..31].copy_from_slice(b"lp_fuzz");
    obj.append_section_data(this, &tm, 64);
    let this_sym = obj.add_symbol(Symbol {
        name: b"__this_module".to_vec(),
        value: 0,
        size: 0x380,
        kind: SymbolKind::Data,
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Section(this),
        flags: SymbolFlags::None,
    });
    obj.add_relocation(
        data,
        Relocation {
            offset: r_offset,
            symbol: this_sym,
            addend: 0,
            flags: RelocationFlags::Elf {
                r_type: object::elf::RelocationType(R_X86_64_64),
            },
        },
    )
    .unwrap();
    obj.write().unwrap()
}

/// Found by `livepatch_convert`: a relocation against `__this_module` at r_offset
/// 0xffff_ffff_ffff_fffe made the klp_patch layout heuristic compute `r_offset +
/// offsetof(klp_patch, objs)` with an overflowing add (a panic under overflow checks).
#[test]
fn this_module_relocation_at_the_end_of_the_address_space_does_not_overflow() {
    let bytes = module_with_this_module_reloc_at(0xffff_ffff_ffff_fffe);
    // Sanity: the fixture does carry that r_offset (little-endian, in a .rela entry).
    assert!(bytes
        .windows(8)
        .any(|w| w == 0xffff_ffff_ffff_fffeu64.to_le_bytes()));
    let k = kernel();
    let target = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64);
    // Either outcome is fine; what matters is an answer instead of a panic.
    if let Ok(m) = LivepatchModule::parse(&bytes) {
        let report = check(&m, &target);
        assert_eq!(report.module, "lp_fuzz");
    }
    let converted = convert(&bytes, &target, &[], &|_: &str| false);
    if let Ok((out, report)) = converted {
        assert!(report.conversions.is_empty(), "nothing here to convert");
        assert_eq!(out, bytes);
    }
}

/// The same module with its relocation at an ordinary place parses: the fixture above differs
/// from a valid module only in r_offset.
#[test]
fn this_module_relocation_fixture_is_otherwise_valid() {
    let bytes = module_with_this_module_reloc_at(0);
    let m = LivepatchModule::parse(&bytes).expect("the fixture parses");
    assert!(m.is_marked_livepatch());
    assert_eq!(m.modinfo("name"), Some("lp_fuzz"));
}

/// A module with `count` symbols that all have the same `name_len`-byte name: `object::write`
/// stores the name once, so every `st_name` points at that one string.
fn shared_name_module(count: usize, name_len: usize) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = obj.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
    obj.append_section_data(text, &[0xc3; 64], 16);
    let name = vec![b'n'; name_len];
    for i in 0..count {
        obj.add_symbol(Symbol {
            name: name.clone(),
            value: (i % 64) as u64,
            size: 1,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
    }
    obj.write().unwrap()
}

/// Found by `livepatch_check` under the fuzz allocation budget: 1,500 symbols sharing one
/// 20,000-byte name (a 56 KiB module) made the ELF reader copy 30 MB of names, growing with
/// the square of the input. Now a parse error that says why.
#[test]
fn symbols_sharing_one_long_name_are_refused_not_copied_quadratically() {
    let bytes = shared_name_module(1500, 20_000);
    assert!(bytes.len() < 64 * 1024, "the fixture stays small");
    let err = LivepatchModule::parse(&bytes).unwrap_err().to_string();
    assert!(err.contains("share names"), "{err}");
    assert!(err.contains("symbol "), "{err}");
    let k = kernel();
    let target = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64);
    assert!(convert(&bytes, &target, &[], &|_: &str| false).is_err());
    // A few symbols sharing a short name are fine (the error above is the budget's).
    let small = shared_name_module(8, 40);
    if let Err(e) = LivepatchModule::parse(&small) {
        assert!(!e.to_string().contains("share names"), "{e}");
    }
}

/// A hand-written ELF64 x86_64 ET_REL: `.text`, `.symtab` (one symbol), `.strtab`,
/// `.shstrtab`, then `k` SHT_RELA section headers that all point at one table of `m` entries.
/// (`object::write` cannot make sections overlap, so this writes the bytes itself.)
fn overlapping_rela_module(k: usize, m: usize) -> Vec<u8> {
    fn align8(v: &mut Vec<u8>) {
        while !v.len().is_multiple_of(8) {
            v.push(0);
        }
    }
    let shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0.rela.text\0";
    let mut out = vec![0u8; 64];
    let place = |out: &mut Vec<u8>, b: &[u8]| {
        let at = out.len() as u64;
        out.extend_from_slice(b);
        align8(out);
        at
    };
    let text = place(&mut out, &[0xc3; 16]);
    let mut syms = vec![0u8; 24];
    syms.extend_from_slice(&1u32.to_le_bytes()); // st_name "foo"
    syms.extend_from_slice(&[0x12, 0]); // GLOBAL FUNC, st_other
    syms.extend_from_slice(&1u16.to_le_bytes()); // .text
    syms.extend_from_slice(&[0; 16]); // value, size
    let symtab = place(&mut out, &syms);
    let strtab = place(&mut out, b"\0foo\0");
    let shstrtab = place(&mut out, shstr);
    let mut rela = Vec::with_capacity(24 * m);
    for i in 0..m {
        rela.extend_from_slice(&((i % 8) as u64).to_le_bytes());
        rela.extend_from_slice(&((1u64 << 32) | 1).to_le_bytes()); // sym 1, R_X86_64_64
        rela.extend_from_slice(&0i64.to_le_bytes());
    }
    let rela_at = place(&mut out, &rela);
    let shoff = out.len() as u64;
    #[allow(clippy::too_many_arguments)]
    fn sh(
        o: &mut Vec<u8>,
        name: u32,
        ty: u32,
        flags: u64,
        off: u64,
        size: u64,
        link: u32,
        info: u32,
        es: u64,
    ) {
        for v in [name, ty] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        for v in [flags, 0, off, size] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        for v in [link, info] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        for v in [8u64, es] {
            o.extend_from_slice(&v.to_le_bytes());
        }
    }
    sh(&mut out, 0, 0, 0, 0, 0, 0, 0, 0);
    sh(&mut out, 1, 1, 6, text, 16, 0, 0, 0);
    sh(&mut out, 7, 2, 0, symtab, syms.len() as u64, 3, 1, 24);
    sh(&mut out, 15, 3, 0, strtab, 5, 0, 0, 0);
    sh(&mut out, 23, 3, 0, shstrtab, shstr.len() as u64, 0, 0, 0);
    for _ in 0..k {
        sh(&mut out, 33, 4, 0x40, rela_at, rela.len() as u64, 2, 1, 24);
    }
    out[..4].copy_from_slice(b"\x7fELF");
    out[4..8].copy_from_slice(&[2, 1, 1, 0]); // ELF64, LE, version 1
    out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
    out[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    out[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    out[60..62].copy_from_slice(&((5 + k) as u16).to_le_bytes());
    out[62..64].copy_from_slice(&4u16.to_le_bytes()); // e_shstrndx
    out
}

/// Found by hand while checking the fuzz allocation budget (then kept as a seed): 500
/// relocation section headers sharing one 1,250-entry table (a 62 KB module) made the ELF
/// reader copy 625,000 relocations, growing with the square of the input. Now refused.
#[test]
fn relocation_sections_sharing_one_table_are_refused_not_copied_quadratically() {
    let bytes = overlapping_rela_module(500, 1250);
    assert!(bytes.len() < 64 * 1024, "the fixture stays small");
    let err = LivepatchModule::parse(&bytes).unwrap_err().to_string();
    assert!(err.contains("overlap"), "{err}");
    assert!(err.contains(".rela.text"), "{err}");
    let k = kernel();
    let target = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64);
    assert!(convert(&bytes, &target, &[], &|_: &str| false).is_err());
    // One relocation section over the same table is an ordinary object: no such error.
    let one = overlapping_rela_module(1, 1250);
    if let Err(e) = LivepatchModule::parse(&one) {
        assert!(!e.to_string().contains("overlap"), "{e}");
    }
}

/// The bounds above never refuse a real module: every livepatch module built in the lab (with
/// its debug info) parses. Needs KLPSYM_TEST_LAB_DIR (scripts/test.sh sets it); skips without.
#[test]
fn the_bounds_accept_every_real_lab_module() {
    let Some(dir) = klpsym_testkit::lab::lab("KLPSYM_TEST_LAB_DIR") else {
        return;
    };
    let cases = std::path::Path::new(&dir).join("livepatch");
    let mut parsed = 0;
    for case in std::fs::read_dir(&cases).expect("the lab's livepatch cases") {
        let case = case.unwrap().path();
        if !case.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(case).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "ko") {
                let bytes = std::fs::read(&p).unwrap();
                if let Err(e) = LivepatchModule::parse(&bytes) {
                    let e = e.to_string();
                    assert!(
                        !e.contains("share names") && !e.contains("overlap"),
                        "{}: {e}",
                        p.display()
                    );
                }
                parsed += 1;
            }
        }
    }
    assert!(parsed > 0, "no .ko under {}", cases.display());
}

/// Found by `livepatch_convert` (fuzz/artifacts/livepatch_convert/crash-ec338877...): a
/// relocation section whose sh_info names a section that does not exist. The kernel's loader
/// skips such a section; `convert` skipped it too, but the sections it appends made the index
/// valid in its output, so converting the output again found new work. Now it is refused.
#[test]
fn relocation_section_targeting_a_missing_section_is_refused() {
    let mut bytes = module_with_this_module_reloc_at(0);
    // Point the .rela.data section's sh_info past the last section.
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(&*bytes).unwrap();
    let shoff = file.elf_header().e_shoff.get(object::Endianness::Little) as usize;
    let shnum = file.elf_header().e_shnum.get(object::Endianness::Little) as usize;
    let rela_index = file
        .elf_section_table()
        .iter()
        .position(|s| s.sh_type.get(object::Endianness::Little) == object::elf::SHT_RELA)
        .expect("a .rela section");
    drop(file);
    let info_at = shoff + rela_index * 64 + 44;
    bytes[info_at..info_at + 4].copy_from_slice(&(shnum as u32 + 3).to_le_bytes());
    let k = kernel();
    let target = Target::new(&k, KernelRules::for_version(6, 1), Arch::X86_64);
    let err = convert(&bytes, &target, &[], &|_: &str| false).unwrap_err();
    assert!(format!("{err:?}").contains("does not exist"), "{err:?}");
}
