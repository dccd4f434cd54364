//! Command-line arguments: parsing only, no I/O.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit status, by what was asked and answered: 0 found / ok on every kernel; 1 some answer is
no or not a whole one (not found, ambiguous, bad position, an address outside every symbol, a
stack entry that cannot be decoded); 2 only where the question could not be asked: a usage
mistake, or a source that could not be read (its own error; the other kernels still answer).
The table per verb: docs/cli.md.

Examples:
  klpsym sympos init_once                 every init_once with the position old_sympos takes
  klpsym lookup init_once --sympos 3      what klp_find_object_symbol() resolves
  klpsym lookup nft_do_chain --object nf_tables
  klpsym addr ffffffff81000000 0xffffffffc0201000
  klpsym dump --kernel saved-kallsyms.txt > copy.txt
  klpsym info --json
  klpsym check patch.ko --kernel /boot/vmlinuz-6.1.0-57-amd64 --modules /lib/modules/6.1.0-57-amd64
  klpsym convert in.ko -o out.ko --kernel vmlinuz --pin m_show=2";

/// Linux livepatch symbol resolution, outside the kernel.
///
/// klpsym answers what the kernel's livepatch code would answer when it looks a symbol up by
/// name (klp_find_object_symbol), with the same positions (sympos), verdicts and messages —
/// for the running kernel or for any saved symbol table — plus fast address symbolization.
#[derive(Debug, Parser)]
#[command(name = "klpsym", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Resolve NAME exactly as the kernel's livepatch would (klp_find_object_symbol).
    ///
    /// Prints the address the kernel would use, or the kernel's own error message
    /// (`livepatch: ...`) and the candidates to choose a position from.
    Lookup(LookupArgs),
    /// List every definition of NAME with its position (old_sympos), address, type and object.
    Sympos(SymposArgs),
    /// Where a function's code lives, from the kernel's DWARF: out of line, cloned by the
    /// compiler (.isra, .constprop, .part), inlined into which functions (with the position a
    /// klp_func names each by), for each function of that name (static functions of one name
    /// in several files are several functions). A patch replacing the function alone leaves
    /// every other copy running the old code.
    Copies(CopiesArgs),
    /// How names' definitions differ between builds, without a patch: each definition matched
    /// by its source file and rank in it (same, moved, gone, new), so a position chosen on the
    /// first --kernel can be checked on every other.
    Drift(DriftArgs),
    /// Find names: a glob (`init_*`, `*_show`, `m_sh?w`, `[a-c]*`) or, without glob
    /// characters, a substring; each matching name with its count and objects.
    Search(SearchArgs),
    /// Symbolize addresses like the kernel's %pS: `name+0xoff/0xsize [module]`.
    ///
    /// Addresses come from the arguments, or from standard input one per line when none is given.
    Addr(AddrArgs),
    /// Write the symbol table back in /proc/kallsyms format.
    Dump(DumpArgs),
    /// Predict what the kernel will do with a livepatch module: every lookup and relocation,
    /// the verdict (accepted / refused, now or when a module loads) and the kernel's messages.
    Check(CheckArgs),
    /// Turn an ordinary livepatch module into one with klp relocations for the non-exported
    /// symbols it refers to (positions found in the target kernel; pin ambiguous ones).
    Convert(ConvertArgs),
    /// List the livepatches loaded on the running system and resolve their functions.
    Status(StatusArgs),
    /// Describe a source: its kind, version, architecture, symbol and object counts, where the
    /// tables were found, whether addresses are hidden, and the time taken.
    Info(InfoArgs),
    /// Show the cache of decoded tables (entries, sizes, their inputs) or prune it.
    Cache(CacheArgs),
    /// Print a shell completion script: `klpsym completions bash > /etc/bash_completion.d/klpsym`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `klpsym man | man -l -`.
    Man(ManArgs),
}

/// Options every verb takes.
#[derive(Debug, Args, Clone)]
pub struct SourceArgs {
    /// A symbol source, told apart by content: /proc/kallsyms (the default) or a saved copy, a
    /// System.map, a vmlinux ELF, a kernel image (vmlinuz/bzImage, arm64 Image; its compressed
    /// kallsyms tables are decoded), a module (.ko, .ko.xz, .ko.zst, .ko.gz), or a package
    /// (.deb, .rpm; several of one kernel, or a folder of them, form one kernel per release).
    /// Repeat to ask several kernels.
    #[arg(long = "kernel", short = 'k', value_name = "SOURCE")]
    pub kernels: Vec<PathBuf>,
    /// A module tree (e.g. /lib/modules/VERSION), a package holding one (.deb, .rpm, read in
    /// place), or a folder of out-of-tree modules: every module in it is available by its
    /// kernel name (dashes as underscores). Repeat to join them into one kernel's modules (a
    /// package's and a driver's folder); a name in several is the first one's.
    #[arg(long, value_name = "DIR")]
    pub modules: Vec<PathBuf>,
    /// Which modules of --modules count as loaded, in the order /proc/kallsyms lists them (newest
    /// first): `a,b,c`, or `@FILE` for a /proc/modules-format file (`@/proc/modules` for the
    /// running system).
    #[arg(long, value_name = "LIST", value_parser = parse_loaded)]
    pub loaded: Option<klpsym::Loaded>,
    /// Place loaded modules at the addresses a /proc/kallsyms (live or captured) shows for them;
    /// without it, offline modules keep section-relative addresses and answer no address query.
    #[arg(long, value_name = "KALLSYMS")]
    pub place_from: Option<PathBuf>,
    /// A vmlinux with debug info of the same build as --kernel (Debian's -dbg package:
    /// /usr/lib/debug/boot/vmlinux-RELEASE): source files come from its DWARF, positions
    /// from --kernel. The build ids must match.
    #[arg(long, value_name = "VMLINUX")]
    pub debug_vmlinux: Option<PathBuf>,
    /// CONFIG_KALLSYMS_ALL of a vmlinux ELF, when it cannot be read from the image.
    #[arg(long, value_name = "y|n")]
    pub kallsyms_all: Option<YesNo>,
    /// The kernel version whose rules apply, with its stable sublevel (`6.1.192`): module
    /// symbol sizes in %pS (stable releases took a change: 6.12.117, 6.18.50, 7.2.4), a
    /// check's and a conversion's rules. Default: the source's banner (for the running
    /// kernel, /proc/version), a package's name, a pasted oops's own `CPU: … Not tainted
    /// RELEASE #N …` line; when nothing tells it, an answer that depends on it says what it
    /// assumed.
    #[arg(long, value_name = "X.Y.Z", value_parser = parse_kernel_version)]
    pub kernel_version: Option<klpsym::KernelVersion>,
    /// Print JSON (documented, stable fields: see docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// Refuse inputs larger than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = klpsym::defaults::MAX_INPUT_SIZE)]
    pub max_input_size: u64,
    /// Refuse to decompress more than this many bytes (a decompression bomb is an error).
    #[arg(long, value_name = "BYTES", default_value_t = klpsym::defaults::MAX_DECOMPRESSED_SIZE)]
    pub max_decompressed_size: u64,
    /// Give the CPU away (sched_yield) at every reschedule point: for busy hosts where klpsym
    /// must not delay latency-critical work on its CPU.
    #[arg(long)]
    pub yield_cpu: bool,
    /// Microseconds of work between reschedule points.
    #[arg(long, value_name = "US", default_value_t = klpsym::defaults::RESCHED_INTERVAL_US)]
    pub resched_us: u64,
    /// Where decoded tables of images, vmlinux files and packages are kept between runs
    /// (default: $XDG_CACHE_HOME/klpsym, else ~/.cache/klpsym). An entry is found by the
    /// input's identity (content hash or build id), proven by its stamp when unchanged;
    /// `klpsym cache` shows and prunes.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Keep the cache under SIZE when this run writes to it (bytes, or with K, M, G, T):
    /// entries whose input is gone or changed go first, then the least recently used.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size)]
    pub cache_max_size: u64,
    /// Neither read nor write the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
}

/// A size: bytes, or a number with K, M, G or T (powers of 1024; a trailing `B` or `iB`
/// allowed).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{s}: not a size (a number, with K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| format!("{s}: not a size (a number, with K, M, G or T)"))?;
    Ok((n * (1u64 << shift) as f64).min(u64::MAX as f64) as u64)
}

/// What `check` and `convert` know of the target beyond its symbols.
#[derive(Debug, Args, Clone)]
pub struct TargetArgs {
    /// The target's BTF for the klp struct layouts: /sys/kernel/btf/vmlinux, a raw .BTF dump,
    /// a vmlinux / kernel image with a .BTF section, or a package holding one. A check of the running kernel uses
    /// /sys/kernel/btf/vmlinux by itself; without BTF, the documented 5.1-6.18 fallback.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The target's Module.symvers: exported names, their CRCs (checked against the module's
    /// symbol versions, as the module loader does) and namespaces. Default:
    /// MODULES/build/Module.symvers when --modules has it; else the CRCs a vmlinux or image
    /// holds.
    #[arg(long, value_name = "FILE")]
    pub symvers: Option<PathBuf>,
    /// The target's build configuration (.config; gzip too): CONFIG_LIVEPATCH,
    /// CONFIG_MODVERSIONS, CONFIG_MODULE_FORCE_LOAD, CONFIG_MODULE_SIG_FORCE. Default:
    /// config-RELEASE beside the image, /boot/config-RELEASE or /proc/config.gz for the running
    /// kernel.
    #[arg(long, value_name = "FILE")]
    pub kernel_config: Option<PathBuf>,
}

impl TargetArgs {
    /// The library's target options.
    pub fn options(&self) -> klpsym::TargetOptions {
        klpsym::TargetOptions {
            btf: self.btf.clone(),
            symvers: self.symvers.clone(),
            kernel_config: self.kernel_config.clone(),
        }
    }
}

/// `--loaded`'s value: `a,b,c`, or `@FILE` for a /proc/modules-format file.
fn parse_loaded(s: &str) -> Result<klpsym::Loaded, String> {
    match s.strip_prefix('@') {
        Some("") => Err(
            "'@' names no file: `@FILE` for a /proc/modules-format file (`@/proc/modules`)"
                .to_string(),
        ),
        Some(file) => Ok(klpsym::Loaded::ProcModules(PathBuf::from(file))),
        None => Ok(klpsym::Loaded::Names(
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect(),
        )),
    }
}

/// `--section-base`'s value: `NAME=ADDR`, a section of the patch module and its load address
/// in hex (`0x` optional).
fn parse_section_base(s: &str) -> Result<(String, u64), String> {
    const EXAMPLE: &str = "a section name and its load address in hex: .text=0xffffffffc0a00000";
    let Some((name, addr)) = s.rsplit_once('=') else {
        return Err(format!("expected NAME=ADDR ({EXAMPLE})"));
    };
    if name.is_empty() {
        return Err(format!("no section name before '=' ({EXAMPLE})"));
    }
    let digits = addr
        .strip_prefix("0x")
        .or_else(|| addr.strip_prefix("0X"))
        .unwrap_or(addr);
    // from_str_radix takes a sign; an address has none.
    let a = (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(digits, 16).ok())
        .flatten()
        .ok_or_else(|| {
            format!("'{addr}' is not an address in hex (at most 16 digits; {EXAMPLE})")
        })?;
    Ok((name.to_string(), a))
}

/// `--kernel-version`'s value.
fn parse_kernel_version(s: &str) -> Result<klpsym::KernelVersion, String> {
    s.parse().map_err(|e: klpsym::Error| e.to_string())
}

/// A yes/no flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum YesNo {
    /// Yes.
    #[value(alias = "yes")]
    Y,
    /// No.
    #[value(alias = "no")]
    N,
}

/// `klpsym lookup`.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// The symbol name (exact, as the kernel compares it).
    pub name: String,
    /// The object: `vmlinux` (the default) or a module name in any spelling (`nf-tables`,
    /// `nf_tables.ko`), normalized as the kernel spells it.
    #[arg(long, value_name = "OBJ")]
    pub object: Option<String>,
    /// The position (old_sympos): 0 = the name must be unique in the object; N = the N-th
    /// definition in kallsyms order.
    #[arg(
        long,
        short = 'p',
        value_name = "N",
        default_value_t = 0,
        conflicts_with = "file"
    )]
    pub sympos: u64,
    /// The definition in this source file (`fs/inode.c` or `inode.c`, matched on a path
    /// suffix): its position is found from the source's FILE entries (a vmlinux with .symtab,
    /// e.g. the -dbg package's, or a module) and looked up as the kernel would.
    #[arg(long, value_name = "PATH")]
    pub file: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym sympos`.
#[derive(Debug, Args)]
pub struct SymposArgs {
    /// The symbol name.
    pub name: String,
    /// Only this object (vmlinux or a module name).
    #[arg(long, value_name = "OBJ")]
    pub object: Option<String>,
    /// Only the definitions in this source file (`fs/inode.c` or `inode.c`, matched on a path
    /// suffix); needs a source with FILE entries (a vmlinux with .symtab, a module).
    #[arg(long, value_name = "PATH")]
    pub file: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym copies`.
#[derive(Debug, Args)]
pub struct CopiesArgs {
    /// The function's name (a clone's symbol, `foo.isra.0`, asks for the function it copies).
    pub name: String,
    /// Only the functions of this source file (`fs/inode.c`, or a header for a `static
    /// inline` function), matched on a path suffix of the compilation unit or the declaring
    /// file.
    #[arg(long, value_name = "PATH")]
    pub file: Option<String>,
    /// The object: vmlinux (default) or a module name (read from the module's debug file).
    #[arg(long, value_name = "OBJ")]
    pub object: Option<String>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym drift`.
#[derive(Debug, Args)]
pub struct DriftArgs {
    /// The names (one or more).
    #[arg(required = true, num_args = 1..)]
    pub names: Vec<String>,
    /// The object (vmlinux or a module name).
    #[arg(long, value_name = "OBJ", default_value = "vmlinux")]
    pub object: String,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// A glob over the whole name (`*`, `?`, `[...]`), or a substring when it has none of
    /// those.
    pub pattern: String,
    /// Only this object (vmlinux or a module name).
    #[arg(long, value_name = "OBJ")]
    pub object: Option<String>,
    /// List at most this many names (the count of all matches is printed anyway).
    #[arg(long, value_name = "N", default_value_t = klpsym::defaults::SEARCH_LIMIT)]
    pub limit: usize,
    /// Only names defined more than once: the ones a patch must give a position for.
    #[arg(long)]
    pub duplicates: bool,
    /// List in name order (default: the order kallsyms first lists them).
    #[arg(long)]
    pub sort: bool,
    /// Fold `__pfx_NAME` (function padding) and `__cfi_NAME` (kCFI) into NAME when it matches
    /// too; the twins are listed after the objects.
    #[arg(long)]
    pub fold: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym addr`.
#[derive(Debug, Args)]
pub struct AddrArgs {
    /// Addresses in hex (with or without 0x), or `name+0xoff[/0xsize] [module]`. None: read
    /// standard input, a pasted oops or trace as it is: every line is printed in order, each
    /// stack entry in it (every form x86 and arm64 kernels print: `[<ffffffff81...>]`,
    /// `? name+0x10/0xa0 [mod]`, `? 0xffffffffc0001234`, `RIP: 0010:name+...`, `pc : ...`,
    /// `lr : ...`, a bare address, with time stamps) followed by ` => ` and what it is in this
    /// kernel; an entry that cannot be decoded is marked in place (exit 1).
    pub addrs: Vec<String>,
    /// With standard input: a line that holds no stack entry is an entry that cannot be
    /// decoded (marked, exit 1), not passed through.
    #[arg(long)]
    pub strict: bool,
    /// After an address without a symbol (printed as the number, as %pS prints it), say why
    /// in parentheses: below the first symbol, past a symbol's end, outside the kernel.
    #[arg(long)]
    pub explain: bool,
    /// Read every address as a return address, as the kernel's %pB prints the entries of a
    /// stack trace: the symbol of ADDRESS-1 with the offset plus one, so a call that ends a
    /// function is named by its caller (`caller+0x40/0x40`, where %pS would name the next
    /// function at +0x0).
    #[arg(long)]
    pub return_addresses: bool,
    /// Leave out file:line. By default, when the kernel's DWARF is at hand (a vmlinux with
    /// debug info, its -dbg package or --debug-vmlinux), every symbolized address is followed
    /// by its `file:line` and inline chain as addr2line -f -i (and scripts/faddr2line) print
    /// them; a module's come from its debug file (its own .ko when unstripped, the host's
    /// /usr/lib/debug/lib/modules/RELEASE, or the -dbg package: read once, then cached).
    #[arg(long)]
    pub no_lines: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Only this object's symbols (vmlinux or a module name).
    #[arg(long, value_name = "OBJ")]
    pub object: Option<String>,
    /// Write to FILE (through a temporary file renamed into place) instead of standard output.
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Also list every object with its symbol count.
    #[arg(long)]
    pub objects: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The livepatch module (.ko).
    pub patch: PathBuf,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Place a section of the patch module (`.text=0xffffffffc0a00000`: its name and its load
    /// address, in hex) so PC-relative values are exact.
    #[arg(long = "section-base", value_name = "NAME=ADDR", value_parser = parse_section_base)]
    pub section_bases: Vec<(String, u64)>,
    /// Place every section as the kernel did when it loaded this module: its
    /// `/sys/module/<name>/sections` folder (or a copy). With --explain, the bytes of every
    /// relocation are then exact.
    #[arg(long = "sections-from", value_name = "DIR")]
    pub sections_from: Option<PathBuf>,
    /// Print every klp relocation: section, offset, type, symbol, resolved address, bytes.
    #[arg(long)]
    pub explain: bool,
    /// Exit 1 unless everything that decides the load was checked: a deferred object without
    /// its module's .ko, a module-loader check whose target fact is unknown (vermagic, CRCs,
    /// CONFIG_LIVEPATCH, the signature policy without the kernel's config: --kernel-config;
    /// a signed module's signature, whose keyring no file shows), a module that is not a
    /// livepatch, or, against a built-for kernel, a binding nothing proves (no source file on
    /// either side). Each open row is named on the verdict line and in --json's `open`. For
    /// CI.
    #[arg(long)]
    pub strict: bool,
    /// Warn when the kernel would hold a CPU longer than this many milliseconds while it
    /// resolves the patch's symbols (see resolution_cost in --json).
    #[arg(long, value_name = "MS", default_value_t = klpsym::defaults::HOLD_WARN_MS)]
    pub hold_warn_ms: f64,
    /// Nanoseconds the target spends per kallsyms entry its lookups visit, for the time
    /// estimates (default: 50, an x86_64 figure not yet calibrated on real hardware).
    #[arg(long, value_name = "NS")]
    pub visit_ns: Option<f64>,
    /// The kernel the patch was built for (an image with its -dbg package, a vmlinux, a
    /// folder of one release's packages): every replaced function and klp relocation symbol
    /// is checked to bind, on each kernel, the definition it binds there (same source file,
    /// same copy in it). One that loads but binds another definition exits 1. Default: the
    /// kernel given with --kernel whose release the patch's vermagic names, if any (in a
    /// fleet too: found first among all its kernels); that kernel's own bindings are then
    /// `assumed from vermagic`, never `as built`.
    #[arg(long, value_name = "KERNEL")]
    pub built_for: Option<PathBuf>,
    /// Predict a forced load, as `modprobe --force` or `finit_module(2)` with
    /// MODULE_INIT_IGNORE_MODVERSIONS|MODULE_INIT_IGNORE_VERMAGIC load it: the module's
    /// symbol versions (module_layout's CRC included) and its vermagic are ignored. A kernel
    /// with CONFIG_MODULE_FORCE_LOAD then loads a module built for another build of its
    /// series, tainted, and every symbol is bound as the positions say: see --built-for.
    #[arg(long)]
    pub force: bool,
    /// Do not look for the copies of what the patch replaces (inlined into other functions,
    /// cloned by the compiler) in the kernel's DWARF: no coverage, no PARTIAL COVERAGE.
    #[arg(long)]
    pub no_coverage: bool,
    /// A fleet, one kernel at a time: each kernel is opened, checked and freed before the
    /// next (memory bounded by one kernel, whatever the number of kernels), and printed as
    /// soon as it is checked, one JSON object per line (JSON Lines: the object of --json's
    /// "results" or "failed", with "patch"). Packages of one version and architecture are
    /// one kernel. Merge runs with `cat *.jsonl | jq -s`.
    #[arg(long)]
    pub jsonl: bool,
    /// Only the I-th of N parts of the kernels (`--shard 2/4`): kernel k (in the order of
    /// --kernel, a folder's files in name order) is in part (k mod N) + 1, so N machines (a
    /// CI matrix, a Kubernetes indexed Job) given the same sources check each kernel once.
    /// Implies --jsonl.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// With --jsonl or --shard: check this many kernels at once (memory: that many
    /// kernels). Lines come in the order kernels finish.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The module to convert (never modified).
    pub input: PathBuf,
    /// Where to write the converted module (through a temporary file renamed into place).
    #[arg(long, short = 'o', value_name = "OUT.ko")]
    pub output: PathBuf,
    /// Choose a definition: `[OBJ:]NAME=POS` (POS 1-based; 0 = must be unique), or
    /// `[OBJ:]NAME@PATH` for the definition in that source file (`init_once@fs/inode.c`,
    /// matched on a path suffix; needs a --kernel with FILE entries: a vmlinux with .symtab,
    /// e.g. the -dbg package's). Repeatable.
    #[arg(long = "pin", value_name = "[OBJ:]NAME=POS|NAME@PATH")]
    pub pins: Vec<String>,
    /// A file of pins, one per line; `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    pub pins_file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Where the livepatch sysfs tree is (tests point it at a copy).
    #[arg(long, value_name = "DIR", default_value = "/sys/kernel/livepatch")]
    pub sysfs: PathBuf,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `klpsym cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The cache folder (default: $XDG_CACHE_HOME/klpsym, else ~/.cache/klpsym).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Remove entries whose input is gone or changed, entries of another cache format, and
    /// entries not written or used for DAYS days (`--prune 0`: every entry).
    #[arg(long, value_name = "DAYS")]
    pub prune: Option<u64>,
    /// Remove entries, stale ones first and the least recently used next, until the cache
    /// takes at most SIZE (bytes, or with K, M, G, T).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `klpsym completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `klpsym man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write the pages into this folder (`klpsym.1` and one `klpsym-VERB.1` per verb) instead
    /// of printing `klpsym.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The flags' defaults are the library's (written once, in `klpsym::defaults`); the cache
    /// size is shown as `4G` and must parse to the same number.
    #[test]
    fn defaults_are_the_librarys() {
        assert_eq!(parse_size("4G").unwrap(), klpsym::defaults::CACHE_MAX_BYTES);
        let o = klpsym::Options::new();
        assert_eq!(o.max_input_size, klpsym::defaults::MAX_INPUT_SIZE);
        assert_eq!(o.cache_max_bytes, klpsym::defaults::CACHE_MAX_BYTES);
        assert_eq!(
            o.interval,
            std::time::Duration::from_micros(klpsym::defaults::RESCHED_INTERVAL_US)
        );
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_repeated_kernels() {
        let c = Cli::try_parse_from([
            "klpsym", "lookup", "x", "-k", "a", "--kernel", "b", "--sympos", "2",
        ])
        .unwrap();
        let Command::Lookup(l) = c.command else {
            panic!()
        };
        assert_eq!(l.source.kernels.len(), 2);
        assert_eq!(l.sympos, 2);
    }

    #[test]
    fn section_bases_are_names_and_hex_addresses() {
        for (s, want) in [
            (".text=0xffffffffc0a00000", (".text", 0xffff_ffff_c0a0_0000)),
            (".text=FFFFFFFFC0A00000", (".text", 0xffff_ffff_c0a0_0000)),
            (".data..ro_after_init=0X10", (".data..ro_after_init", 0x10)),
            ("a=b=0x1", ("a=b", 1)),
        ] {
            assert_eq!(
                parse_section_base(s),
                Ok((want.0.to_string(), want.1)),
                "{s}"
            );
        }
        for (bad, says) in [
            (".text", "expected NAME=ADDR"),
            ("=0x10", "no section name"),
            (".text=", "not an address in hex"),
            (".text=0x", "not an address in hex"),
            (".text=0xzz", "'0xzz' is not an address in hex"),
            (".text=+10", "not an address in hex"),
            (".text=0x1ffffffffffffffff", "at most 16 digits"),
        ] {
            let e = parse_section_base(bad).unwrap_err();
            assert!(e.contains(says) && e.contains(".text=0x"), "{bad}: {e}");
        }
        let c = Cli::try_parse_from([
            "klpsym",
            "check",
            "lp.ko",
            "-k",
            "k",
            "--section-base",
            ".text=0x1000",
            "--section-base",
            ".data=2000",
        ])
        .unwrap();
        let Command::Check(a) = c.command else {
            panic!()
        };
        assert_eq!(
            a.section_bases,
            vec![(".text".to_string(), 0x1000), (".data".to_string(), 0x2000)]
        );
        let e = Cli::try_parse_from(["klpsym", "check", "lp.ko", "--section-base", "0x1000"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--section-base") && e.contains("NAME=ADDR"),
            "{e}"
        );
    }

    #[test]
    fn loaded_is_names_or_a_proc_modules_file() {
        assert_eq!(
            parse_loaded("a-b, c.ko,"),
            Ok(klpsym::Loaded::Names(vec!["a-b".into(), "c.ko".into()]))
        );
        assert_eq!(
            parse_loaded("@/proc/modules"),
            Ok(klpsym::Loaded::ProcModules("/proc/modules".into()))
        );
        assert!(parse_loaded("@").unwrap_err().contains("@FILE"));
    }

    #[test]
    fn sizes_are_bytes_or_powers_of_1024() {
        for (s, want) in [
            ("123", 123),
            ("4G", 4 << 30),
            ("4GiB", 4 << 30),
            ("500M", 500 << 20),
            ("1.5k", 1536),
            ("2T", 2 << 40),
            ("0", 0),
        ] {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
        for bad in ["", "G", "-1", "4X", "four", "nan"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
