//! Building the target of `check` and `convert` from a loaded kernel: the rules of its
//! version, the struct layouts, the tables of modules that are not loaded, its exports, and
//! what its module loader checks a module against. The verbs only call these.

use std::path::{Path, PathBuf};

use clap::Args;

use klpsym_core::bulk;
use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{ObjectId, SymbolTable};
use klpsym_livepatch::{btf, ExportInfo, Fact, KernelRules, LoaderFacts, StructLayouts};
use klpsym_loader::{
    find_config, find_symvers, is_live, live_sig_enforce, module_symbols_table, read_symvers_with,
    release_of, Exports, KernelConfig, LoadedKernel, ModuleTree,
};

use crate::cli::SourceArgs;
use crate::output::CliError;
use crate::sources::{load_options, modules_dir};

/// What `check` and `convert` know of the target beyond its symbols.
#[derive(Debug, Args, Clone)]
pub struct TargetArgs {
    /// The target's BTF for the klp struct layouts: /sys/kernel/btf/vmlinux, a raw .BTF dump,
    /// a vmlinux / kernel image with a .BTF section, or a package holding one. A check of the running kernel uses
    /// /sys/kernel/btf/vmlinux by itself; without BTF, the documented 5.1-6.18 fallback.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The kernel version whose rules apply (`6.1`); default: the source's banner (for the
    /// running kernel, /proc/version).
    #[arg(long, value_name = "X.Y")]
    pub kernel_version: Option<String>,
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

/// Rules for a loaded kernel: `--kernel-version`, else its banner, else 6.1 with a warning.
pub fn rules_for(k: &LoadedKernel, flag: Option<&str>) -> Result<KernelRules, CliError> {
    if let Some(v) = flag {
        return KernelRules::from_release(v).ok_or_else(|| {
            format!("--kernel-version '{v}': expected X.Y (for example 6.1)").into()
        });
    }
    Ok(release_of(k)
        .as_deref()
        .and_then(KernelRules::from_release)
        .unwrap_or_else(|| {
            eprintln!(
                "klpsym: warning: {}: kernel version unknown (no banner in this source); using 6.1 rules (pass --kernel-version)",
                k.path.display()
            );
            KernelRules::for_version(6, 1)
        }))
}

/// The BTF file to read: `--btf` (true: the user named it), or the running kernel's own.
pub fn btf_path(args: &TargetArgs, source: &SourceArgs) -> Option<(PathBuf, bool)> {
    if let Some(p) = &args.btf {
        return Some((p.clone(), true));
    }
    let sys = Path::new("/sys/kernel/btf/vmlinux");
    (source.kernels.is_empty() && sys.is_file()).then(|| (sys.to_path_buf(), false))
}

/// Layouts from the BTF, or the fallback.
pub fn layouts_for(
    btf_path: Option<&(PathBuf, bool)>,
    source: &SourceArgs,
    rs: &mut Resched,
) -> Result<StructLayouts, CliError> {
    let Some((p, named)) = btf_path else {
        eprintln!("klpsym: note: no --btf: klp struct layouts from the 5.1-6.18 fallback");
        return Ok(StructLayouts::fallback(6, 1));
    };
    let bytes =
        klpsym_loader::read_btf(p, &load_options(source), rs).map_err(|e| format!("--btf: {e}"))?;
    let layouts = btf::layouts_from_btf(&bytes);
    bulk::free_with_points(bytes, rs)?;
    match layouts {
        Ok(l) => Ok(l),
        Err(e) if !named => {
            // The running kernel's own BTF: without CONFIG_LIVEPATCH it has no klp structs,
            // which the module loader's checks report; the layouts fall back.
            eprintln!(
                "klpsym: note: {}: {e}; klp struct layouts from the 5.1-6.18 fallback",
                p.display()
            );
            Ok(StructLayouts::fallback(6, 1))
        }
        Err(e) => Err(format!("--btf {}: {e}", p.display()).into()),
    }
}

/// The module tree of kernel `k`: `--modules` (or the running kernel's), else the modules
/// of the packages `k` came from. Scanned once per kernel and shared by every step.
pub fn module_tree(
    k: &LoadedKernel,
    source: &SourceArgs,
) -> Result<Option<std::sync::Arc<ModuleTree>>, CliError> {
    if let Some(dir) = modules_dir(source) {
        let mut rs = crate::sources::resched(source);
        return Ok(Some(crate::sources::open_module_tree(
            &dir,
            &load_options(source),
            &mut rs,
        )?));
    }
    Ok(k.package
        .as_ref()
        .and_then(|p| p.modules.clone())
        .map(std::sync::Arc::new))
}

/// Tables of the patch's objects that are not loaded on `table`, from the module tree.
pub fn offline_tables(
    source: &SourceArgs,
    tree: Option<&ModuleTree>,
    names: &[String],
    table: &SymbolTable,
    rs: &mut Resched,
) -> Result<Vec<OfflineModule>, CliError> {
    let Some(tree) = tree else {
        return Ok(Vec::new());
    };
    let opts = load_options(source);
    let mut out = Vec::new();
    for n in names {
        rs.tick()?;
        if n == "vmlinux" || table.object_by_name(n).is_some() || tree.file(n).is_none() {
            continue;
        }
        let m = tree.load(n, &opts, rs)?;
        out.push(OfflineModule {
            name: n.clone(),
            table: module_symbols_table(&m, None)?,
            loading_symbols: m.loading_symbols,
        });
    }
    Ok(out)
}

/// A module the patch has an object in that is not loaded on the target, read from its `.ko`.
pub struct OfflineModule {
    /// Its name.
    pub name: String,
    /// Its symbols as kallsyms lists them once it is loaded (section-relative addresses).
    pub table: SymbolTable,
    /// The symbol table entries a lookup walks while it is loading.
    pub loading_symbols: u32,
}

/// True when `table` exports `name` (`__ksymtab_<name>` is in kallsyms).
pub fn exported_by(table: &SymbolTable, name: &str) -> bool {
    table.by_name(&format!("__ksymtab_{name}")).next().is_some()
}

/// True when the table carries `__ksymtab_*` symbols (CONFIG_KALLSYMS_ALL), so "not exported"
/// can be told from "unknown". A few exports every kernel has are looked up by name first
/// (`kfree`; `printk` before 5.15, `_printk` since); without them, a walk over the table, a
/// tick per symbol (2-3 ms over a 6.12 image's 150,000 names, most of them before the first
/// `__ksymtab_`). The lookups use the table's name index: the verbs that call this (check,
/// convert) load tables with it built or read from the cache.
pub fn knows_exports(table: &SymbolTable, rs: &mut Resched) -> Result<bool, Cancelled> {
    if ["kfree", "_printk", "printk"]
        .iter()
        .any(|n| exported_by(table, n))
    {
        return Ok(true);
    }
    Ok(table.first_with_prefix("__ksymtab_", rs)?.is_some())
}

/// What one kernel's module loader checks against, gathered once per kernel (held here, so a
/// `Target` can borrow it; the kernel's own export table is borrowed from it, not copied).
#[derive(Debug, Default)]
pub struct LoaderInputs<'k> {
    vermagic: Option<Fact<String>>,
    config: Option<KernelConfig>,
    exports: Option<std::borrow::Cow<'k, Exports>>,
    livepatch: Option<Fact<bool>>,
    sig_enforce_live: Option<bool>,
}

impl<'k> LoaderInputs<'k> {
    /// Reads what can be found for `k`: its vermagic (the image or vmlinux, else a module of
    /// the tree), its configuration, its exports' CRCs, whether vmlinux has livepatch.
    pub fn gather(
        k: &'k LoadedKernel,
        tree: Option<&ModuleTree>,
        source: &SourceArgs,
        args: &TargetArgs,
        rs: &mut Resched,
    ) -> Result<LoaderInputs<'k>, CliError> {
        let mut out = LoaderInputs::default();
        let dir = modules_dir(source);
        let package = k.package.as_ref();
        out.vermagic = match &k.facts.vermagic {
            Some(v) => Some(Fact::new(v.clone(), format!("{}", k.path.display()))),
            None => match tree {
                Some(t) => tree_vermagic(t, source, rs)?,
                None => None,
            },
        };
        let config = match &args.kernel_config {
            Some(p) => Some(p.clone()),
            None if package.is_some_and(|p| p.config.is_some()) => None,
            None => find_config(k),
        };
        if let Some(p) = config {
            out.config = Some(
                KernelConfig::read(&p, rs)
                    .map_err(|e| format!("--kernel-config {}: {e}", p.display()))?,
            );
        } else if let Some(c) = package.and_then(|p| p.config.clone()) {
            out.config = Some(c);
        }
        if out.vermagic.is_none() {
            if let (Some(c), Some(r)) = (&out.config, release_of(k)) {
                out.vermagic = c.vermagic(&r).map(|v| {
                    Fact::new(
                        v,
                        format!("derived from {} (VERMAGIC_STRING)", c.path.display()),
                    )
                });
            }
        }
        let symvers = match &args.symvers {
            Some(p) => Some(p.clone()),
            None => dir.as_deref().and_then(find_symvers),
        };
        out.exports = match symvers {
            Some(p) => Some(std::borrow::Cow::Owned(read_symvers_with(
                &p,
                &load_options(source),
                rs,
            )?)),
            None => package
                .and_then(|p| p.symvers.as_ref())
                .or(k.facts.exports.as_ref())
                .map(std::borrow::Cow::Borrowed),
        };
        if is_live(&k.path) {
            out.sig_enforce_live = live_sig_enforce();
        }
        // vmlinux defines klp_enable_patch exactly when CONFIG_LIVEPATCH is set; a table with
        // only a few vmlinux symbols (a module given as --kernel) says nothing.
        if k.table.object_info(ObjectId::VMLINUX).symbol_count > 1000 {
            let has = k
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

    /// The CRC and namespace of an exported symbol, when known.
    pub fn export_info(&self, name: &str) -> Option<ExportInfo> {
        let e = self.exports.as_ref()?.symbols.get(name)?;
        Some(ExportInfo {
            crc: e.crc,
            namespace: e.namespace.map(str::to_string),
        })
    }

    /// The target's configuration, when one was found.
    pub fn config(&self) -> Option<&KernelConfig> {
        self.config.as_ref()
    }

    /// The facts for a `Target`; `exports` is a closure over [`LoaderInputs::export_info`].
    pub fn facts<'a>(
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
        }
    }
}

/// The vermagic of the kernel a module tree belongs to: every in-tree module carries it.
fn tree_vermagic(
    tree: &ModuleTree,
    source: &SourceArgs,
    rs: &mut Resched,
) -> Result<Option<Fact<String>>, CliError> {
    let opts = load_options(source);
    // The first module that parses and has one (a tree may hold odd files).
    for f in tree.files().take(8) {
        rs.tick()?;
        if let Ok(m) = f.load(&opts, rs) {
            if let Some(v) = m.vermagic {
                return Ok(Some(Fact::new(v, format!("{}", f.label().display()))));
            }
        }
    }
    Ok(None)
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
