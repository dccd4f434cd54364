//! The module loader's checks: what `load_module()` decides before livepatch sees the module.
//!
//! A livepatch is a module first. In the kernel's order (kernel/module.c `load_module()` in
//! 5.10; kernel/module/main.c since 5.19, with version.c and signing.c beside it):
//! 0. `elf_validity_check()` (5.10 since Debian's 5.10.26 hardening backport;
//!    `elf_validity_cache_copy()` 6.12): the ELF header's type (`ET_REL`) and machine
//!    (`elf_check_arch()` compares `e_machine` only) after the signature check, -ENOEXEC.
//!    Nothing of a module for another architecture is read further. Since 6.4 the same step
//!    checks `.gnu.linkonce.this_module` (one section, with contents, SHF_ALLOC, and
//!    `sizeof(struct module)` bytes — `elf_validity_cache_index_mod()` since 6.13); both
//!    are in `validity.rs`.
//! 1. `module_sig_check()` — an appended signature is verified; an unsigned module is refused
//!    only when signatures are enforced (`Loading of unsigned module is rejected`; before
//!    5.12 and 5.10.26 prefixed `<module>: `, see `KernelRules::unsigned_module_line`).
//!    5.10.0 ran it after the blacklist check, later kernels first: either way before
//!    everything below.
//! 2. `check_modstruct_version()` — `check_version(info, "module_layout", ...)`: a CRC that
//!    disagrees fails the load with -ENOEXEC (module_layout is still exported in 7.1).
//! 3. `check_modinfo()` — `same_magic()`: `%s: version magic '%s' should be '%s'` (-ENOEXEC);
//!    with a `__versions` section in the module the release part (up to the first space) is
//!    not compared, the CRCs speak for it. Then `check_modinfo_livepatch()`: on a kernel without
//!    CONFIG_LIVEPATCH, `%s: module is marked as livepatch module, but livepatch support is
//!    disabled` (-ENOEXEC).
//! 4. `simplify_symbols()` — every undefined symbol goes through `resolve_symbol()`: not
//!    exported → `%s: Unknown symbol %s (err -2)`; exported with a CRC the module disagrees
//!    with → `%s: disagrees about version of symbol %s` then `Unknown symbol %s (err -22)`;
//!    exported in a namespace the module does not import → `%s: module uses symbol (%s) from
//!    namespace %s, but does not import it.` then `(err -22)`. All are printed, then the load
//!    fails. SHN_COMMON symbols: `%s: please compile with -fno-common` (-ENOEXEC).
//!
//! Then `apply_relocations()` (the klp part is `klp_relocs.rs`). Every check whose target
//! fact is unknown is reported as not checked, never as passed.

use std::collections::HashMap;

use super::{Ctx, EINVAL, ENOENT, ENOEXEC};

/// -ENOSYS.
const ENOSYS: i32 = 38;
use crate::consts as elf;
use crate::report::*;
use crate::target::ExportInfo;
use klpsym_core::resched::Cancelled;

/// -EKEYREJECTED.
const EKEYREJECTED: i32 = 129;

/// `same_magic()` (kernel/module/version.c, kernel/module.c before 5.19): with CRCs in the
/// module, the parts before the first space (the release) are skipped.
pub(crate) fn same_magic(module: &str, kernel: &str, has_crcs: bool) -> bool {
    if has_crcs {
        let skip = |s: &str| -> String { s[s.find(' ').unwrap_or(s.len())..].to_string() };
        skip(module) == skip(kernel)
    } else {
        module == kernel
    }
}

impl Ctx<'_, '_, '_, '_> {
    /// `load_module()` up to and including `apply_relocations()`.
    /// After a failure the kernel stops; the later checks still run here, their problems
    /// marked not reached, so the author sees everything at once.
    pub(super) fn module_load(&mut self) -> Result<(), Cancelled> {
        // The steps before simplify_symbols() run no loop of their own; a clock read between
        // them keeps a stride learned on the patch reader's cheap items from carrying their
        // untracked work past the interval.
        self.module_support();
        self.signature();
        if let Some(c) = self.header_check.take() {
            self.loader_checks.push(c);
        }
        self.r.tick_step()?;
        self.this_module();
        self.module_layout();
        self.r.tick_step()?;
        self.modinfo();
        self.r.tick_step()?;
        self.simplify_symbols()?;
        self.apply_relocations()
    }

    /// Records a check; `reached` is whether the kernel gets to it (taken before it ran).
    pub(super) fn loader_check(
        &mut self,
        check: LoaderCheckKind,
        status: CheckStatus,
        detail: String,
    ) {
        let reached = self.loader_reached;
        let (status, detail) = if !reached && status != CheckStatus::NotApplicable {
            // A step the kernel does not reach has no verdict of its own: what it would have
            // compared is not said either ("not reached ... matches" read as both).
            (CheckStatus::NotReached, String::new())
        } else {
            (status, detail)
        };
        self.loader_reached = !self.blocked(&Stage::ModuleLoad);
        self.loader_checks.push(LoaderCheck {
            check,
            status,
            detail,
        });
    }

    /// A failure of the module loader before the symbols: the load stops there.
    pub(super) fn loader_failure(
        &mut self,
        kind: ProblemKind,
        log: Vec<String>,
        errno: i32,
        hint: String,
    ) {
        self.problem(kind, &Stage::ModuleLoad, log, errno, None, None, None, hint);
        self.fail(&Stage::ModuleLoad);
    }

    /// Whether the target has a module loader at all (CONFIG_MODULES).
    pub(super) fn module_support(&mut self) {
        match self.t.loader.modules.clone() {
            Some(f) if !f.value => {
                self.loader_failure(
                    ProblemKind::ModulesUnsupported,
                    vec![],
                    ENOSYS,
                    format!(
                        "the target kernel has no module support ({}): finit_module(2) does not exist there, no module can load",
                        f.source
                    ),
                );
                self.loader_check(
                    LoaderCheckKind::ModuleSupport,
                    CheckStatus::Failed,
                    format!("CONFIG_MODULES is off ({})", f.source),
                );
            }
            Some(f) => self.loader_check(
                LoaderCheckKind::ModuleSupport,
                CheckStatus::Passed,
                format!("CONFIG_MODULES is on ({})", f.source),
            ),
            // A kernel that lists modules, or a module tree, has module support; the check
            // is only listed when the configuration says.
            None => {}
        }
    }

    /// `module_sig_check()`; false when the load stops here.
    pub(super) fn signature(&mut self) -> bool {
        let facts = &self.t.loader;
        if self.m.signed {
            self.loader_check(
                LoaderCheckKind::Signature,
                CheckStatus::NotChecked,
                "the module is signed: the kernel verifies the signature against its keyring (a signature that does not match the module's bytes fails the load even when signatures are not enforced; an unknown key only taints)".into(),
            );
            return true;
        }
        match facts.sig_force.clone() {
            Some(f) if f.value => {
                // module_sig_check(): the line by version and stable sublevel.
                let line = self.t.rules.unsigned_module_line(&self.m.name);
                self.loader_failure(
                    ProblemKind::UnsignedModule,
                    vec![line],
                    EKEYREJECTED,
                    format!(
                        "the target enforces module signatures ({}): sign the module with a key the kernel trusts",
                        f.source
                    ),
                );
                self.loader_check(
                    LoaderCheckKind::Signature,
                    CheckStatus::Failed,
                    format!("unsigned; signatures enforced ({})", f.source),
                );
                false
            }
            Some(f) => {
                self.loader_check(
                    LoaderCheckKind::Signature,
                    CheckStatus::Passed,
                    format!(
                        "unsigned; signatures not enforced ({}) — unless booted with module.sig_enforce=1 or under lockdown; the kernel logs 'module verification failed: signature and/or required key missing - tainting kernel'",
                        f.source
                    ),
                );
                true
            }
            None => {
                self.loader_check(
                    LoaderCheckKind::Signature,
                    CheckStatus::NotChecked,
                    "unsigned; whether the target enforces signatures is not known (CONFIG_MODULE_SIG_FORCE, module.sig_enforce, lockdown)".into(),
                );
                true
            }
        }
    }

    /// The target's CRC of `name`, when its CRCs are known and it exports `name`.
    fn export_info(&self, name: &str) -> Option<ExportInfo> {
        self.t.loader.exports.as_ref().and_then(|f| (f.value)(name))
    }

    /// True when vmlinux, a loaded module or a module the target ships defines `name`: the
    /// symbol exists there, only unexported, so a klp relocation can reach it.
    fn defined_in_target(&self, name: &str) -> bool {
        self.t.kernel.by_name(name).next().is_some()
            || self
                .t
                .unplaced_modules
                .values()
                .any(|t| t.by_name(name).next().is_some())
    }

    fn modversions(&self) -> Option<bool> {
        self.t.loader.modversions.as_ref().map(|f| f.value)
    }

    fn force_load(&self) -> Option<bool> {
        self.t.loader.force_load.as_ref().map(|f| f.value)
    }

    /// `check_modstruct_version()`; false when the load stops here.
    fn module_layout(&mut self) -> bool {
        let name = self.m.name.clone();
        if self.modversions() == Some(false) {
            self.loader_check(
                LoaderCheckKind::ModuleLayout,
                CheckStatus::NotApplicable,
                "the target has no CONFIG_MODVERSIONS".into(),
            );
            return true;
        }
        if self.m.versions.is_none() {
            return self.no_versions(LoaderCheckKind::ModuleLayout);
        }
        let Some(kernel_crc) = self.export_info("module_layout").and_then(|e| e.crc) else {
            let why = match &self.t.loader.exports {
                Some(f) => format!("{} has no CRC for module_layout", f.source),
                None => "the target's CRCs are not known (give its Module.symvers, or a vmlinux with .symtab)".into(),
            };
            self.loader_check(LoaderCheckKind::ModuleLayout, CheckStatus::NotChecked, why);
            return true;
        };
        match self.m.version_of("module_layout") {
            Some(c) if c != u64::from(kernel_crc) => {
                self.loader_failure(
                    ProblemKind::SymbolVersionMismatch,
                    vec![format!(
                        "{name}: disagrees about version of symbol module_layout"
                    )],
                    ENOEXEC,
                    format!(
                        "the module was built against another kernel (module_layout CRC {c:#010x}, the target's {kernel_crc:#010x}): rebuild it with the target's headers"
                    ),
                );
                self.loader_check(
                    LoaderCheckKind::ModuleLayout,
                    CheckStatus::Failed,
                    format!("CRC {c:#010x}, target {kernel_crc:#010x}"),
                );
                false
            }
            Some(c) => {
                self.loader_check(
                    LoaderCheckKind::ModuleLayout,
                    CheckStatus::Passed,
                    format!("CRC {c:#010x} matches"),
                );
                true
            }
            None => {
                self.warn_once(format!(
                    "the kernel logs '{name}: no symbol version for module_layout' (the module's __versions lacks it) and loads it"
                ));
                self.loader_check(
                    LoaderCheckKind::ModuleLayout,
                    CheckStatus::Passed,
                    "the module lists no CRC for module_layout: not compared".into(),
                );
                true
            }
        }
    }

    /// `check_version()` of a module without symbol versions on a CONFIG_MODVERSIONS kernel:
    /// `try_to_force_load()`.
    fn no_versions(&mut self, check: LoaderCheckKind) -> bool {
        let name = self.m.name.clone();
        match (self.modversions(), self.force_load()) {
            (Some(true), Some(false)) => {
                self.loader_failure(
                    ProblemKind::ForceLoadRequired,
                    vec![],
                    ENOEXEC,
                    "the module has no symbol versions (__versions) and the target (CONFIG_MODVERSIONS, no CONFIG_MODULE_FORCE_LOAD) refuses it silently: build it with the target's kbuild".into(),
                );
                self.loader_check(
                    check,
                    CheckStatus::Failed,
                    "no __versions in the module".into(),
                );
                false
            }
            (Some(true), Some(true)) => {
                self.warn_once(format!(
                    "the module has no symbol versions: the target force-loads it ('{name}: {check}: kernel tainted.')"
                ));
                self.loader_check(
                    check,
                    CheckStatus::Passed,
                    "no __versions in the module; CONFIG_MODULE_FORCE_LOAD taints and loads".into(),
                );
                true
            }
            _ => {
                self.loader_check(
                    check,
                    CheckStatus::NotChecked,
                    "the module has no symbol versions (__versions); whether the target uses CONFIG_MODVERSIONS / CONFIG_MODULE_FORCE_LOAD is not known".into(),
                );
                true
            }
        }
    }

    /// `check_modinfo()`: vermagic, then the livepatch tag; false when the load stops here.
    fn modinfo(&mut self) -> bool {
        let name = self.m.name.clone();
        let has_crcs = self.m.basic_versions;
        let module_magic = self.m.modinfo("vermagic").map(str::to_string);
        let ok = match (&module_magic, self.t.loader.vermagic.clone()) {
            (None, _) => match self.force_load() {
                Some(false) => {
                    self.loader_failure(
                        ProblemKind::ForceLoadRequired,
                        vec![],
                        ENOEXEC,
                        "the module has no vermagic and the target cannot force-load (no CONFIG_MODULE_FORCE_LOAD): build it with kbuild".into(),
                    );
                    self.loader_check(
                        LoaderCheckKind::Vermagic,
                        CheckStatus::Failed,
                        "the module has none".into(),
                    );
                    false
                }
                Some(true) => {
                    self.warn_once(format!(
                        "the module has no vermagic: the target force-loads it ('{name}: bad vermagic: kernel tainted.')"
                    ));
                    self.loader_check(
                        LoaderCheckKind::Vermagic,
                        CheckStatus::Passed,
                        "the module has none; CONFIG_MODULE_FORCE_LOAD taints and loads".into(),
                    );
                    true
                }
                None => {
                    self.loader_check(
                        LoaderCheckKind::Vermagic,
                        CheckStatus::NotChecked,
                        "the module has none: it loads only where CONFIG_MODULE_FORCE_LOAD is set (not known for the target)".into(),
                    );
                    true
                }
            },
            (Some(_), None) => {
                self.loader_check(
                    LoaderCheckKind::Vermagic,
                    CheckStatus::NotChecked,
                    "the target's vermagic is not known (give the target's module tree, or a kernel image or vmlinux)".into(),
                );
                true
            }
            (Some(m), Some(k)) if same_magic(m, &k.value, has_crcs) => {
                let how = if has_crcs && m != &k.value {
                    " (the release differs; with symbol versions the kernel compares only what follows it)"
                } else {
                    ""
                };
                self.loader_check(
                    LoaderCheckKind::Vermagic,
                    CheckStatus::Passed,
                    format!("'{m}' matches the target's ({}){how}", k.source),
                );
                true
            }
            (Some(m), Some(k)) => {
                self.loader_failure(
                    ProblemKind::VermagicMismatch,
                    vec![format!(
                        "{name}: version magic '{m}' should be '{}'",
                        k.value
                    )],
                    ENOEXEC,
                    format!(
                        "the module was built for another kernel or configuration (the target's vermagic: {}): rebuild it against the target's headers",
                        k.source
                    ),
                );
                self.loader_check(
                    LoaderCheckKind::Vermagic,
                    CheckStatus::Failed,
                    format!("'{m}' against '{}' ({})", k.value, k.source),
                );
                false
            }
        };
        // After a vermagic failure the kernel stops; the livepatch check still runs here,
        // reported as not reached, so the author learns both.
        if !self.m.is_marked_livepatch() {
            self.loader_check(
                LoaderCheckKind::LivepatchSupport,
                CheckStatus::NotApplicable,
                "the module has no livepatch modinfo tag".into(),
            );
            return true;
        }
        match self.t.loader.livepatch.clone() {
            Some(f) if !f.value => {
                self.loader_failure(
                    ProblemKind::LivepatchDisabled,
                    vec![format!(
                        "{name}: module is marked as livepatch module, but livepatch support is disabled"
                    )],
                    ENOEXEC,
                    format!(
                        "the target kernel is built without CONFIG_LIVEPATCH ({}): no livepatch can load there",
                        f.source
                    ),
                );
                self.loader_check(
                    LoaderCheckKind::LivepatchSupport,
                    CheckStatus::Failed,
                    format!("CONFIG_LIVEPATCH is off ({})", f.source),
                );
                false
            }
            Some(f) => {
                self.loader_check(
                    LoaderCheckKind::LivepatchSupport,
                    CheckStatus::Passed,
                    format!("CONFIG_LIVEPATCH is on ({})", f.source),
                );
                ok
            }
            None => {
                self.loader_check(
                    LoaderCheckKind::LivepatchSupport,
                    CheckStatus::NotChecked,
                    "whether the target has CONFIG_LIVEPATCH is not known".into(),
                );
                ok
            }
        }
    }

    /// `simplify_symbols()`: every undefined symbol resolved against the target's exports.
    fn simplify_symbols(&mut self) -> Result<(), Cancelled> {
        let stage = Stage::ModuleLoad;
        let m = self.m;
        let name = m.name.clone();
        // check_version() takes the first entry of a name.
        let mut versions: HashMap<&str, u64> = HashMap::new();
        for v in m.versions.iter().flatten() {
            self.r.tick()?;
            versions.entry(v.name.as_str()).or_insert(v.crc);
        }
        let imports: Vec<&str> = m
            .modinfo
            .iter()
            .filter(|(k, _)| k == "import_ns")
            .map(|(_, v)| v.as_str())
            .collect();
        let modversions = self.modversions();
        let crcs_known = self.t.loader.exports.is_some();
        let (mut unknown, mut compared, mut mismatched, mut unversioned) = (0, 0, 0, 0);
        let mut any = false;
        for s in m.elf.symbols.iter().skip(1) {
            self.r.tick()?;
            if s.shndx == elf::SHN_COMMON {
                if s.name.starts_with("__gnu_lto") {
                    continue;
                }
                self.problem(
                    ProblemKind::CommonSymbol,
                    &stage,
                    vec![format!("{name}: please compile with -fno-common")],
                    ENOEXEC,
                    Some(&s.name),
                    None,
                    None,
                    "build with -fno-common (kbuild does)".into(),
                );
                any = true;
                continue;
            }
            if !s.is_undefined() || s.name.is_empty() {
                continue;
            }
            let weak = s.bind() == elf::STB_WEAK;
            let klp = s.name.starts_with(".klp.sym.");
            if !klp && s.name == "_GLOBAL_OFFSET_TABLE_" && m.arch == crate::Arch::X86_64 {
                continue; // ignore_undef_symbol()
            }
            let exported = if klp {
                Some(false)
            } else {
                self.t.exported.map(|f| f(&s.name))
            };
            match exported {
                Some(false) if weak => {}
                Some(false) => {
                    let hint = if klp {
                        "a klp symbol must have st_shndx SHN_LIVEPATCH (0xff20), not SHN_UNDEF"
                            .to_string()
                    } else if self.defined_in_target(&s.name) {
                        "the target defines it but does not export it: turn its relocations into klp relocations (klpsym convert)"
                            .to_string()
                    } else {
                        // Nothing of that name anywhere (`_printk` on 5.10, which has
                        // `printk`): the module's code was compiled for another kernel, and
                        // no relocation can bind it here.
                        "the target has no symbol of that name: the module was built against another kernel; rebuild it against the target's headers"
                            .to_string()
                    };
                    self.problem(
                        ProblemKind::UnknownSymbol,
                        &stage,
                        vec![format!("{name}: Unknown symbol {} (err -2)", s.name)],
                        ENOENT,
                        Some(&s.name),
                        None,
                        None,
                        hint,
                    );
                    unknown += 1;
                    any = true;
                }
                Some(true) | None => {
                    // resolve_symbol(): check_version(), then the namespace.
                    let info = self.export_info(&s.name);
                    let mut lines = Vec::new();
                    let mut hint = String::new();
                    if let (Some(true), Some(kcrc)) =
                        (modversions, info.as_ref().and_then(|i| i.crc))
                    {
                        match (&m.versions, versions.get(s.name.as_str())) {
                            (None, _) => {}
                            (Some(_), Some(&c)) => {
                                compared += 1;
                                if c != u64::from(kcrc) {
                                    mismatched += 1;
                                    lines.push(format!(
                                        "{name}: disagrees about version of symbol {}",
                                        s.name
                                    ));
                                    hint = format!(
                                        "the module expects CRC {c:#010x} for {}, the target exports it with {kcrc:#010x}: the module was built against another kernel",
                                        s.name
                                    );
                                }
                            }
                            (Some(_), None) => {
                                unversioned += 1;
                                self.warn_once(format!(
                                    "the kernel logs '{name}: no symbol version for {}' once and loads the module",
                                    s.name
                                ));
                            }
                        }
                    }
                    if lines.is_empty() {
                        if let Some(ns) = info.as_ref().and_then(|i| i.namespace.as_deref()) {
                            if !imports.contains(&ns) {
                                lines.push(format!(
                                    "{name}: module uses symbol ({}) from namespace {ns}, but does not import it.",
                                    s.name
                                ));
                                hint = format!("add MODULE_IMPORT_NS({ns}) to the module source");
                            }
                        }
                    }
                    if !lines.is_empty() {
                        lines.push(format!("{name}: Unknown symbol {} (err -22)", s.name));
                        let kind = if hint.starts_with("add MODULE_IMPORT_NS") {
                            ProblemKind::UnknownSymbol
                        } else {
                            ProblemKind::SymbolVersionMismatch
                        };
                        self.problem(kind, &stage, lines, EINVAL, Some(&s.name), None, None, hint);
                        any = true;
                    }
                }
            }
        }
        {
            let detail = match (modversions, crcs_known, &m.versions) {
                (Some(false), _, _) => None,
                // check_version() without versions: try_to_force_load() for each import,
                // which CONFIG_MODULE_FORCE_LOAD lets through (tainted once).
                (Some(true), _, None) if self.force_load() == Some(true) => Some((
                    CheckStatus::Passed,
                    "the module has no symbol versions (or they are ignored: a forced load); CONFIG_MODULE_FORCE_LOAD loads it tainted".to_string(),
                )),
                (_, _, None) => Some((
                    CheckStatus::NotChecked,
                    "the module has no symbol versions".to_string(),
                )),
                (_, false, _) => Some((
                    CheckStatus::NotChecked,
                    "the target's CRCs are not known (give its Module.symvers, or a vmlinux with .symtab)".to_string(),
                )),
                (None, true, _) => Some((
                    CheckStatus::NotChecked,
                    "whether the target uses CONFIG_MODVERSIONS is not known".to_string(),
                )),
                (Some(true), true, _) => Some((
                    if mismatched > 0 {
                        CheckStatus::Failed
                    } else {
                        CheckStatus::Passed
                    },
                    format!(
                        "{compared} CRC(s) compared, {mismatched} disagree, {unversioned} not listed by the module ({})",
                        self.t
                            .loader
                            .exports
                            .as_ref()
                            .map_or(String::new(), |f| f.source.clone())
                    ),
                )),
            };
            match detail {
                None => self.loader_check(
                    LoaderCheckKind::SymbolVersions,
                    CheckStatus::NotApplicable,
                    "the target has no CONFIG_MODVERSIONS".into(),
                ),
                Some((st, d)) => self.loader_check(LoaderCheckKind::SymbolVersions, st, d),
            }
            let (st, d) = match self.t.exported {
                None => (
                    CheckStatus::NotChecked,
                    "the target's exports are not known (its table has no __ksymtab_* symbols): only .klp.sym.* names are checked".to_string(),
                ),
                Some(_) if unknown > 0 => (
                    CheckStatus::Failed,
                    format!("{unknown} symbol(s) the target does not export"),
                ),
                Some(_) => (
                    CheckStatus::Passed,
                    "every undefined symbol is exported by the target (vmlinux or a loaded module)"
                        .to_string(),
                ),
            };
            self.loader_check(LoaderCheckKind::UnresolvedSymbols, st, d);
        }
        if any {
            self.fail(&stage);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::same_magic;

    #[test]
    fn same_magic_skips_the_release_only_with_crcs() {
        let k = "6.1.0-57-amd64 SMP preempt mod_unload modversions ";
        let other_release = "6.1.0-58-amd64 SMP preempt mod_unload modversions ";
        let other_config = "6.1.0-57-amd64 SMP mod_unload modversions ";
        assert!(same_magic(k, k, true));
        assert!(same_magic(other_release, k, true));
        assert!(!same_magic(other_release, k, false));
        assert!(!same_magic(other_config, k, true));
        assert!(!same_magic("6.1.0", "6.1.0 SMP ", true));
    }
}
