//! What a loaded kernel is: its table, what its source told, where it came from, and the
//! options it was loaded with. Data only; loading is `load.rs`, decoding `decode.rs`.

use std::path::PathBuf;
use std::time::Duration;

use klpsym_core::resched::Resched;
use klpsym_core::SymbolTable;

/// The source used when the user names none: the running kernel.
pub const DEFAULT_SOURCE: &str = "/proc/kallsyms";

/// True when `path` is the running kernel's /proc/kallsyms.
pub fn is_live(path: &std::path::Path) -> bool {
    path == std::path::Path::new(DEFAULT_SOURCE)
}

/// What kind of source a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
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
    pub exports: Option<klpsym_sources::Exports>,
    /// The GNU build id (lower-case hex), when the source holds it (image, vmlinux).
    pub build_id: Option<String>,
    /// What the source's own BTF (an image's or a vmlinux's `.BTF`) says of the structs of
    /// [`BTF_STRUCTS`]: the livepatch structs `klp_patch`, `klp_object` and `klp_func`, then
    /// `module` (whose size the module loader holds `.gnu.linkonce.this_module` to), in that
    /// order (`None` for each one it does not describe); `None` when the source holds no BTF.
    #[serde(default)]
    pub klp_structs: Option<Vec<Option<StructFact>>>,
    /// vmlinux's ftrace call sites, when the source holds its `__mcount_loc` table (an x86_64
    /// vmlinux or kernel image); kept apart from the JSON in a cache entry.
    #[serde(skip)]
    pub ftrace: Option<FtraceSites>,
}

/// vmlinux's ftrace call sites: its `__mcount_loc` table (see [`klpsym_elf::mcount_sites`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FtraceSites {
    /// The call sites' addresses, sorted, zero entries left out.
    pub sites: Vec<u64>,
    /// Where they were read (`the image's __mcount_loc`), for the report.
    pub source: String,
}

impl FtraceSites {
    /// The sites of the `__mcount_loc` table that `entries` (name, address: the source's
    /// symbols) place with `__start_mcount_loc` and `__stop_mcount_loc`, read from the ELF
    /// `elf` (a vmlinux, or a bzImage's payload). `None` when either symbol is missing or the
    /// table is not in the file.
    pub(crate) fn read<'n>(
        entries: impl Iterator<Item = (&'n str, u64)>,
        elf: &[u8],
        source: &str,
        rs: &mut klpsym_core::Resched,
    ) -> Result<Option<FtraceSites>, klpsym_core::Cancelled> {
        let (mut start, mut stop) = (None, None);
        for (name, addr) in entries {
            rs.tick()?;
            match name {
                "__start_mcount_loc" => start = Some(addr),
                "__stop_mcount_loc" => stop = Some(addr),
                _ => {}
            }
        }
        let (Some(start), Some(stop)) = (start, stop) else {
            return Ok(None);
        };
        Ok(
            klpsym_elf::mcount_sites(elf, start, stop, rs)?.map(|sites| FtraceSites {
                sites,
                source: source.to_string(),
            }),
        )
    }
}

/// A struct as a kernel's BTF describes it: its size and its members' byte offsets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StructFact {
    /// `sizeof`.
    pub size: u64,
    /// Members with their byte offsets.
    pub members: Vec<(String, u64)>,
}

/// The structs [`SourceFacts::klp_structs`] describes, in its order.
pub const BTF_STRUCTS: [&str; 4] = ["klp_patch", "klp_object", "klp_func", "module"];

impl SourceFacts {
    /// `sizeof(struct module)` as the source's own BTF gives it.
    pub fn struct_module_size(&self) -> Option<u64> {
        Some(self.klp_structs.as_ref()?.get(3)?.as_ref()?.size)
    }
}

/// The structs of [`BTF_STRUCTS`] in a kernel's bytes, from their BTF (see
/// [`SourceFacts::klp_structs`]): `None` without BTF, or when it does not decode.
/// Reaches reschedule points through `resched` (the BTF's type records are walked).
pub(crate) fn klp_structs_of(
    bytes: &[u8],
    resched: &mut klpsym_core::Resched,
) -> Result<Option<Vec<Option<StructFact>>>, klpsym_core::Cancelled> {
    let Some(btf) = klpsym_elf::btf::find_btf_with(bytes, resched)? else {
        return Ok(None);
    };
    let found = match klpsym_elf::btf::find_structs_with(btf, &BTF_STRUCTS, resched) {
        Ok(f) => f,
        Err(klpsym_elf::btf::BtfError::Cancelled) => return Err(klpsym_core::Cancelled),
        Err(_) => return Ok(None),
    };
    Ok(Some(
        found
            .into_iter()
            .map(|s| {
                s.map(|s| StructFact {
                    size: s.size,
                    members: s.members,
                })
            })
            .collect(),
    ))
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
    pub package: Option<PackageParts>,
    /// Its functions' declaration lines, when a cache entry kept them (a `-dbg` package's
    /// vmlinux: see [`crate::LineIndex`]).
    pub lines: Option<std::sync::Arc<crate::LineIndex>>,
    /// The cache entry the table was read from, when it was (see [`crate::Cache`]).
    pub cached: Option<PathBuf>,
    /// The input's identity ([`crate::input_identity`]) the cache entry was verified against,
    /// when it was read from one.
    pub content: Option<u128>,
    /// The bytes of this kernel's vmlinux with debug info, kept when it is one (a vmlinux file,
    /// or a -dbg package's, mapped from the private temporary file it was copied or streamed
    /// to): declaration lines are read from it later without reading the source again.
    pub elf: Option<ElfBytes>,
    /// Where each module placed from its `.ko` lies in memory, as its kernel's loader laid it
    /// out (for `%pS`).
    pub module_layouts: Vec<(String, klpsym_elf::ModuleLayout)>,
}

/// A vmlinux's bytes, mapped or in memory.
#[derive(Clone)]
pub struct ElfBytes(pub klpsym_core::Backing);

impl std::fmt::Debug for ElfBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ElfBytes({} bytes)", self.bytes().len())
    }
}

impl ElfBytes {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl LoadedKernel {
    /// Frees everything in steps with reschedule points (see [`SymbolTable::free_with`]):
    /// dropping a loaded kernel gives megabytes back to the system at once.
    pub fn free_with(self, resched: &mut Resched) -> Result<(), klpsym_core::Cancelled> {
        self.table.free_with(resched)?;
        if let Some(m) = self.module {
            m.free_with_points(resched)?;
        }
        // A kernel's exports and ftrace sites: tens of thousands of records each.
        if let Some(e) = self.facts.exports {
            e.symbols.free_with(resched)?;
        }
        if let Some(f) = self.facts.ftrace {
            klpsym_core::bulk::free_with_points(f.sites, resched)?;
        }
        if let Some(d) = self.debug {
            d.free_with(resched)?;
        }
        // The rest one by one, a point between: a mapped vmlinux's pages are given back in
        // steps before it is unmapped (unmapping a -dbg vmlinux with its pages present was one
        // stretch of 1.5 ms after the exports, `klpsym-bench resched`, 2026-12-07).
        resched.tick_step()?;
        if let Some(e) = self.elf {
            klpsym_core::bulk::free_shared_bytes_with(e.0, resched)?;
        }
        drop(self.lines);
        resched.tick_step()?;
        drop(self.package);
        resched.tick_step()?;
        drop(self.module_layouts);
        resched.tick_step()?;
        drop(self.facts.klp_structs);
        resched.tick_step()?;
        Ok(())
    }
}

/// What a kernel's packages held besides its table.
#[derive(Default)]
pub struct PackageParts {
    /// The packages, in the order given.
    pub packages: Vec<PathBuf>,
    /// The kernel release they name.
    pub release: Option<String>,
    /// The build's config.
    pub config: Option<klpsym_sources::KernelConfig>,
    /// Module.symvers (headers packages; RPM's symvers.gz).
    pub symvers: Option<klpsym_sources::Exports>,
    /// The modules, when read ([`crate::LoadOptions::package_modules`]).
    pub modules: Option<crate::modules::ModuleTree>,
}

impl std::fmt::Debug for PackageParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageParts")
            .field("packages", &self.packages)
            .field("release", &self.release)
            .field("config", &self.config)
            .field("symvers", &self.symvers.as_ref().map(|_| "..."))
            .field("modules", &self.modules)
            .finish()
    }
}
