//! Loading one kernel symbol source: read, tell the kind from the content, parse or decode.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};
use klpsym_sources::{parse_text, TextKind};

use crate::detect::{detect, Detected};
use crate::error::LoadError;

/// The source used when the user names none: the running kernel.
pub const DEFAULT_SOURCE: &str = "/proc/kallsyms";

/// What kind of source a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SourceKind {
    /// /proc/kallsyms or a copy of it.
    Kallsyms,
    /// A System.map.
    SystemMap,
    /// A vmlinux ELF with a symbol table: kallsyms derived by scripts/kallsyms' rules.
    VmlinuxElf,
    /// A kernel image (bzImage/vmlinuz, arm64 Image, stripped vmlinux): its compressed
    /// kallsyms tables, decoded.
    KernelImage,
    /// A kernel module (.ko, possibly compressed).
    Module,
}

impl SourceKind {
    /// A short stable name (used in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Kallsyms => "kallsyms",
            SourceKind::SystemMap => "system_map",
            SourceKind::VmlinuxElf => "vmlinux_elf",
            SourceKind::KernelImage => "kernel_image",
            SourceKind::Module => "module",
        }
    }
}

/// Options for [`load`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Refuse inputs larger than this many bytes (a guard against reading a wrong, huge file).
    pub max_input_size: u64,
    /// Refuse to decompress more than this many bytes (a decompression bomb is an error).
    pub max_decompressed_size: u64,
    /// CONFIG_KALLSYMS_ALL of a vmlinux ELF: `None` = detect from the image.
    pub kallsyms_all: Option<bool>,
    /// Where decoded tables are kept between runs (`None`: no cache).
    pub cache: Option<crate::Cache>,
    /// Read a package's modules and Module.symvers too (the whole package: seconds for a
    /// Debian image package), for verbs that check a patch; else only the image, its config
    /// and System.map, or a debug package's vmlinux (reading stops once they are found).
    pub package_modules: bool,
    /// Read the export facts (CRCs, namespaces) kept in a cache entry: false for verbs that
    /// never consult them (a lookup, a dump), which then see none. Decoding never skips them;
    /// only reading a cached kernel does (tens of thousands of records).
    pub export_facts: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_input_size: 1 << 30,
            max_decompressed_size: 1 << 30,
            kallsyms_all: None,
            package_modules: false,
            cache: None,
            export_facts: true,
        }
    }
}

/// What a source told about itself besides its symbols.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SourceFacts {
    /// The "Linux version ..." banner, when the source has one.
    pub version: Option<String>,
    /// The architecture, when known.
    pub arch: Option<String>,
    /// Container and compression, e.g. "bzImage, xz payload at 0x4a4f".
    pub format: Option<String>,
    /// Named facts: configuration, table locations, layout era.
    pub facts: Vec<(String, String)>,
    /// Anything assumed or uncertain, said plainly.
    pub notes: Vec<String>,
    /// The module loader's `VERMAGIC_STRING`, when the source holds it (kernel image,
    /// vmlinux).
    pub vermagic: Option<String>,
    /// Exported symbols' CRCs, when the source holds them (a vmlinux's `__crc_*` symbols, an
    /// image's `__kcrctab` named by kallsyms).
    pub exports: Option<crate::exports::Exports>,
    /// The GNU build id (lower-case hex), when the source holds it (image, vmlinux).
    pub build_id: Option<String>,
}

/// A loaded kernel symbol source.
#[derive(Debug)]
pub struct LoadedKernel {
    /// The path it came from.
    pub path: PathBuf,
    /// What it was.
    pub kind: SourceKind,
    /// Its symbols.
    pub table: SymbolTable,
    /// What else it told.
    pub facts: SourceFacts,
    /// The module's own description, when the source was a module.
    pub module: Option<klpsym_elf::ModuleSymbols>,
    /// Time spent reading the file.
    pub read_time: Duration,
    /// Time spent decompressing, parsing and decoding.
    pub parse_time: Duration,
    /// Bytes read.
    pub bytes: u64,
    /// Time spent building the indexes, when the caller built them eagerly.
    pub index_time: Duration,
    /// The same build's vmlinux with debug info, when its source files were attached from it
    /// (`--debug-vmlinux`): where declaration lines are read (see [`LoadedKernel::decl_lines_at`]).
    pub debug: Option<Box<LoadedKernel>>,
    /// What the kernel's packages held besides its table, when it came from packages.
    pub package: Option<crate::package::PackageParts>,
    /// The cache entry the table was read from, when it was (see [`crate::Cache`]).
    pub cached: Option<PathBuf>,
}

/// Reads `path` (a regular file or a /proc file), tells its kind from the content, and turns it
/// into a symbol table, reaching reschedule points through `resched`.
impl LoadedKernel {
    /// The DWARF declaration line (`fs/inode.c:432`) of the functions at `addrs` in the
    /// vmlinux with debug info at hand: this kernel when it is one, else its `debug` vmlinux
    /// (the caller gives addresses there). `None` where an address is `None` or DWARF does not
    /// tell. Only the compilation units holding the functions are read.
    pub fn decl_lines_at(
        &self,
        addrs: &[Option<u64>],
        limit: u64,
        resched: &mut Resched,
    ) -> Result<Vec<Option<klpsym_elf::DeclLine>>, LoadError> {
        let none = vec![None; addrs.len()];
        let elf_kernel = if self.kind == SourceKind::VmlinuxElf {
            self
        } else {
            match self.debug.as_deref() {
                Some(d) => d,
                None => return Ok(none),
            }
        };
        if addrs.iter().all(Option::is_none) {
            return Ok(none);
        }
        let kept = elf_kernel.package.as_ref().and_then(|p| p.elf.clone());
        let bytes = match kept {
            Some(b) => b,
            None => std::sync::Arc::new(crate::package::elf_of(
                &elf_kernel.path,
                read_bounded(&elf_kernel.path, limit, resched)?,
                limit,
                resched,
            )?),
        };
        // Only known addresses are looked up.
        let wanted: Vec<u64> = addrs.iter().flatten().copied().collect();
        let mut lines = klpsym_elf::decl_lines(&bytes, &wanted, resched)
            .map_err(klpsym_core::BuildError::from)?
            .into_iter();
        Ok(addrs
            .iter()
            .map(|a| a.and_then(|_| lines.next().flatten()))
            .collect())
    }

    /// Frees everything in steps with reschedule points (see [`SymbolTable::free_with`]):
    /// dropping a loaded kernel gives megabytes back to the system at once.
    pub fn free_with(self, resched: &mut Resched) -> Result<(), klpsym_core::Cancelled> {
        self.table.free_with(resched)?;
        if let Some(m) = self.module {
            m.free_with_points(resched)?;
        }
        Ok(())
    }
}

pub fn load(
    path: &Path,
    opts: &LoadOptions,
    resched: &mut Resched,
) -> Result<LoadedKernel, LoadError> {
    let cache = opts
        .cache
        .as_ref()
        .filter(|_| crate::Cache::applies_to(path));
    if let Some(c) = cache {
        if let Some(k) = c.get(path, opts, resched)? {
            return Ok(k);
        }
    }
    let input_meta = std::fs::metadata(path).ok();
    if cache.is_none() && crate::stream::applies_to(path, input_meta.as_ref()) {
        return crate::stream::load(path, opts, resched);
    }
    let t0 = Instant::now();
    // A stripped vmlinux needs only its data: without a cache, and with one when its build id
    // is its identity (a content hash would need every byte, so then the file is read whole).
    let mut sparse = crate::sparse::read_stripped_vmlinux(path, opts.max_input_size, resched)?;
    let mut content = None;
    if let (Some(_), Some(b)) = (cache, &sparse) {
        content = crate::cache::build_id_identity_of(b);
        if content.is_none() {
            sparse = None;
        }
    }
    let bytes = match sparse {
        Some(b) => b,
        None => read_bounded(path, opts.max_input_size, resched)?,
    };
    if cache.is_some() && content.is_none() {
        content =
            Some(crate::input_identity(&bytes, resched).map_err(klpsym_core::BuildError::from)?);
    }
    let mut k = if klpsym_package::detect(&bytes).is_some() {
        let mut k = crate::package::load_one(path, &bytes, opts, resched)?;
        k.read_time = t0.elapsed();
        k
    } else {
        from_bytes(path, bytes, t0.elapsed(), opts, resched)?
    };
    if let (Some(c), Some(h), Some(m)) = (cache, content, input_meta) {
        if let Err(e) = c.put(path, &m, h, &k, opts, resched) {
            k.facts.notes.push(format!("not cached: {e}"));
        }
    }
    Ok(k)
}

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
    if crate::facts::is_live(path) && d.2.version.is_none() {
        if let Ok(v) = std::fs::read_to_string("/proc/version") {
            d.2.version = Some(v.trim_end().to_string());
        }
    }
    d
}

impl LoadedKernel {
    /// A kernel just decoded from its source (no debug part, package or cache entry yet).
    pub(crate) fn decoded(
        path: &Path,
        (kind, table, facts, module): Decoded,
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
            cached: None,
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

pub(crate) type Decoded = (
    SourceKind,
    SymbolTable,
    SourceFacts,
    Option<klpsym_elf::ModuleSymbols>,
);

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
        klpsym_core::bulk::free_with_points(bytes, resched)
            .map_err(klpsym_core::BuildError::from)?;
        return Ok(decoded);
    }
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
    (kind, parsed.table, facts, None)
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
        Detected::ElfRelocatable => module_table(path, bytes, None, resched),
        Detected::ElfExecutable => match klpsym_elf::vmlinux_kallsyms_with_resched(
            bytes,
            klpsym_elf::VmlinuxOptions {
                kallsyms_all: opts.kallsyms_all,
                ..klpsym_elf::VmlinuxOptions::default()
            },
            resched,
        ) {
            Ok(v) => {
                // Source paths from DWARF (a -dbg vmlinux), else the STT_FILE basenames.
                let cus =
                    klpsym_elf::cu_paths(bytes, resched).map_err(klpsym_core::BuildError::from)?;
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
                let release = v
                    .version
                    .as_deref()
                    .and_then(klpsym_image::banner_release)
                    .unwrap_or_default();
                let vermagic =
                    klpsym_image::find_vermagic(bytes, klpsym_core::EVERYWHERE, release, resched)
                        .map_err(klpsym_core::BuildError::from)?;
                let exports = vmlinux_crcs(bytes, resched)?;
                let build_id = klpsym_image::find_build_id(bytes, klpsym_core::EVERYWHERE, resched)
                    .map_err(klpsym_core::BuildError::from)?;
                let mut facts = SourceFacts {
                    build_id,
                    vermagic,
                    exports,
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
                v.entries
                    .free_with_points(resched)
                    .map_err(klpsym_core::BuildError::from)?;
                Ok((SourceKind::VmlinuxElf, table, facts, None))
            }
            Err(klpsym_elf::ElfError::NoSymtab) => image_symbols(path, bytes, limit, resched),
            Err(source) => Err(elf_error(path, source)),
        },
        Detected::Compressed(codec) => {
            let d = klpsym_image::decompress_image_with_resched(bytes, limit, resched)
                .map_err(|source| image_error(path, source))?;
            let decoded = if detect(&d.data) == Detected::ElfRelocatable {
                module_table(path, &d.data, Some(codec), resched)?
            } else {
                let syms = klpsym_image::extract_decompressed(&d, resched)
                    .map_err(|source| image_error(path, source))?;
                image_table(syms, resched)?
            };
            if let std::borrow::Cow::Owned(v) = d.data {
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
    let syms = klpsym_image::extract_with_resched(bytes, limit, resched)
        .map_err(|source| image_error(path, source))?;
    image_table(syms, resched)
}

fn image_table(
    syms: klpsym_image::ImageSymbols,
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
            let mut symbols = crate::exports::ExportMap::with_capacity(c.len());
            for (n, &crc) in c {
                resched.tick().map_err(klpsym_core::BuildError::from)?;
                symbols.insert(
                    n,
                    crate::exports::Export {
                        crc: Some(crc),
                        module: "vmlinux",
                        namespace: None,
                    },
                );
            }
            Some(crate::exports::Exports {
                source: "the image's __kcrctab (through kallsyms' __ksymtab_* entries)".into(),
                symbols,
            })
        }
    };
    let facts = SourceFacts {
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
    // One heap string per symbol: dropped in steps.
    klpsym_core::bulk::free_with_points(syms.entries, resched)
        .map_err(klpsym_core::BuildError::from)?;
    Ok((
        SourceKind::KernelImage,
        b.build_with(resched)
            .map_err(klpsym_core::BuildError::from)?,
        facts,
        None,
    ))
}

fn module_table(
    path: &Path,
    bytes: &[u8],
    codec: Option<&str>,
    resched: &mut Resched,
) -> Result<Decoded, LoadError> {
    let m = klpsym_elf::module_kallsyms_with_resched(
        bytes,
        klpsym_elf::ModuleOptions::default(),
        resched,
    )
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
    Ok((SourceKind::Module, table, facts, Some(m)))
}

/// An image decoding error as the loader reports it: a cancellation is reported like every
/// other cancelled reschedule point, not as a malformed image.
pub(crate) fn image_error(path: &Path, source: klpsym_image::ImageError) -> LoadError {
    match source {
        klpsym_image::ImageError::Cancelled => klpsym_core::BuildError::from(Cancelled).into(),
        source => LoadError::Image {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// [`image_error`] for ELF processing errors.
pub(crate) fn elf_error(path: &Path, source: klpsym_elf::ElfError) -> LoadError {
    match source {
        klpsym_elf::ElfError::Cancelled => klpsym_core::BuildError::from(Cancelled).into(),
        source => LoadError::Elf {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// The CRCs of a vmlinux ELF's exports: its `__crc_<name>` symbols. Before 5.19 they are
/// absolute symbols whose value is the CRC; since, they sit in `__kcrctab`/`__kcrctab_gpl`
/// and the CRC is the `u32` they point at.
fn vmlinux_crcs(
    bytes: &[u8],
    resched: &mut Resched,
) -> Result<Option<crate::exports::Exports>, LoadError> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolSection};
    let Ok(file) = object::File::parse(bytes) else {
        return Ok(None);
    };
    let mut symbols = crate::exports::ExportMap::default();
    for sym in file.symbols() {
        resched.tick().map_err(klpsym_core::BuildError::from)?;
        let Ok(name) = sym.name() else { continue };
        let Some(export) = name.strip_prefix("__crc_") else {
            continue;
        };
        let crc = match sym.section() {
            SymbolSection::Absolute => u32::try_from(sym.address()).ok(),
            SymbolSection::Section(i) => file.section_by_index(i).ok().and_then(|s| {
                let off = sym.address().checked_sub(s.address())?;
                let data = s.data().ok()?;
                let off = usize::try_from(off).ok()?;
                let b = data.get(off..off.checked_add(4)?)?;
                Some(u32::from_le_bytes(b.try_into().ok()?))
            }),
            _ => None,
        };
        if let Some(crc) = crc {
            symbols.insert(
                export,
                crate::exports::Export {
                    crc: Some(crc),
                    module: "vmlinux",
                    namespace: None,
                },
            );
        }
    }
    Ok((!symbols.is_empty()).then(|| crate::exports::Exports {
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
    b.set_relative(oid, addrs.is_none());
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

/// Reads a whole file, refusing more than `limit` bytes, reaching reschedule points between
/// bounded reads. Every file klpsym reads goes through here.
pub fn read_bounded(path: &Path, limit: u64, resched: &mut Resched) -> Result<Vec<u8>, LoadError> {
    let io_err = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io_err)?;
    let meta = f.metadata().map_err(io_err)?;
    // Opening is a point too: a caller loading many files gets one between any two of them.
    resched
        .tick_step()
        .map_err(|c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c)))?;
    if meta.is_dir() {
        return Err(LoadError::Unrecognized {
            path: path.to_path_buf(),
            what: "is a directory; expected a symbol source file (use --modules for a module tree)"
                .into(),
        });
    }
    // /proc files report size 0; regular files are read in one go.
    let size = meta.len();
    if size > limit {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
        });
    }
    let mut buf = Vec::with_capacity(if size > 0 { size as usize + 1 } else { 8 << 20 });
    klpsym_core::bulk::huge_pages(&mut buf);
    // Read in bounded steps so a reschedule point comes between them: 16 KiB of a regular
    // file (a copy from the page cache into 4 fresh pages, each first touch a page fault of a
    // few µs here; read_to_end fills spare capacity without zeroing it first), or one read(2)
    // of a /proc file, which formats at most a page of lines per call.
    let step: u64 = 16 << 10;
    loop {
        let before = buf.len();
        if size > 0 {
            (&mut f).take(step).read_to_end(&mut buf).map_err(io_err)?;
        } else {
            buf.reserve(step as usize);
            // The kernel formats a /proc file one page per read(2) at most.
            let mut chunk = [0u8; 4 << 10];
            let got = loop {
                match f.read(&mut chunk) {
                    Ok(g) => break g,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(e)),
                }
            };
            buf.extend_from_slice(&chunk[..got]);
        }
        if buf.len() as u64 > limit {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                size: buf.len() as u64,
                limit,
            });
        }
        resched
            .tick_step()
            .map_err(|c| io_err(std::io::Error::new(std::io::ErrorKind::Interrupted, c)))?;
        if buf.len() == before {
            break;
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn loads_text_and_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("k.txt");
        std::fs::write(&good, "ffffffff81000000 T _text\n").unwrap();
        let k = load(&good, &LoadOptions::default(), &mut Resched::none()).unwrap();
        assert_eq!(k.table.len(), 1);
        assert_eq!(k.kind, SourceKind::Kallsyms);

        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "ffffffff81000000 T _text\nzz T x\n").unwrap();
        let e = load(&bad, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.txt: line 2: bad hex address"), "{e}");

        let elf = dir.path().join("x.ko");
        std::fs::File::create(&elf)
            .unwrap()
            .write_all(b"\x7fELF\x02\x01\x01")
            .unwrap();
        let e = load(&elf, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", elf.display())), "{e}");

        let e = load(
            &dir.path().join("missing"),
            &LoadOptions::default(),
            &mut Resched::none(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing: No such file"), "{e}");

        let opts = LoadOptions {
            max_input_size: 4,
            ..LoadOptions::default()
        };
        assert!(matches!(
            load(&good, &opts, &mut Resched::none()),
            Err(LoadError::TooLarge { .. })
        ));

        let random = dir.path().join("random.bin");
        let bytes: Vec<u8> = (0..100_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&random, bytes).unwrap();
        let e = load(&random, &LoadOptions::default(), &mut Resched::none())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}: ", random.display())), "{e}");
    }

    #[test]
    fn reads_proc_style_files_without_a_size() {
        // /proc/self/maps reports size 0 like /proc/kallsyms; reading must still get it all.
        let p = Path::new("/proc/self/maps");
        if p.exists() {
            let b = read_bounded(p, 1 << 30, &mut Resched::none()).unwrap();
            assert!(!b.is_empty());
        }
    }
}
