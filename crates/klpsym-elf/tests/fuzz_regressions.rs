//! Inputs the fuzz targets (fuzz/fuzz_targets/{vmlinux,module}_elf.rs) found, rebuilt by code,
//! each named after what broke.

use klpsym_elf::{module_kallsyms, vmlinux_kallsyms, ElfError};
use object::write::{Object, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};

/// An object with `count` global functions that all have the same `name_len`-byte name.
/// `object::write` stores a repeated name once, so every `st_name` points at that one string:
/// the input grows by 24 bytes per symbol while the names it stands for grow by `name_len`.
fn shared_name_object(count: usize, name_len: usize, e_type: u16) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = obj.add_section(Vec::new(), b".text".to_vec(), SectionKind::Text);
    obj.append_section_data(text, &[0xc3; 64], 16);
    let mi = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    obj.append_section_data(mi, b"name=shared\0", 1);
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
    let mut bytes = obj.write().unwrap();
    bytes[16..18].copy_from_slice(&e_type.to_le_bytes());
    bytes
}

fn assert_refused(r: Result<usize, ElfError>, input: usize) {
    match r {
        Err(ElfError::Malformed { what, context }) => {
            assert!(what.contains("share names"), "{what}");
            assert!(context.starts_with(".symtab entry"), "{context}");
        }
        other => panic!("{input}-byte input: expected a refusal, got {other:?}"),
    }
}

/// Found by `module_elf`/`vmlinux_elf` under the fuzz allocation budget: 1,500 symbols
/// sharing one 20,000-byte name (a 56 KiB file) made the parser copy 30 MB of names, and the
/// copies grow with the square of the input. Now refused with the place named.
#[test]
fn symbols_sharing_one_long_name_are_refused_not_copied_quadratically() {
    let module = shared_name_object(1500, 20_000, 1);
    assert!(module.len() < 64 * 1024, "the fixture stays small");
    assert_refused(
        module_kallsyms(&module).map(|m| m.entries.len()),
        module.len(),
    );
    let vmlinux = shared_name_object(1500, 20_000, 2);
    assert_refused(
        vmlinux_kallsyms(&vmlinux, Some(true)).map(|v| v.entries.len()),
        vmlinux.len(),
    );
}

/// The budget leaves ordinary sharing alone: a few symbols with one name parse.
#[test]
fn a_few_symbols_sharing_a_name_still_parse() {
    let module = shared_name_object(8, 40, 1);
    let m = module_kallsyms(&module).expect("parses");
    assert_eq!(m.name, "shared");
    assert_eq!(
        m.entries.iter().filter(|e| e.name.len() == 40).count(),
        8,
        "{:?}",
        m.entries
    );
}
