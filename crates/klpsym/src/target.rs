//! What a livepatch is checked or converted against, gathered once per kernel for `check`,
//! `convert` and the matrix alike: the rules of its version, the struct layouts, the tables of
//! modules that are not loaded, its exports, and what its module loader checks a module
//! against (vermagic, configuration, CRCs).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klpsym_core::{bulk, Cancelled, ObjectId, Resched, SymbolTable};
use klpsym_io::{
    find_config, find_symvers, module_symbols_table, read_symvers_cached, Exports, KernelConfig,
    ModuleTree,
};
use klpsym_livepatch::{
    btf, Arch, ExportInfo, Fact, KernelRules, LoaderFacts, StructLayouts, Target,
};

use crate::error::{Error, Result};
use crate::kernel::{Kernel, Note};

/// What the caller knows of the target beyond its symbols (each `None`: found from the
/// kernel's own files).
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// The target's BTF for the klp struct layouts: `/sys/kernel/btf/vmlinux`, a raw `.BTF`
    /// dump, a vmlinux or kernel image with a `.BTF` section, or a package holding one.
    pub btf: Option<PathBuf>,
    /// The target's Module.symvers; default: `MODULES/build/Module.symvers` when the module
    /// tree has it, else a package's, else the CRCs the image or vmlinux holds.
    pub symvers: Option<PathBuf>,
    /// The target's build configuration; default: `config-RELEASE` beside the image, a
    /// package's, `/boot/config-RELEASE` or `/proc/config.gz` for the running kernel.
    pub kernel_config: Option<PathBuf>,
}

/// The struct layouts a check or conversion uses, and what was said about where they came
/// from.
#[derive(Debug, Clone)]
pub struct Layouts {
    /// The layouts.
    pub layouts: StructLayouts,
    /// What was said about them (a fallback, a BTF without livepatch structs).
    pub notes: Vec<Note>,
    /// `sizeof(struct module)` in the same BTF, when it describes the struct (the module
    /// loader holds `.gnu.linkonce.this_module` to it since 6.4).
    pub struct_module_size: Option<Fact<u64>>,
}

impl Layouts {
    /// The documented 5.1-6.18 fallback, with `why` as a note.
    pub fn fallback(why: impl Into<String>) -> Layouts {
        Layouts {
            layouts: StructLayouts::fallback(6, 1),
            notes: vec![Note::info(why)],
            struct_module_size: None,
        }
    }

    /// The layouts of the BTF file at `path` (`/sys/kernel/btf/vmlinux`, a raw `.BTF` dump, a
    /// vmlinux or image, a package). `named`: the user named it (a BTF without livepatch
    /// structs is then an error; otherwise the fallback, with a note).
    pub fn from_btf_file(
        path: &Path,
        named: bool,
        kernel_opts: &crate::Options,
    ) -> Result<Layouts> {
        let mut rs = kernel_opts.resched();
        let bytes =
            klpsym_io::read_btf(path, &kernel_opts.load_options(), &mut rs).map_err(|e| {
                Error::from(e)
                    .context("BTF")
                    .about(crate::error::Input::Btf)
            })?;
        // One walk over the types finds the klp structs and `struct module`.
        let mut names = btf::KLP_STRUCTS.to_vec();
        names.push("module");
        let found = btf::find_structs(&bytes, &names);
        bulk::free_with_points(bytes, &mut rs)?;
        let struct_module_size = found
            .as_ref()
            .ok()
            .and_then(|f| f.last().cloned().flatten())
            .map(|m| Fact::new(m.size, format!("struct module in {}", path.display())));
        let layouts = found.and_then(|f| btf::layouts_from_structs(&f[..btf::KLP_STRUCTS.len()]));
        match layouts {
            Ok(l) => Ok(Layouts {
                layouts: l,
                notes: Vec::new(),
                struct_module_size,
            }),
            // The running kernel's own BTF: without CONFIG_LIVEPATCH it has no klp structs,
            // which the module loader's checks report; the layouts fall back.
            Err(e) if !named => Ok(Layouts {
                struct_module_size,
                ..Layouts::fallback(format!(
                    "{}: {e}; klp struct layouts from the 5.1-6.18 fallback",
                    path.display()
                ))
            }),
            Err(e) => Err(Error::bad_input(format!("BTF {}: {e}", path.display()))
                .about(crate::error::Input::Btf)),
        }
    }

    /// The layouts the kernel's own BTF gives (an image's or a vmlinux's `.BTF`, read when it
    /// was decoded), or `None` when its source holds no BTF.
    pub fn of_kernel(kernel: &Kernel) -> Option<Layouts> {
        let structs = kernel.facts().klp_structs.as_ref()?;
        let found: Vec<Option<btf::BtfStruct>> = structs
            .iter()
            .take(btf::KLP_STRUCTS.len())
            .map(|s| {
                s.as_ref().map(|s| btf::BtfStruct {
                    size: s.size,
                    members: s.members.clone(),
                })
            })
            .collect();
        let struct_module_size = kernel.facts().struct_module_size().map(|n| {
            Fact::new(
                n,
                format!("struct module in {}'s BTF", kernel.path().display()),
            )
        });
        Some(match btf::layouts_from_structs(&found) {
            Ok(l) => Layouts {
                layouts: l,
                notes: Vec::new(),
                struct_module_size,
            },
            Err(e) => Layouts {
                struct_module_size,
                ..Layouts::fallback(format!(
                    "{}: its BTF: {e}; klp struct layouts from the 5.1-6.18 fallback",
                    kernel.path().display()
                ))
            },
        })
    }

    /// The layouts for `kernel`: `opts.btf` when given, else the kernel's own BTF, else for
    /// the running kernel `/sys/kernel/btf/vmlinux`, else the documented 5.1-6.18 fallback.
    pub fn for_kernel(opts: &TargetOptions, kernel: &Kernel) -> Result<Layouts> {
        if let Some(p) = &opts.btf {
            return Layouts::from_btf_file(p, true, kernel.options());
        }
        if let Some(l) = Layouts::of_kernel(kernel) {
            return Ok(l);
        }
        let sys = Path::new("/sys/kernel/btf/vmlinux");
        if kernel.by_default && sys.is_file() {
            return Layouts::from_btf_file(sys, false, kernel.options());
        }
        Ok(Layouts::fallback(
            "no BTF: klp struct layouts from the 5.1-6.18 fallback",
        ))
    }
}

/// A module the patch has an object in that is not loaded on the target, read from its `.ko`.
#[derive(Debug)]
pub struct UnplacedModule {
    /// Its name.
    pub name: String,
    /// Its symbols as kallsyms lists them once it is loaded (section-relative addresses).
    pub table: SymbolTable,
    /// The symbol table entries a lookup walks while it is loading.
    pub loading_symbols: u32,
    /// For each symbol of `table`, its place in that walk.
    pub loading_order: Vec<u32>,
}

/// Everything one kernel contributes to checking or converting a patch, gathered once.
#[derive(Debug)]
pub struct TargetFacts<'k> {
    kernel: &'k Kernel,
    /// The rules of the target's version.
    pub rules: KernelRules,
    /// The klp struct layouts.
    pub layouts: StructLayouts,
    /// The target's module tree, when there is one.
    pub tree: Option<Arc<ModuleTree>>,
    /// Tables of the patch's objects whose modules are not loaded.
    pub unplaced: Vec<UnplacedModule>,
    /// The ftrace call sites of the patch's module objects' functions, from their `.ko`.
    pub module_ftrace: Vec<ModuleSites>,
    inputs: LoaderInputs<'k>,
    knows_exports: bool,
    /// What was said while gathering.
    pub notes: Vec<Note>,
}

impl<'k> TargetFacts<'k> {
    /// Gathers what `kernel` contributes for a patch with objects `objects` (module names;
    /// "vmlinux" is skipped): rules, the offline tables of modules that are not loaded, the
    /// loader's inputs. `layouts` come from [`Layouts::for_kernel`] (the BTF they were read
    /// from also gives `sizeof(struct module)`).
    pub fn gather(
        kernel: &'k Kernel,
        opts: &TargetOptions,
        layouts: &Layouts,
        objects: &[String],
        rs: &mut Resched,
    ) -> Result<TargetFacts<'k>> {
        let mut notes = Vec::new();
        let rules = rules_for(kernel, &mut notes);
        let wanted: Vec<String> = objects
            .iter()
            .filter(|o| *o != "vmlinux" && kernel.table().object_by_name(o).is_none())
            .cloned()
            .collect();
        let tree = kernel.module_tree_for(&wanted)?;
        let inputs = LoaderInputs::gather(
            kernel,
            tree.as_deref(),
            opts,
            layouts.struct_module_size.clone(),
            rs,
        )?;
        let mut names: Vec<String> = objects.to_vec();
        // Modules that export what the patch may refer to are offered too (convert turns a
        // reference to a module's export into a klp relocation against that module).
        names.dedup();
        let unplaced = unplaced_tables(kernel, tree.as_deref(), &names, rs)?;
        let module_ftrace = module_ftrace(kernel, tree.as_deref(), objects, rs)?;
        let knows_exports = knows_exports(kernel.table(), rs)?;
        Ok(TargetFacts {
            module_ftrace,
            kernel,
            rules,
            layouts: layouts.layouts,
            tree,
            unplaced,
            inputs,
            knows_exports,
            notes,
        })
    }

    /// The kernel these facts are of.
    pub fn kernel(&self) -> &'k Kernel {
        self.kernel
    }

    /// The target's configuration, when one was found.
    pub fn config(&self) -> Option<&KernelConfig> {
        self.inputs.config.as_ref()
    }

    /// The target's ELF machine (62 x86-64, 183 arm64), when something says.
    pub fn machine(&self) -> Option<u16> {
        self.inputs.machine.as_ref().map(|f| f.value)
    }

    /// The CRC and namespace of an exported symbol, when known.
    pub fn export_info(&self, name: &str) -> Option<ExportInfo> {
        self.inputs.export_info(name)
    }

    /// The module exporting `name` according to the target's export list (Module.symvers),
    /// when one does (vmlinux's exports answer `Some("vmlinux")`).
    pub fn exporter(&self, name: &str) -> Option<&str> {
        Some(self.inputs.exports.as_ref()?.symbols.get(name)?.module)
    }

    /// True when vmlinux exports `name` (`__ksymtab_<name>` in kallsyms, or an export list
    /// that names vmlinux).
    pub fn exported_by_vmlinux(&self, name: &str) -> bool {
        exported_by(self.kernel.table(), name) || self.exporter(name) == Some("vmlinux")
    }

    /// Calls `f` with the [`Target`] these facts describe for a module of `arch`, with the
    /// patch's sections placed at `bases` (section index, address).
    pub fn with_target<R>(
        &self,
        arch: Arch,
        bases: &[(u32, u64)],
        f: impl FnOnce(&Target<'_>) -> R,
    ) -> R {
        let table = self.kernel.table();
        let export_info = |n: &str| -> Option<ExportInfo> { self.inputs.export_info(n) };
        let exported = |n: &str| exported_by(table, n);
        let mut target = Target::new(table, self.rules, arch)
            .with_layouts(self.layouts)
            .with_loader(self.inputs.facts(&export_info));
        if self.knows_exports {
            target = target.with_exports(&exported);
        }
        if let Some(t) = &self.kernel.facts().ftrace {
            target = target.with_ftrace_sites(&t.sites, t.source.as_str());
        }
        for o in &self.unplaced {
            target = target
                .with_unplaced_module(&o.name, &o.table)
                .with_loading_symbols(&o.name, o.loading_symbols)
                .with_loading_order(&o.name, &o.loading_order);
        }
        for m in &self.module_ftrace {
            target = target.with_module_ftrace(
                &m.name,
                klpsym_livepatch::ModuleFtrace {
                    names: &m.names,
                    sites: &m.sites,
                    source: &m.source,
                },
            );
        }
        for &(i, a) in bases {
            target = target.with_section_base(i, a);
        }
        f(&target)
    }
}

/// Rules for a kernel: `flag` (`6.1`), else its banner, else 6.1 with a warning.
fn rules_for(k: &Kernel, notes: &mut Vec<Note>) -> KernelRules {
    match k.kernel_version().0 {
        Some(v) => {
            let mut rules = KernelRules::for_version(v.major, v.minor);
            rules.sublevel = v.sublevel;
            rules
        }
        None => {
            notes.push(
                Note::warning(format!(
                    "{}: kernel version unknown (no banner in this source); using 6.1 rules (state the kernel version to choose others)",
                    k.path().display()
                ))
                .about(crate::error::Input::KernelVersion),
            );
            KernelRules::for_version(6, 1)
        }
    }
}

/// Tables of `names` (module objects) that are not loaded on `kernel`, from the module tree.
fn unplaced_tables(
    kernel: &Kernel,
    tree: Option<&ModuleTree>,
    names: &[String],
    rs: &mut Resched,
) -> Result<Vec<UnplacedModule>> {
    let Some(tree) = tree else {
        return Ok(Vec::new());
    };
    let table = kernel.table();
    let opts = kernel.opts.load_options();
    let mut out: Vec<UnplacedModule> = Vec::new();
    for n in names {
        rs.tick()?;
        if n == "vmlinux"
            || table.object_by_name(n).is_some()
            || tree.file(n).is_none()
            || out.iter().any(|o| &o.name == n)
        {
            continue;
        }
        let m = tree.load(n, &opts, rs)?;
        out.push(UnplacedModule {
            name: n.clone(),
            table: module_symbols_table(&m, None)?,
            loading_symbols: m.loading_symbols,
            loading_order: m.loading_order.clone(),
        });
    }
    Ok(out)
}

/// A module's functions with their ftrace call sites, read from its `.ko`.
#[derive(Debug)]
pub struct ModuleSites {
    /// The module.
    pub name: String,
    /// Its kallsyms names, in order.
    pub names: Vec<String>,
    /// Each name's call-site facts.
    pub sites: Vec<klpsym_elf::SiteFacts>,
    /// The `.ko`.
    pub source: String,
}

/// The call sites of `objects`' modules (but vmlinux), loaded or not, whose `.ko` the module
/// tree has: the facts the kernel's ftrace records are made of when each loads.
fn module_ftrace(
    kernel: &Kernel,
    tree: Option<&ModuleTree>,
    objects: &[String],
    rs: &mut Resched,
) -> Result<Vec<ModuleSites>> {
    let Some(tree) = tree else {
        return Ok(Vec::new());
    };
    let opts = kernel.opts.load_options();
    let mut out: Vec<ModuleSites> = Vec::new();
    for n in objects {
        rs.tick()?;
        let Some(file) = tree.file(n) else { continue };
        if n == "vmlinux" || out.iter().any(|o| &o.name == n) {
            continue;
        }
        let m = tree.load(n, &opts, rs)?;
        let Some(sites) = m.ftrace.clone() else {
            continue;
        };
        let names = m.entries.iter().map(|e| e.name.to_string()).collect();
        out.push(ModuleSites {
            name: n.clone(),
            names,
            sites,
            source: file.label().display().to_string(),
        });
    }
    Ok(out)
}

/// True when `table` exports `name` (`__ksymtab_<name>` is in kallsyms).
pub fn exported_by(table: &SymbolTable, name: &str) -> bool {
    table.by_name(&format!("__ksymtab_{name}")).next().is_some()
}

/// True when the table carries `__ksymtab_*` symbols (CONFIG_KALLSYMS_ALL), so "not exported"
/// can be told from "unknown". A few exports every kernel has are looked up by name first
/// (`kfree`; `printk` before 5.15, `_printk` since); without them, a walk over the table, a
/// tick per symbol (2-3 ms over a 6.12 image's 150,000 names, most of them before the first
/// `__ksymtab_`).
pub fn knows_exports(table: &SymbolTable, rs: &mut Resched) -> Result<bool, Cancelled> {
    if ["kfree", "_printk", "printk"]
        .iter()
        .any(|n| exported_by(table, n))
    {
        return Ok(true);
    }
    Ok(table.first_with_prefix("__ksymtab_", rs)?.is_some())
}

/// What one kernel's module loader checks against, gathered once per kernel (the kernel's own
/// export table is borrowed, not copied).
#[derive(Debug, Default)]
struct LoaderInputs<'k> {
    machine: Option<Fact<u16>>,
    vermagic: Option<Fact<String>>,
    config: Option<KernelConfig>,
    exports: Option<Cow<'k, Exports>>,
    livepatch: Option<Fact<bool>>,
    sig_enforce_live: Option<bool>,
    struct_module_size: Option<Fact<u64>>,
}

impl<'k> LoaderInputs<'k> {
    /// Reads what can be found for `k`: its vermagic (the image or vmlinux, else a module of
    /// the tree), `sizeof(struct module)` (`btf_struct_module`, the layouts' BTF, else a
    /// module of the tree), its configuration, its exports' CRCs, whether vmlinux has
    /// livepatch.
    fn gather(
        k: &'k Kernel,
        tree: Option<&ModuleTree>,
        opts: &TargetOptions,
        btf_struct_module: Option<Fact<u64>>,
        rs: &mut Resched,
    ) -> Result<LoaderInputs<'k>> {
        let mut out = LoaderInputs::default();
        let inner = &k.inner;
        let package = inner.package.as_ref();
        out.vermagic = inner
            .facts
            .vermagic
            .as_ref()
            .map(|v| Fact::new(v.clone(), format!("{}", inner.path.display())));
        out.struct_module_size = btf_struct_module;
        if let (Some(t), true) = (
            tree,
            out.vermagic.is_none() || out.struct_module_size.is_none(),
        ) {
            let (vermagic, size) = tree_module_facts(k, t, rs)?;
            out.vermagic = out.vermagic.or(vermagic);
            out.struct_module_size = out.struct_module_size.or(size);
        }
        let config = match &opts.kernel_config {
            Some(p) => Some(p.clone()),
            None if package.is_some_and(|p| p.config.is_some()) => None,
            None => find_config(inner),
        };
        if let Some(p) = config {
            out.config = Some(klpsym_io::read_config(&p, rs).map_err(|e| {
                Error::from(e)
                    .about(crate::error::Input::KernelConfig)
                    .context(format!("kernel config {}", p.display()))
            })?);
        } else if let Some(c) = package.and_then(|p| p.config.clone()) {
            out.config = Some(c);
        }
        if out.vermagic.is_none() {
            if let (Some(c), Some(r)) = (&out.config, k.release()) {
                out.vermagic = c.vermagic(&r).map(|v| {
                    Fact::new(
                        v,
                        format!("derived from {} (VERMAGIC_STRING)", c.path.display()),
                    )
                });
            }
        }
        let symvers = match &opts.symvers {
            Some(p) => Some(p.clone()),
            None => k.modules_dir().as_deref().and_then(find_symvers),
        };
        out.exports = match symvers {
            Some(p) => Some(Cow::Owned(read_symvers_cached(
                &p,
                &k.opts.load_options(),
                rs,
            )?)),
            None => package
                .and_then(|p| p.symvers.as_ref())
                .or(inner.facts.exports.as_ref())
                .map(Cow::Borrowed),
        };
        if k.is_running() {
            out.sig_enforce_live = klpsym_io::live_sig_enforce();
        }
        out.machine = machine_of(k, out.config.as_ref(), out.vermagic.as_ref());
        // vmlinux defines klp_enable_patch exactly when CONFIG_LIVEPATCH is set; a table with
        // only a few vmlinux symbols (a module given as the kernel) says nothing.
        if inner.table.object_info(ObjectId::VMLINUX).symbol_count > 1000 {
            let has = inner
                .table
                .by_name_in("klp_enable_patch", ObjectId::VMLINUX)
                .next()
                .is_some();
            out.livepatch = Some(Fact::new(
                has,
                format!(
                    "vmlinux {} klp_enable_patch",
                    if has { "defines" } else { "does not define" }
                ),
            ));
        }
        Ok(out)
    }

    fn export_info(&self, name: &str) -> Option<ExportInfo> {
        let e = self.exports.as_ref()?.symbols.get(name)?;
        Some(ExportInfo {
            crc: e.crc,
            namespace: e.namespace.map(str::to_string),
        })
    }

    /// The facts for a `Target`; `exports` is a closure over [`LoaderInputs::export_info`].
    fn facts<'a>(
        &'a self,
        exports: &'a (dyn Fn(&str) -> Option<ExportInfo> + Sync),
    ) -> LoaderFacts<'a> {
        let cfg = self.config.as_ref();
        let from_cfg = |opt: &str| -> Option<Fact<bool>> {
            let c = cfg?;
            Some(Fact::new(
                c.enabled(opt),
                format!("{} in {}", opt, c.path.display()),
            ))
        };
        let modversions = from_cfg("CONFIG_MODVERSIONS")
            .or_else(|| {
                self.vermagic.as_ref().map(|v| {
                    Fact::new(
                        v.value.split(' ').any(|t| t == "modversions"),
                        format!("the vermagic ({})", v.source),
                    )
                })
            })
            .or_else(|| {
                // Non-zero CRCs exist only under CONFIG_MODVERSIONS (Module.symvers lists
                // 0x00000000 without it).
                let e = self.exports.as_ref()?;
                e.symbols
                    .values()
                    .any(|x| x.crc.is_some_and(|c| c != 0))
                    .then(|| Fact::new(true, format!("the CRCs in {}", e.source)))
            });
        let sig_force = match self.sig_enforce_live {
            Some(b) => Some(Fact::new(b, "/sys/module/module/parameters/sig_enforce")),
            None => from_cfg("CONFIG_MODULE_SIG_FORCE"),
        };
        LoaderFacts {
            modules: from_cfg("CONFIG_MODULES"),
            vermagic: self.vermagic.clone(),
            livepatch: from_cfg("CONFIG_LIVEPATCH").or_else(|| self.livepatch.clone()),
            modversions,
            exports: self
                .exports
                .as_ref()
                .map(|e| Fact::new(exports, e.source.clone())),
            force_load: from_cfg("CONFIG_MODULE_FORCE_LOAD"),
            sig_force,
            machine: self.machine.clone(),
            struct_module_size: self.struct_module_size.clone(),
        }
    }
}

/// The target's ELF machine, when something says: its source (an image's or a vmlinux's
/// architecture), its configuration (CONFIG_X86_64, CONFIG_ARM64), or its vermagic (arm64's
/// ends in `aarch64`, MODULE_ARCH_VERMAGIC; x86's has no such token).
fn machine_of(
    k: &Kernel,
    config: Option<&KernelConfig>,
    vermagic: Option<&Fact<String>>,
) -> Option<Fact<u16>> {
    let by_name = |a: &str| match a {
        "x86_64" => Some(62u16),
        "aarch64" => Some(183u16),
        _ => None,
    };
    if let Some(m) = k.facts().arch.as_deref().and_then(by_name) {
        return Some(Fact::new(m, format!("{}", k.path().display())));
    }
    if let Some(c) = config {
        for (option, m) in [("CONFIG_X86_64", 62u16), ("CONFIG_ARM64", 183)] {
            if c.enabled(option) {
                return Some(Fact::new(m, format!("{option} in {}", c.path.display())));
            }
        }
    }
    let v = vermagic?;
    v.value
        .trim_end()
        .ends_with("aarch64")
        .then(|| Fact::new(183, format!("the vermagic ({})", v.source)))
}

/// What every in-tree module of a kernel carries: its vermagic, and a
/// `.gnu.linkonce.this_module` of `sizeof(struct module)` bytes (modpost writes the struct
/// itself into each module).
type TreeFacts = (Option<Fact<String>>, Option<Fact<u64>>);

/// [`TreeFacts`] from the first modules of `tree` that parse and carry them.
fn tree_module_facts(k: &Kernel, tree: &ModuleTree, rs: &mut Resched) -> Result<TreeFacts> {
    let opts = k.opts.load_options();
    let (mut vermagic, mut size) = (None, None);
    // The first modules that parse and have them (a tree may hold odd files).
    for f in tree.files().take(8) {
        rs.tick()?;
        if let Ok(m) = f.load(&opts, rs) {
            let source = || format!("{}", f.label().display());
            if vermagic.is_none() {
                vermagic = m.vermagic.clone().map(|v| Fact::new(v, source()));
            }
            if size.is_none() {
                size = m
                    .sections
                    .iter()
                    .find(|s| s.name == ".gnu.linkonce.this_module")
                    .map(|s| {
                        Fact::new(
                            s.size,
                            format!("the .gnu.linkonce.this_module of {}", source()),
                        )
                    });
            }
            m.free_with_points(rs)?;
        }
        if vermagic.is_some() && size.is_some() {
            break;
        }
    }
    Ok((vermagic, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(names: &[&str]) -> SymbolTable {
        let text: String = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{:016x} T {n}\n", 0xffff_ffff_8100_0000u64 + i as u64 * 16))
            .collect();
        klpsym_sources::parse_text(text.into_bytes(), &mut Resched::none())
            .unwrap()
            .table
    }

    /// A table with `__ksymtab_*` symbols knows its exports whether or not it has the ones
    /// looked up first; one without any does not.
    #[test]
    fn exports_are_known_from_any_ksymtab_symbol() {
        let rs = &mut Resched::none();
        for names in [
            &["a", "__ksymtab_kfree", "b"][..],
            &["a", "__ksymtab__printk"],
            &["a", "b", "__ksymtab_some_other_export"],
        ] {
            assert!(knows_exports(&table(names), rs).unwrap(), "{names:?}");
        }
        for names in [
            &["a", "kfree", "__ksymtab"][..],
            &["_printk", "__kstrtab_kfree"],
        ] {
            assert!(!knows_exports(&table(names), rs).unwrap(), "{names:?}");
        }
    }
}
