//! One opened kernel: its symbol table, what its source told about it, and what was said
//! while opening it.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use klpsym_core::{Resched, SymbolId, SymbolTable};
use klpsym_io::{LoadedKernel, ModuleTree, SourceKind};

use crate::error::{Error, Result};
use crate::line_tables::LinesCache;
use crate::module_size::{ListedModules, ModuleLookup};
use crate::options::Options;
use crate::version::{KernelVersion, VersionSource};

/// How loud a [`Note`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Level {
    /// Worth knowing.
    Note,
    /// Something the user should act on or be wary of.
    Warning,
    /// Something that went wrong in part of a run (the rest was answered).
    Error,
}

/// Something said while opening or checking, for the caller to show (the library never
/// prints).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Note {
    /// How loud.
    pub level: Level,
    /// What, in a sentence.
    pub text: String,
    /// The caller's input that would settle what it says (the option stating an assumed
    /// fact), when there is one: a command names its argument.
    #[serde(skip)]
    pub input: Option<crate::error::Input>,
}

impl Note {
    /// A note.
    pub fn info(text: impl Into<String>) -> Note {
        Note {
            level: Level::Note,
            text: text.into(),
            input: None,
        }
    }

    /// A warning.
    pub fn warning(text: impl Into<String>) -> Note {
        Note {
            level: Level::Warning,
            text: text.into(),
            input: None,
        }
    }

    /// An error in part of a run (the rest was answered).
    pub fn error(text: impl Into<String>) -> Note {
        Note {
            level: Level::Error,
            text: text.into(),
            input: None,
        }
    }

    /// The same note, settled by the caller's `input`.
    pub fn about(mut self, input: crate::error::Input) -> Note {
        self.input = Some(input);
        self
    }
}

/// A kernel opened from one source (or the packages of one release): its symbol table in
/// kallsyms order with the kernel's lookup semantics, and everything its source told.
///
/// Open one with [`crate::open`], [`crate::open_running`] or [`crate::open_all`]; ask it with
/// [`Kernel::lookup`], [`Kernel::sympos`], [`Kernel::symbolize`], [`Kernel::search`]; check a
/// livepatch against it with [`crate::check`].
#[derive(Debug)]
pub struct Kernel {
    pub(crate) inner: LoadedKernel,
    /// The module tree of [`Options::modules`], scanned once and shared.
    pub(crate) tree: Option<Arc<ModuleTree>>,
    /// The running kernel's default tree (`/lib/modules/$(uname -r)`), opened on first use.
    pub(crate) default_tree: OnceLock<Option<Arc<ModuleTree>>>,
    /// For each symbol, its definition in the debug vmlinux (see `pair_definitions`).
    pub(crate) paired: Option<Vec<Option<SymbolId>>>,
    /// What was said while opening.
    pub(crate) notes: Vec<Note>,
    pub(crate) opts: Options,
    /// Opened because no source was named (the running kernel by default): its module tree
    /// defaults to `/lib/modules/$(uname -r)`.
    pub(crate) by_default: bool,
    /// [`Kernel::livepatch_unsupported`], found once.
    unsupported: OnceLock<Option<String>>,
    /// The vmlinux addresses `%pS` symbolizes (`is_ksym_addr()`), found once: `[start, end)`.
    pub(crate) ksym_range: OnceLock<Option<(u64, u64)>>,
    /// The symbols of each module whose layout is known, as `%pS` scans them (made once).
    pub(crate) module_syms: OnceLock<Vec<Vec<(u64, SymbolId)>>>,
    /// How this kernel's `find_kallsyms_symbol()` bounds a module symbol (found once).
    pub(crate) module_lookup: OnceLock<ModuleLookup>,
    /// For each module a kallsyms lists without a layout: its symbols' addresses and the end
    /// of its text as the kallsyms shows them (made once).
    pub(crate) listed_modules: OnceLock<ListedModules>,
    /// The version a pasted trace's own header line told ([`Kernel::hear_trace`]), with its
    /// line.
    pub(crate) heard_version: Option<(KernelVersion, usize)>,
    /// Line tables read so far (`file:line`).
    pub(crate) lines: LinesCache,
    /// Modules read from the kernel's packages after it was opened without them (a check
    /// that needs them), with the names asked for.
    package_modules: Mutex<Option<(Vec<String>, Arc<ModuleTree>)>>,
}

impl Kernel {
    pub(crate) fn new(inner: LoadedKernel, opts: Options) -> Kernel {
        Kernel {
            inner,
            tree: None,
            default_tree: OnceLock::new(),
            paired: None,
            notes: Vec::new(),
            opts,
            by_default: false,
            unsupported: OnceLock::new(),
            ksym_range: OnceLock::new(),
            module_syms: OnceLock::new(),
            module_lookup: OnceLock::new(),
            listed_modules: OnceLock::new(),
            heard_version: None,
            lines: Default::default(),
            package_modules: Mutex::new(None),
        }
    }

    /// The source it was opened from.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What kind of source it was.
    pub fn kind(&self) -> SourceKind {
        self.inner.kind
    }

    /// Its symbols, in kallsyms order.
    pub fn table(&self) -> &SymbolTable {
        &self.inner.table
    }

    /// What its source told besides its symbols (banner, vermagic, build id, exports...).
    pub fn facts(&self) -> &klpsym_io::SourceFacts {
        &self.inner.facts
    }

    /// The kernel release (`6.1.0-57-amd64`), when the source tells it.
    pub fn release(&self) -> Option<String> {
        klpsym_io::release_of(&self.inner)
    }

    /// This kernel's version and where it was read from, in this order: stated
    /// ([`crate::Options::kernel_version`]), the source's banner, a package's file name, a
    /// pasted trace's header line ([`Kernel::hear_trace`]). A version without its stable
    /// sublevel takes it from a later one of the same series that has it (a banner `6.12.0`
    /// and a trace's `Debian 6.12.117-1`). `(None, Unknown)` when nothing tells.
    pub fn kernel_version(&self) -> (Option<KernelVersion>, VersionSource) {
        let banner = self
            .inner
            .facts
            .version
            .as_deref()
            .and_then(KernelVersion::from_banner);
        let package = self
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(KernelVersion::from_package_name);
        let told = [
            (self.opts.kernel_version, VersionSource::Stated),
            (banner, VersionSource::Banner),
            (package, VersionSource::PackageName),
            (
                self.heard_version.map(|(v, _)| v),
                VersionSource::Trace {
                    line: self.heard_version.map_or(0, |(_, l)| l),
                },
            ),
        ];
        let mut it = told.iter().filter_map(|(v, s)| v.map(|v| (v, s)));
        let Some((first, source)) = it.next() else {
            return (None, VersionSource::Unknown);
        };
        if first.sublevel.is_none() {
            if let Some((v, s)) =
                it.find(|(v, _)| v.series() == first.series() && v.sublevel.is_some())
            {
                return (Some(v), s.clone());
            }
        }
        (Some(first), source.clone())
    }

    /// The kernel's `(major, minor)`, when anything tells it ([`Kernel::kernel_version`]).
    pub(crate) fn series(&self) -> Option<(u32, u32)> {
        self.kernel_version().0.map(|v| v.series())
    }

    /// Takes `version`, told by line `line` of a pasted trace, as what this kernel's version
    /// is heard to be ([`Kernel::hear_trace`]): what was found with the version unknown (how
    /// `%pS` bounds symbols, and the symbols it scans) is found again.
    pub(crate) fn set_heard_version(&mut self, version: KernelVersion, line: usize) {
        self.heard_version = Some((version, line));
        self.module_lookup = OnceLock::new();
        self.module_syms = OnceLock::new();
        self.ksym_range = OnceLock::new();
        self.listed_modules = OnceLock::new();
    }

    /// What was said while opening it (warnings, notes), for the caller to show.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The I/O layer's view: timings, cache entry, package parts.
    pub fn loaded(&self) -> &LoadedKernel {
        &self.inner
    }

    /// True when this is the running kernel's `/proc/kallsyms`.
    pub fn is_running(&self) -> bool {
        klpsym_io::is_live(&self.inner.path)
    }

    /// Why this kernel loads no livepatch at all, when something says so: its configuration
    /// (the package's, `config-RELEASE` beside the image, `/boot` or `/proc/config.gz` for the
    /// running kernel) has CONFIG_MODULES or CONFIG_LIVEPATCH not set, or, with no
    /// configuration, a whole vmlinux table without `klp_enable_patch`. `None` when it can or
    /// when nothing tells. Lookups still answer as the code would; this says no patch will ask.
    pub fn livepatch_unsupported(&self) -> Option<String> {
        self.unsupported
            .get_or_init(|| self.find_livepatch_unsupported())
            .clone()
    }

    fn find_livepatch_unsupported(&self) -> Option<String> {
        let inner = &self.inner;
        let read;
        let config = match inner.package.as_ref().and_then(|p| p.config.as_ref()) {
            Some(c) => Some(c),
            None => {
                read = klpsym_io::find_config(inner)
                    .and_then(|p| klpsym_io::read_config(&p, &mut self.opts.resched()).ok());
                read.as_ref()
            }
        };
        if let Some(c) = config {
            return ["CONFIG_MODULES", "CONFIG_LIVEPATCH"]
                .into_iter()
                .find(|o| !c.enabled(o))
                .map(|o| {
                    format!(
                        "{o} is not set ({}): this kernel loads no livepatch",
                        c.path.display()
                    )
                });
        }
        let t = &inner.table;
        // A module or a few symbols given as the kernel says nothing either way.
        if t.object_info(klpsym_core::ObjectId::VMLINUX).symbol_count > 1000
            && t.by_name_in("klp_enable_patch", klpsym_core::ObjectId::VMLINUX)
                .next()
                .is_none()
        {
            return Some(
                "vmlinux does not define klp_enable_patch (no CONFIG_LIVEPATCH): this kernel loads no livepatch"
                    .to_string(),
            );
        }
        None
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The module tree of this kernel: [`Options::modules`], else for the running kernel
    /// `/lib/modules/$(uname -r)` when it exists, else the modules of the packages it came
    /// from (when they were read).
    pub fn module_tree(&self) -> Result<Option<Arc<ModuleTree>>> {
        if let Some(t) = &self.tree {
            return Ok(Some(Arc::clone(t)));
        }
        if let Some(dir) = self.default_modules_dir() {
            if let Some(t) = self.default_tree.get() {
                return Ok(t.clone());
            }
            let t = ModuleTree::open(&dir, &self.opts.load_options(), &mut self.opts.resched())
                .map_err(|e| {
                    Error::from(e)
                        .context("module tree")
                        .about(crate::error::Input::ModuleTree)
                })?;
            return Ok(self.default_tree.get_or_init(|| Some(Arc::new(t))).clone());
        }
        Ok(self
            .inner
            .package
            .as_ref()
            .and_then(|p| p.modules.clone())
            .map(Arc::new))
    }

    /// The module tree that holds `names` (module names, as a patch's objects name them): the
    /// [`Kernel::module_tree`], or, for a kernel opened from packages without their modules,
    /// the modules of those names read from its packages now (once; the package kernel is
    /// then cached with them, so the next run reads no package).
    pub fn module_tree_for(&self, names: &[String]) -> Result<Option<Arc<ModuleTree>>> {
        let tree = self.module_tree()?;
        let packages = match self.inner.package.as_ref() {
            Some(p) if tree.is_none() && !names.is_empty() => p.packages.clone(),
            _ => return Ok(tree),
        };
        let mut held = self
            .package_modules
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((n, t)) = held.as_ref() {
            if n == names {
                return Ok(Some(Arc::clone(t)));
            }
        }
        let mut load = self.opts.load_options();
        load.package_modules = true;
        load.package_module_names = Some(names.to_vec());
        // The debug package holds no module to load.
        let packages: Vec<std::path::PathBuf> = packages
            .into_iter()
            .filter(|p| !klpsym_io::is_debug_package(p))
            .collect();
        let mut rs = self.opts.resched();
        let read = klpsym_io::load_packages(&packages, &load, &mut rs)?;
        let mut tree = None;
        for (_, k) in read {
            let k = k?;
            if let Some(m) = k.package.and_then(|p| p.modules) {
                tree = Some(Arc::new(m));
            }
        }
        let Some(tree) = tree else {
            return Ok(None);
        };
        *held = Some((names.to_vec(), Arc::clone(&tree)));
        Ok(Some(tree))
    }

    /// The folder of [`Kernel::module_tree`] when it is one: the first of
    /// [`Options::modules`], or the running kernel's `/lib/modules/$(uname -r)`.
    pub fn modules_dir(&self) -> Option<std::path::PathBuf> {
        self.opts
            .modules
            .first()
            .cloned()
            .or_else(|| self.default_modules_dir())
    }

    fn default_modules_dir(&self) -> Option<std::path::PathBuf> {
        if !self.opts.modules.is_empty() || !self.by_default {
            return None;
        }
        let r = klpsym_io::live_release()?;
        let d = std::path::PathBuf::from(format!("/lib/modules/{r}"));
        d.is_dir().then_some(d)
    }

    /// Why every address of this table is zero, and how to fix it (see
    /// `kallsyms_show_value()`).
    pub fn hidden_addresses_cause(&self) -> String {
        if self.is_running() {
            let live = klpsym_io::AddressVisibility::read();
            hidden_cause(
                live.kptr_restrict,
                live.perf_event_paranoid,
                live.cap_syslog,
            )
        } else {
            "the file was saved by a reader the kernel hid addresses from (kernel.kptr_restrict, \
             kernel.perf_event_paranoid, CAP_SYSLOG); save it again as root"
                .to_string()
        }
    }

    /// An error when this table cannot answer address questions: its addresses are hidden
    /// (all zero), or it is a module read from its `.ko` (unplaced: section offsets).
    pub fn require_addresses(&self) -> Result<()> {
        if self.inner.table.addresses_hidden() {
            return Err(Error::bad_input(format!(
                "{}: addresses are hidden (all zero; see the warning above), so addresses cannot be answered",
                self.inner.path.display()
            )));
        }
        if self.inner.kind == SourceKind::Module {
            return Err(Error::bad_input(format!(
                "{}: a module read from its file has no load address (its symbols are unplaced, at section offsets); symbolize against the kernel's /proc/kallsyms, or place it: a kallsyms capture, its module tree, and the module named as loaded",
                self.inner.path.display()
            )));
        }
        Ok(())
    }

    /// The DWARF declaration line (`fs/inode.c:432`) of each of `ids` (vmlinux symbols of this
    /// table); `None` where no vmlinux with DWARF is at hand or it does not tell. The vmlinux
    /// is this kernel when it is one, else the debug vmlinux it was opened with, whose paired
    /// definition stands for it. Only the compilation units holding the functions are read.
    pub fn decl_lines(&self, ids: &[SymbolId]) -> Result<Vec<Option<klpsym_elf::DeclLine>>> {
        let addrs: Vec<Option<u64>> = if self.inner.kind == SourceKind::VmlinuxElf {
            ids.iter()
                .map(|&id| Some(self.inner.table.symbol(id).addr))
                .collect()
        } else if self.inner.debug.is_some() {
            ids.iter().map(|&id| self.debug_address(id)).collect()
        } else {
            return Ok(vec![None; ids.len()]);
        };
        let mut rs = self.opts.resched();
        Ok(self
            .inner
            .decl_lines_at(&addrs, self.opts.max_input_size, &mut rs)?)
    }

    /// Frees the table in steps with reschedule points (dropping a kernel gives megabytes back
    /// to the system at once).
    pub fn free(self, resched: &mut Resched) -> Result<()> {
        self.inner.free_with(resched)?;
        Ok(())
    }
}

/// Why the running kernel hides addresses from this reader: `kallsyms_show_value()`
/// (kernel/kallsyms.c; kernel/ksyms_common.c since 6.7) shows them when kptr_restrict is 0
/// and perf_event_paranoid <= 1, or when kptr_restrict <= 1 and the opener has CAP_SYSLOG;
/// never at kptr_restrict 2.
pub(crate) fn hidden_cause(
    kptr: Option<i64>,
    paranoid: Option<i64>,
    syslog: Option<bool>,
) -> String {
    let k = kptr.map_or("?".to_string(), |v| v.to_string());
    let p = paranoid.map_or("?".to_string(), |v| v.to_string());
    match (kptr, syslog) {
        (Some(v), _) if v >= 2 => format!(
            "kernel.kptr_restrict is {v}, which hides addresses from everyone, root included; \
             `sysctl kernel.kptr_restrict=1` shows them to root (CAP_SYSLOG)"
        ),
        (_, Some(false)) => format!(
            "this process lacks CAP_SYSLOG (kernel.kptr_restrict={k}, kernel.perf_event_paranoid={p}); \
             run as root{}",
            if kptr == Some(0) {
                ", or lower kernel.perf_event_paranoid to 1 so that everyone sees them"
            } else {
                ""
            }
        ),
        (_, Some(true)) => format!(
            "kernel.kptr_restrict={k} and this process has CAP_SYSLOG, so the kernel should show them: \
             /proc/kallsyms was opened by a process without it (a container's view?)"
        ),
        _ => format!(
            "the kernel hides symbol addresses (kernel.kptr_restrict={k}, kernel.perf_event_paranoid={p}); \
             run as root with kernel.kptr_restrict <= 1"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::hidden_cause;

    /// Regression: the hint blamed kptr_restrict=1 when it was 0.
    #[test]
    fn the_hidden_address_hint_names_the_real_cause() {
        let c = hidden_cause(Some(0), Some(2), Some(false));
        assert!(
            c.contains("kptr_restrict=0") && c.contains("perf_event_paranoid"),
            "{c}"
        );
        assert!(c.contains("CAP_SYSLOG"), "{c}");
        assert!(!c.contains("kptr_restrict is 1"), "{c}");
        let c = hidden_cause(Some(2), Some(-1), Some(true));
        assert!(
            c.contains("kptr_restrict is 2") && c.contains("root included"),
            "{c}"
        );
        let c = hidden_cause(Some(1), Some(2), Some(false));
        assert!(
            c.contains("lacks CAP_SYSLOG") && !c.contains("perf_event_paranoid to 1"),
            "{c}"
        );
    }
}
