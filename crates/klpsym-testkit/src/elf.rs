//! Small ELF objects written with `object::write`: the fixtures of the vmlinux and module
//! readers' tests.

use object::write::{Object, SectionId, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};

/// Where a fixture symbol lives.
#[derive(Debug, Clone, Copy)]
pub enum At {
    Sec(SectionId),
    Undef,
    Abs,
}

/// A relocatable object under construction.
pub struct Fixture {
    pub obj: Object<'static>,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fixture")
    }
}

impl Fixture {
    pub fn new(arch: Architecture) -> Self {
        Fixture {
            obj: Object::new(BinaryFormat::Elf, arch, Endianness::Little),
        }
    }

    pub fn section(&mut self, name: &str, kind: SectionKind, data: &[u8]) -> SectionId {
        let id = self
            .obj
            .add_section(Vec::new(), name.as_bytes().to_vec(), kind);
        if kind == SectionKind::UninitializedData {
            self.obj
                .append_section_bss(id, data.len().max(0x1000) as u64, 1);
        } else {
            let mut d = data.to_vec();
            d.resize(d.len().max(0x1000), 0);
            self.obj.append_section_data(id, &d, 1);
        }
        id
    }

    /// Add a symbol; `bind` 'l' local, 'g' global, 'w' weak; `kind` 'f' function,
    /// 'o' object, 'F' source file (STT_FILE: the locals after it are that file's), 'n'
    /// notype.
    pub fn sym(&mut self, name: &str, at: At, value: u64, bind: char, kind: char) {
        let section = match at {
            _ if kind == 'F' => SymbolSection::None,
            At::Sec(id) => SymbolSection::Section(id),
            At::Undef => SymbolSection::Undefined,
            At::Abs => SymbolSection::Absolute,
        };
        self.obj.add_symbol(Symbol {
            name: name.as_bytes().to_vec(),
            value,
            size: 8,
            kind: match kind {
                'f' => SymbolKind::Text,
                'o' => SymbolKind::Data,
                'F' => SymbolKind::File,
                _ => SymbolKind::Label,
            },
            scope: if bind == 'l' {
                SymbolScope::Compilation
            } else {
                SymbolScope::Linkage
            },
            weak: bind == 'w',
            section,
            flags: SymbolFlags::None,
        });
    }

    /// An `__mcount_loc` section naming the ftrace call sites at `offsets` of `text`, as
    /// recordmcount/objtool write it in a module built with ftrace (one R_X86_64_64 against
    /// the section symbol per site).
    pub fn mcount_sites(&mut self, text: SectionId, offsets: &[u64]) {
        let loc = self.obj.add_section(
            Vec::new(),
            b"__mcount_loc".to_vec(),
            SectionKind::ReadOnlyData,
        );
        self.obj
            .append_section_data(loc, &vec![0; 8 * offsets.len()], 8);
        let symbol = self.obj.section_symbol(text);
        for (i, &at) in offsets.iter().enumerate() {
            self.obj
                .add_relocation(
                    loc,
                    object::write::Relocation {
                        offset: 8 * i as u64,
                        symbol,
                        addend: at as i64,
                        flags: object::RelocationFlags::Elf {
                            r_type: object::elf::R_X86_64_64,
                        },
                    },
                )
                .expect("relocation");
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.obj.write().expect("fixture writes")
    }
}
