//! Bytes to a kernel: tell the kind from the content, then parse (text), decode (an image's
//! kallsyms tables) or derive (a vmlinux's or module's symbol table), with the facts each kind
//! of source holds (banner, vermagic, build id, export CRCs).

use std::path::Path;
use std::time::{Duration, Instant};

use klpsym_core::resched::Resched;
use klpsym_core::{ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};
use klpsym_sources::{parse_text, TextKind};

use crate::detect::{detect, Detected};
use crate::error::{elf_error, image_error, LoadError};
use crate::loaded::{LoadedKernel, SourceFacts, SourceKind};
use crate::options::LoadOptions;

/// A kernel from bytes already read (`read_time` is what reading them took); `path` names it.
pub(crate) fn from_bytes(
    path: &Path,
    bytes: Vec<u8>,
    read_time: Duration,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let n = bytes.len() as u64;
    let t1 = Instant::now();
    let decoded = decode(path, bytes, opts, resched)?;
    Ok(LoadedKernel::decoded(
        path,
        with_live_version(path, decoded),
        read_time,
        t1.elapsed(),
        n,
    ))
}

/// The running kernel says what it is: /proc/version is its banner.
pub(crate) fn with_live_version(path: &Path, mut d: Decoded) -> Decoded {
    if crate::loaded::is_live(path) && d.facts.version.is_none() {
        if let Ok(v) = std::fs::read_to_string("/proc/version") {
            d.facts.version = Some(v.trim_end().to_string());
        }
    }
    d
}

impl LoadedKernel {
    /// A kernel just decoded from its source (no debug part, package or cache entry yet).
    pub(crate) fn decoded(
        path: &Path,
        Decoded {
            kind,
            table,
            facts,
            module,
        }: Decoded,
        read_time: Duration,
        parse_time: Duration,
        bytes: u64,
    ) -> LoadedKernel {
        LoadedKernel {
            path: path.to_path_buf(),
            kind,
            table,
            facts,
            module,
            read_time,
            parse_time,
            bytes,
            index_time: Duration::ZERO,
            debug: None,
            package: None,
            lines: None,
            cached: None,
            elf: None,
            module_layouts: Vec::new(),
            content: None,
        }
    }
}

/// A kernel from the bytes of a binary source (an image, a vmlinux) that the caller keeps.
pub(crate) fn from_binary(
    path: &Path,
    bytes: &[u8],
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let t1 = Instant::now();
    let limit = usize::try_from(opts.max_decompressed_size).unwrap_or(usize::MAX);
    let kind = detect(bytes);
    if kind == Detected::Text {
        return Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "text where a kernel image or vmlinux was expected".into(),
        });
    }
    let decoded = decode_binary(path, kind, bytes, opts, limit, resched)?;
    Ok(LoadedKernel::decoded(
        path,
        decoded,
        Duration::ZERO,
        t1.elapsed(),
        bytes.len() as u64,
    ))
}

/// What decoding a source gave: its kind, table and facts, and for a module its own
/// description.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) kind: SourceKind,
    pub(crate) table: SymbolTable,
    pub(crate) facts: SourceFacts,
    pub(crate) module: Option<klpsym_elf::ModuleSymbols>,
}

fn decode(
    path: &Path,
    bytes: Vec<u8>,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    let limit = usize::try_from(opts.max_decompressed_size).unwrap_or(usize::MAX);
    let kind = detect(&bytes);
    if kind != Detected::Text {
        let decoded = decode_binary(path, kind, &bytes, opts, limit, resched)?;
        // Hundreds of MiB of input given back in steps, not in one munmap.
        resched.set_phase("free the input");
        klpsym_core::bulk::free_with_points(bytes, resched)
            .map_err(klpsym_core::BuildError::from)?;
        return Ok(decoded);
    }
    resched.set_phase("parse text");
    let parsed = parse_text(bytes, resched).map_err(|source| LoadError::Text {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text_decoded(parsed))
}

/// What a parsed text source is.
pub(crate) fn text_decoded(parsed: klpsym_sources::ParsedText) -> Decoded {
    let kind = match parsed.kind {
        TextKind::SystemMap => SourceKind::SystemMap,
        TextKind::Kallsyms | TextKind::SystemMapStub => SourceKind::Kallsyms,
    };
    let mut facts = SourceFacts::default();
    if kind == SourceKind::SystemMap {
        facts.notes.push(
            "System.map lists symbols the kernel's kallsyms drops; positions are counted over the System.map as given".into(),
        );
    }
    Decoded {
        kind,
        table: parsed.table,
        facts,
        module: None,
    }
}

fn decode_binary(
    path: &Path,
    kind: Detected,
    bytes: &[u8],
    opts: &LoadOptions,
    limit: usize,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    match kind {
        Detected::Text => unreachable!("text is decoded by decode"),
        Detected::ElfRelocatable => {
            resched.set_phase("module: ELF to symbols");
            module_table(path, bytes, None, resched)
        }
        Detected::ElfExecutable => match resched.in_phase("vmlinux: .symtab to kallsyms", |rs| {
            klpsym_elf::vmlinux_kallsyms_with(
                bytes,
                klpsym_elf::VmlinuxOptions {
                    kallsyms_all: opts.kallsyms_all,
                    ..klpsym_elf::VmlinuxOptions::default()
                },
                rs,
            )
        }) {
            Ok(v) => {
                // Source paths from DWARF (a -dbg vmlinux), else the STT_FILE basenames.
                resched.set_phase("vmlinux: DWARF compilation units");
                let cus =
                    klpsym_elf::cu_paths(bytes, resched).map_err(klpsym_core::BuildError::from)?;
                resched.set_phase("vmlinux: build the table");
                let mut b =
                    SymbolTableBuilder::with_capacity(v.entries.len(), v.entries.name_bytes());
                for e in &v.entries {
                    resched.tick().map_err(klpsym_core::BuildError::from)?;
                    b.push(ObjectId::VMLINUX, e.addr, e.kind, e.name)?;
                    if let Some(sz) = e.size {
                        b.set_last_size(sz);
                    }
                    let dwarf = cus.as_ref().and_then(|c| c.path_of(e.addr));
                    if let Some(f) = dwarf.or(e.file) {
                        b.set_last_file(f);
                    }
                }
                let table = b
                    .build_with(resched)
                    .map_err(klpsym_core::BuildError::from)?;
                resched.tick_step().map_err(klpsym_core::BuildError::from)?;
                if let Some(c) = cus {
                    c.free_with(resched)
                        .map_err(klpsym_core::BuildError::from)?;
                }
                let release = v
                    .version
                    .as_deref()
                    .and_then(klpsym_image::banner_release)
                    .unwrap_or_default();
                // In the loaded data only: a -dbg vmlinux is mostly DWARF, and searching it all
                // would touch every page of it.
                resched.set_phase("vmlinux: vermagic, CRCs, build id");
                let spans = klpsym_elf::loaded_spans(bytes);
                resched.tick_step().map_err(klpsym_core::BuildError::from)?;
                let vermagic = klpsym_image::find_vermagic(bytes, &spans, release, resched)
                    .map_err(klpsym_core::BuildError::from)?;
                let exports = vmlinux_crcs(bytes, resched)?;
                let build_id = klpsym_image::find_build_id(bytes, &spans, resched)
                    .map_err(klpsym_core::BuildError::from)?;
                let arch = object::File::parse(bytes).ok().map(|f| {
                    use object::Object;
                    match f.architecture() {
                        object::Architecture::X86_64 => "x86_64".to_string(),
                        object::Architecture::Aarch64 => "aarch64".to_string(),
                        a => format!("{a:?}").to_lowercase(),
                    }
                });
                resched.set_phase("vmlinux: ftrace sites");
                let ftrace = crate::loaded::FtraceSites::read(
                    v.entries.iter().map(|e| (e.name, e.addr)),
                    bytes,
                    "the vmlinux's __mcount_loc",
                    resched,
                )
                .map_err(klpsym_core::BuildError::from)?;
                let mut facts = SourceFacts {
                    build_id,
                    vermagic,
                    exports,
                    arch,
                    ftrace,
                    klp_structs: resched
                        .in_phase("vmlinux: klp structs from BTF", |rs| {
                            crate::loaded::klp_structs_of(bytes, rs)
                        })
                        .map_err(klpsym_core::BuildError::from)?,
                    version: v.version.clone(),
                    format: Some(
                        "vmlinux ELF with .symtab (kallsyms derived by scripts/kallsyms rules)"
                            .into(),
                    ),
                    notes: v.notes.clone(),
                    ..SourceFacts::default()
                };
                facts.facts.push((
                    "CONFIG_KALLSYMS_ALL".into(),
                    format!(
                        "{} ({})",
                        if v.kallsyms_all { "y" } else { "n" },
                        v.kallsyms_all_source
                    ),
                ));
                resched.set_phase("vmlinux: free the entries");
                v.entries
                    .free_with_points(resched)
                    .map_err(klpsym_core::BuildError::from)?;
                Ok(Decoded {
                    kind: SourceKind::VmlinuxElf,
                    table,
                    facts,
                    module: None,
                })
            }
            Err(klpsym_elf::ElfError::NoSymtab) => image_symbols(path, bytes, limit, resched),
            Err(source) => Err(elf_error(path, source)),
        },
        Detected::Compressed(codec) => {
            resched.set_phase("decompress");
            let d = klpsym_image::decompress_image_with(bytes, limit, resched)
                .map_err(|source| image_error(path, source))?;
            let decoded = if detect(&d.data) == Detected::ElfRelocatable {
                resched.set_phase("module: ELF to symbols");
                module_table(path, &d.data, Some(codec), resched)?
            } else {
                resched.set_phase("image: kallsyms tables");
                let syms = klpsym_image::extract_decompressed(&d, resched)
                    .map_err(|source| image_error(path, source))?;
                resched.set_phase("image: ftrace sites");
                let ftrace = image_ftrace(&syms, &d.data, resched)?;
                resched.set_phase("image: build the table");
                image_table(
                    syms,
                    crate::loaded::klp_structs_of(&d.data, resched)
                        .map_err(klpsym_core::BuildError::from)?,
                    ftrace,
                    resched,
                )?
            };
            if let std::borrow::Cow::Owned(v) = d.data {
                resched.set_phase("free the decompressed payload");
                klpsym_core::bulk::free_with_points(v, resched)
                    .map_err(klpsym_core::BuildError::from)?;
            }
            Ok(decoded)
        }
        Detected::Image => image_symbols(path, bytes, limit, resched),
    }
}

fn image_symbols(
    path: &Path,
    bytes: &[u8],
    limit: usize,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    resched.set_phase("image: decompress the payload");
    let d = klpsym_image::decompress_image_with(bytes, limit, resched)
        .map_err(|source| image_error(path, source))?;
    resched.set_phase("image: kallsyms tables");
    let syms = klpsym_image::extract_decompressed(&d, resched)
        .map_err(|source| image_error(path, source))?;
    resched.set_phase("image: klp structs, ftrace sites");
    let klp_structs =
        crate::loaded::klp_structs_of(&d.data, resched).map_err(klpsym_core::BuildError::from)?;
    let ftrace = image_ftrace(&syms, &d.data, resched)?;
    // Tens of megabytes of decompressed kernel: freed in steps, not in one munmap.
    if let std::borrow::Cow::Owned(v) = d.data {
        resched.set_phase("image: free the payload");
        klpsym_core::bulk::free_with_points(v, resched).map_err(klpsym_core::BuildError::from)?;
    }
    resched.set_phase("image: build the table");
    image_table(syms, klp_structs, ftrace, resched)
}

/// The ftrace call sites of an image whose decompressed payload is vmlinux's ELF (x86's
/// bzImage: `vmlinux.bin` is `objcopy -R .comment -S vmlinux`, segments kept), placed by
/// kallsyms' `__start_mcount_loc`/`__stop_mcount_loc` (CONFIG_LIVEPATCH needs KALLSYMS_ALL,
/// which lists them).
fn image_ftrace(
    syms: &klpsym_image::ImageSymbols,
    payload: &[u8],
    resched: &mut Resched,
) -> Result<Option<crate::loaded::FtraceSites>, LoadError> {
    Ok(crate::loaded::FtraceSites::read(
        syms.entries.iter().map(|e| (e.name.as_str(), e.addr)),
        payload,
        "the image's __mcount_loc",
        resched,
    )
    .map_err(klpsym_core::BuildError::from)?)
}

fn image_table(
    syms: klpsym_image::ImageSymbols,
    klp_structs: Option<Vec<Option<crate::loaded::StructFact>>>,
    ftrace: Option<crate::loaded::FtraceSites>,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    let mut b = SymbolTableBuilder::with_capacity(syms.entries.len(), syms.entries.len() * 24);
    for e in &syms.entries {
        resched.tick().map_err(klpsym_core::BuildError::from)?;
        b.push(ObjectId::VMLINUX, e.addr, e.kind, &e.name)?;
    }
    let l = &syms.layout;
    // Tens of thousands of exports: a point per entry.
    let exports = match &syms.crcs {
        None => None,
        Some(c) => {
            let mut symbols = klpsym_sources::ExportMap::with_capacity_with(c.len(), resched)
                .map_err(klpsym_core::BuildError::from)?;
            for (n, &crc) in c {
                resched.tick().map_err(klpsym_core::BuildError::from)?;
                symbols.insert(
                    n,
                    klpsym_sources::Export {
                        crc: Some(crc),
                        module: "vmlinux",
                        namespace: None,
                    },
                );
            }
            Some(klpsym_sources::Exports {
                source: "the image's __kcrctab (through kallsyms' __ksymtab_* entries)".into(),
                symbols,
            })
        }
    };
    let facts = SourceFacts {
        klp_structs,
        ftrace,
        build_id: syms.build_id.clone(),
        vermagic: syms.vermagic.clone(),
        exports,
        version: syms.version.clone(),
        arch: Some(syms.arch.to_string()),
        format: Some(syms.format.to_string()),
        facts: vec![
            ("kallsyms layout".into(), l.era.to_string()),
            ("name lengths".into(), l.name_length.to_string()),
            ("addressing".into(), l.addressing.to_string()),
            ("tables at".into(), l.offsets.to_string()),
        ],
        notes: syms.notes.clone(),
    };
    // One heap string per symbol, and per export: dropped in steps.
    klpsym_core::bulk::free_with_points(syms.entries, resched)
        .map_err(klpsym_core::BuildError::from)?;
    if let Some(crcs) = syms.crcs {
        klpsym_core::bulk::free_each_with_points(crcs.into_iter(), resched)
            .map_err(klpsym_core::BuildError::from)?;
    }
    Ok(Decoded {
        kind: SourceKind::KernelImage,
        table: b
            .build_with(resched)
            .map_err(klpsym_core::BuildError::from)?,
        facts,
        module: None,
    })
}

fn module_table(
    path: &Path,
    bytes: &[u8],
    codec: Option<&str>,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    let m = klpsym_elf::module_kallsyms_with(bytes, klpsym_elf::ModuleOptions::default(), resched)
        .map_err(|source| elf_error(path, source))?;
    let table = module_symbols_table_with(&m, None, resched)?;
    let facts = SourceFacts {
        // One version format for every kind: the release; the vermagic says the rest.
        version: m
            .vermagic
            .as_deref()
            .and_then(|v| v.split(' ').next())
            .map(str::to_string),
        vermagic: m.vermagic.clone(),
        arch: Some(klpsym_elf::machine_name(m.machine).to_string()),
        format: Some(match codec {
            Some(c) => format!("kernel module ({c}-compressed)"),
            None => "kernel module".to_string(),
        }),
        facts: vec![("module name".into(), m.name.clone())],
        notes: vec![
            "a module read from its file has no load address: addresses are section-relative"
                .into(),
        ],
        ..SourceFacts::default()
    };
    Ok(Decoded {
        kind: SourceKind::Module,
        table,
        facts,
        module: Some(m),
    })
}

/// The CRCs of a vmlinux ELF's exports (see [`klpsym_elf::vmlinux_crcs`]), as an export
/// map, a tick per export.
fn vmlinux_crcs(
    bytes: &[u8],
    resched: &mut Resched,
) -> Result<Option<klpsym_sources::Exports>, LoadError> {
    let Some(crcs) = klpsym_elf::vmlinux_crcs(bytes, resched)? else {
        return Ok(None);
    };
    let mut symbols = klpsym_sources::ExportMap::with_capacity_with(crcs.len(), resched)
        .map_err(klpsym_core::BuildError::from)?;
    for (name, crc) in &crcs {
        resched.tick()?;
        symbols.insert(
            name,
            klpsym_sources::Export {
                crc: Some(*crc),
                module: "vmlinux",
                namespace: None,
            },
        );
    }
    // A heap string per export: given back in steps.
    klpsym_core::bulk::free_with_points(crcs, resched).map_err(klpsym_core::BuildError::from)?;
    Ok((!symbols.is_empty()).then(|| klpsym_sources::Exports {
        source: "the vmlinux's __crc_* symbols".into(),
        symbols,
    }))
}

/// A table holding one module's symbols: at `addrs` when placed, else section-relative.
pub fn module_symbols_table(
    m: &klpsym_elf::ModuleSymbols,
    addrs: Option<&[u64]>,
) -> Result<SymbolTable, LoadError> {
    module_symbols_table_with(m, addrs, &mut Resched::none())
}

/// [`module_symbols_table`] with a tick per symbol.
fn module_symbols_table_with(
    m: &klpsym_elf::ModuleSymbols,
    addrs: Option<&[u64]>,
    resched: &mut Resched,
) -> Result<SymbolTable, LoadError> {
    let mut b = SymbolTableBuilder::with_capacity(m.entries.len(), m.entries.name_bytes());
    let oid = b.object(&m.name, ObjectKind::Module);
    b.set_unplaced(oid, addrs.is_none());
    for (i, e) in m.entries.iter().enumerate() {
        resched.tick().map_err(klpsym_core::BuildError::from)?;
        let addr = addrs.map_or(e.addr, |a| a[i]);
        b.push(oid, addr, e.kind, e.name)?;
        if let Some(f) = e.file {
            b.set_last_file(f);
        }
    }
    Ok(b.build_with(resched)
        .map_err(klpsym_core::BuildError::from)?)
}
