//! Livepatch modules written with `object::write` from a [`ModSpec`], and target kernels
//! (symbol tables) to check them against.

use std::collections::HashMap;

use klpsym_livepatch::consts as elf;
use object::write::{Object, Relocation, StandardSection, Symbol, SymbolId, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};

use klpsym_core::{ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};

/// One klp_object to describe: name (None = vmlinux) and (old_name, old_sympos) functions.
#[derive(Debug, Clone)]
pub struct ObjSpec<'a> {
    /// The object's name; `None` is vmlinux.
    pub name: Option<&'a str>,
    /// The functions: (old_name, old_sympos).
    pub funcs: Vec<(&'a str, u64)>,
}

/// A module to build.
#[derive(Debug, Clone)]
pub struct ModSpec<'a> {
    /// The module name (modinfo `name=` and `struct module`).
    pub name: &'a str,
    /// Write `livepatch=Y` in modinfo.
    pub livepatch: bool,
    /// The klp_objects.
    pub objects: Vec<ObjSpec<'a>>,
    /// References from the replacement code: (symbol, r_type, addend).
    pub text_refs: Vec<(&'a str, u32, i64)>,
    /// Sizes of the patch structs.
    pub func_size: u64,
    pub object_size: u64,
    /// Emit init_module calling klp_enable_patch.
    pub init_call: bool,
    /// Fill the relocation places of `text_refs` with 0xff (a pre-linked object).
    pub dirty_slots: bool,
    /// x86_64 or aarch64.
    pub arch: klpsym_livepatch::Arch,
    /// modinfo `vermagic=`.
    pub vermagic: &'a str,
    /// A `__versions` section with these (name, CRC) entries, when not empty.
    pub versions: Vec<(&'a str, u64)>,
}

impl Default for ModSpec<'_> {
    fn default() -> Self {
        ModSpec {
            name: "lp",
            livepatch: true,
            objects: vec![ObjSpec {
                name: None,
                funcs: vec![("cmdline_proc_show", 0)],
            }],
            text_refs: vec![],
            func_size: 152,
            object_size: 168,
            init_call: true,
            dirty_slots: false,
            arch: klpsym_livepatch::Arch::X86_64,
            vermagic: "6.1.0-57-amd64 SMP preempt mod_unload modversions ",
            versions: vec![],
        }
    }
}

fn rel(
    obj: &mut Object<'_>,
    section: object::write::SectionId,
    offset: u64,
    symbol: SymbolId,
    addend: i64,
    r_type: u32,
) {
    obj.add_relocation(
        section,
        Relocation {
            offset,
            symbol,
            addend,
            flags: RelocationFlags::Elf {
                r_type: object::elf::RelocationType(r_type),
            },
        },
    )
    .expect("relocation");
}

/// The undefined symbol `name`, added on first use (one symbol per name, as a compiler
/// writes it; `object` indexes only defined symbols by name, so `seen` does).
fn undefined(obj: &mut Object<'_>, seen: &mut HashMap<String, SymbolId>, name: &str) -> SymbolId {
    if let Some(&id) = seen.get(name) {
        return id;
    }
    let id = obj.add_symbol(Symbol {
        name: name.as_bytes().to_vec(),
        value: 0,
        size: 0,
        kind: SymbolKind::Unknown,
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Undefined,
        flags: SymbolFlags::None,
    });
    seen.insert(name.to_string(), id);
    id
}

/// Builds a relocatable livepatch module (x86_64 or aarch64, as `spec.arch` says).
pub fn build_module(spec: &ModSpec<'_>) -> Vec<u8> {
    let a64 = spec.arch == klpsym_livepatch::Arch::Aarch64;
    let machine = if a64 {
        Architecture::Aarch64
    } else {
        Architecture::X86_64
    };
    let mut obj = Object::new(BinaryFormat::Elf, machine, Endianness::Little);
    let mut seen = HashMap::new();
    let abs64 = spec.arch.abs64();
    let text = obj.section_id(StandardSection::Text);
    let data = obj.section_id(StandardSection::Data);
    let rodata = obj.section_id(StandardSection::ReadOnlyData);
    let modinfo = obj.add_section(vec![], b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    let this = obj.add_section(
        vec![],
        b".gnu.linkonce.this_module".to_vec(),
        SectionKind::Data,
    );
    let mut mi = Vec::new();
    if spec.livepatch {
        mi.extend_from_slice(b"livepatch=Y\0");
    }
    mi.extend_from_slice(format!("name={}\0vermagic={}\0", spec.name, spec.vermagic).as_bytes());
    obj.append_section_data(modinfo, &mi, 1);
    if !spec.versions.is_empty() {
        let vs = obj.add_section(vec![], b"__versions".to_vec(), SectionKind::ReadOnlyData);
        let mut d = Vec::new();
        for (name, crc) in &spec.versions {
            let mut e = [0u8; 64];
            e[..8].copy_from_slice(&crc.to_le_bytes());
            e[8..8 + name.len()].copy_from_slice(name.as_bytes());
            d.extend_from_slice(&e);
        }
        obj.append_section_data(vs, &d, 8);
    }
    let mut tm = vec![0u8; 0x380];
    tm[24..24 + spec.name.len()].copy_from_slice(spec.name.as_bytes());
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
    let text_sym = obj.section_symbol(text);
    let data_sym = obj.section_symbol(data);
    let ro_sym = obj.section_symbol(rodata);

    // Replacement functions: 32 bytes of zeros (relocation places must be zero) + ret.
    let mut new_funcs = Vec::new();
    for (oi, o) in spec.objects.iter().enumerate() {
        for (fi, _) in o.funcs.iter().enumerate() {
            let off = obj.append_section_data(text, &[0u8; 32], 16);
            let id = obj.add_symbol(Symbol {
                name: format!("livepatch_{oi}_{fi}").into_bytes(),
                value: off,
                size: 32,
                kind: SymbolKind::Text,
                scope: SymbolScope::Compilation,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
            new_funcs.push(id);
        }
    }
    // Text references (each in its own zeroed 8-byte slot).
    let fill = if spec.dirty_slots { 0xff } else { 0 };
    let refs_at = obj.append_section_data(text, &vec![fill; 8 * spec.text_refs.len().max(1)], 16);
    for (k, (name, r_type, addend)) in spec.text_refs.iter().enumerate() {
        let s = undefined(&mut obj, &mut seen, name);
        rel(&mut obj, text, refs_at + 8 * k as u64, s, *addend, *r_type);
    }

    // Strings.
    let string = |obj: &mut Object<'_>, s: &str| {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        obj.append_section_data(rodata, &b, 1)
    };
    // Tables in .data: patch, objects, funcs arrays (each with a zero terminator).
    let patch_at = obj.append_section_data(data, &[0u8; 64], 8);
    let objs_at = obj.append_section_data(
        data,
        &vec![0u8; (spec.object_size * (spec.objects.len() as u64 + 1)) as usize],
        8,
    );
    rel(&mut obj, data, patch_at, this_sym, 0, abs64);
    rel(
        &mut obj,
        data,
        patch_at + 8,
        data_sym,
        objs_at as i64,
        abs64,
    );
    let mut nf = 0;
    for (oi, o) in spec.objects.iter().enumerate() {
        let entry = objs_at + oi as u64 * spec.object_size;
        if let Some(n) = o.name {
            let s = string(&mut obj, n);
            rel(&mut obj, data, entry, ro_sym, s as i64, abs64);
        }
        let mut farr = vec![0u8; (spec.func_size * (o.funcs.len() as u64 + 1)) as usize];
        for (fi, (_, pos)) in o.funcs.iter().enumerate() {
            let at = fi * spec.func_size as usize + 16;
            farr[at..at + 8].copy_from_slice(&pos.to_le_bytes());
        }
        let funcs_at = obj.append_section_data(data, &farr, 8);
        rel(&mut obj, data, entry + 8, data_sym, funcs_at as i64, abs64);
        for (fi, (old, _)) in o.funcs.iter().enumerate() {
            let fe = funcs_at + fi as u64 * spec.func_size;
            let s = string(&mut obj, old);
            rel(&mut obj, data, fe, ro_sym, s as i64, abs64);
            rel(&mut obj, data, fe + 8, new_funcs[nf], 0, abs64);
            nf += 1;
        }
    }
    if spec.init_call && a64 {
        // adrp x0, patch ; add x0, x0, :lo12:patch ; bl klp_enable_patch ; ret
        let mut code = Vec::new();
        for insn in [0x9000_0000u32, 0x9100_0000, 0x9400_0000, 0xd65f_03c0] {
            code.extend_from_slice(&insn.to_le_bytes());
        }
        let at = obj.append_section_data(text, &code, 16);
        obj.add_symbol(Symbol {
            name: b"init_module".to_vec(),
            value: at,
            size: code.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
        rel(
            &mut obj,
            text,
            at,
            data_sym,
            patch_at as i64,
            elf::R_AARCH64_ADR_PREL_PG_HI21,
        );
        rel(
            &mut obj,
            text,
            at + 4,
            data_sym,
            patch_at as i64,
            elf::R_AARCH64_ADD_ABS_LO12_NC,
        );
        let k = undefined(&mut obj, &mut seen, "klp_enable_patch");
        rel(&mut obj, text, at + 8, k, 0, elf::R_AARCH64_CALL26);
    } else if spec.init_call {
        // mov $patch,%rdi ; call klp_enable_patch ; ret
        let code = [0x48, 0xc7, 0xc7, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0, 0xc3];
        let at = obj.append_section_data(text, &code, 16);
        obj.add_symbol(Symbol {
            name: b"init_module".to_vec(),
            value: at,
            size: code.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
        rel(
            &mut obj,
            text,
            at + 3,
            data_sym,
            patch_at as i64,
            elf::R_X86_64_32S,
        );
        let k = undefined(&mut obj, &mut seen, "klp_enable_patch");
        rel(&mut obj, text, at + 8, k, -4, elf::R_X86_64_PLT32);
    }
    let _ = text_sym;
    obj.write().expect("write object")
}

/// One object of [`build_klp_build_module`]: its name (`None`: vmlinux) and its functions
/// (old_name, sympos).
pub type ExtObject<'a> = (Option<&'a str>, Vec<(&'a str, u64)>);

/// A livepatch module in klp-build's layout (6.19+): `livepatch=Y`, one `struct
/// klp_object_ext` per object in `.init.klp_objects` (64 bytes: name, funcs, callbacks,
/// nr_funcs at 56) pointing into `.init.klp_funcs` (24-byte `struct klp_func_ext`: old_name,
/// new_func, sympos), no klp_patch. `objects`: (name, None = vmlinux; (old_name, sympos)).
pub fn build_klp_build_module(objects: &[ExtObject<'_>]) -> Vec<u8> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = obj.section_id(StandardSection::Text);
    let rodata = obj.section_id(StandardSection::ReadOnlyData);
    let modinfo = obj.add_section(vec![], b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    obj.append_section_data(
        modinfo,
        b"livepatch=Y\0name=livepatch_fix\0vermagic=6.19.0 SMP preempt mod_unload \0",
        1,
    );
    let objs = obj.add_section(
        vec![],
        b".init.klp_objects".to_vec(),
        SectionKind::ReadOnlyData,
    );
    let funcs = obj.add_section(
        vec![],
        b".init.klp_funcs".to_vec(),
        SectionKind::ReadOnlyData,
    );
    let ro_sym = obj.section_symbol(rodata);
    let funcs_sym = obj.section_symbol(funcs);
    let abs64 = elf::R_X86_64_64;
    for (oi, (name, fs)) in objects.iter().enumerate() {
        let mut entry = [0u8; 64];
        entry[56..60].copy_from_slice(&(fs.len() as u32).to_le_bytes());
        let at = obj.append_section_data(objs, &entry, 8);
        if let Some(n) = name {
            let s = obj.append_section_data(rodata, format!("{n}\0").as_bytes(), 1);
            rel(&mut obj, objs, at, ro_sym, s as i64, abs64);
        }
        let mut first = None;
        for (fi, (old, pos)) in fs.iter().enumerate() {
            let mut fe = [0u8; 24];
            fe[16..].copy_from_slice(&pos.to_le_bytes());
            let fat = obj.append_section_data(funcs, &fe, 8);
            first.get_or_insert(fat);
            let s = obj.append_section_data(rodata, format!("{old}\0").as_bytes(), 1);
            rel(&mut obj, funcs, fat, ro_sym, s as i64, abs64);
            let off = obj.append_section_data(text, &[0xc3; 16], 16);
            // klp-build keeps the patched function's own name for its clone.
            let f = obj.add_symbol(Symbol {
                name: old.as_bytes().to_vec(),
                value: off,
                size: 16,
                kind: SymbolKind::Text,
                scope: SymbolScope::Compilation,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
            let _ = (oi, fi);
            rel(&mut obj, funcs, fat + 8, f, 0, abs64);
        }
        if let Some(f) = first {
            rel(&mut obj, objs, at + 8, funcs_sym, f as i64, abs64);
        }
    }
    obj.write().expect("write object")
}

/// A target: vmlinux with unique, duplicated and suffixed names; module `nf_tables` loaded.
pub fn kernel() -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    let v = ObjectId::VMLINUX;
    b.push(v, 0xffff_ffff_8100_0000, b'T', "_text").unwrap();
    b.push(v, 0xffff_ffff_8110_0000, b't', "cmdline_proc_show")
        .unwrap();
    b.push(v, 0xffff_ffff_8120_0000, b't', "static_helper")
        .unwrap();
    b.push(v, 0xffff_ffff_8130_0000, b't', "dup_fn").unwrap();
    b.push(v, 0xffff_ffff_8140_0000, b't', "dup_fn").unwrap();
    b.push(v, 0xffff_ffff_8150_0000, b't', "cpumask_weight.constprop.0")
        .unwrap();
    b.push(v, 0xffff_ffff_8260_0000, b'd', "secret_var")
        .unwrap();
    b.push(v, 0xffff_ffff_8170_0000, b'T', "printk").unwrap();
    b.push(v, 0xffff_ffff_8180_0000, b'T', "klp_enable_patch")
        .unwrap();
    let m = b.object("nf_tables", ObjectKind::Module);
    b.push(m, 0xffff_ffff_c010_0000, b't', "nft_helper")
        .unwrap();
    b.push(m, 0xffff_ffff_c010_0100, b't', "nft_dup").unwrap();
    b.push(m, 0xffff_ffff_c010_0200, b't', "nft_dup").unwrap();
    b.build()
}

/// An offline module table (`ext4`, not loaded), with non-zero synthetic addresses.
pub fn ext4_unplaced() -> SymbolTable {
    let mut b = SymbolTableBuilder::new();
    let m = b.object("ext4", ObjectKind::Module);
    b.push(m, 0x1000, b't', "ext4_fill_super").unwrap();
    b.push(m, 0x2000, b't', "ext4_static").unwrap();
    b.build()
}

/// What the test kernel exports.
pub fn exported(name: &str) -> bool {
    matches!(name, "printk" | "klp_enable_patch" | "__fentry__")
}
