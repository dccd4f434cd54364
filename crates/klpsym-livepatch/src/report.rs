//! What `check` reports: stable, documented, serializable.
//!
//! JSON field names are part of the CLI's contract (see docs/cli.md and docs/json.md); add fields, never rename.

use serde::{Deserialize, Serialize};

use klpsym_core::resched::{Cancelled, Resched};

use klpsym_core::bulk::free_with_points;
pub use klpsym_core::Candidate;

/// When the kernel hits a problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    /// `load_module()` of the patch module: modinfo, symbols, relocations (since 5.8 the
    /// vmlinux klp relocations too). The load fails.
    ModuleLoad,
    /// The patch module's init: `klp_enable_patch()` (tables, loaded objects, functions). The
    /// load fails.
    PatchEnable,
    /// Later, when `module` loads (`klp_module_coming()`): the kernel refuses that module.
    ModuleComing {
        /// The module being loaded.
        module: String,
    },
}

impl Stage {
    /// Every stage's name (JSON `stage`, Python's `Stage` constants), in declaration order.
    pub const NAMES: &'static [&'static str] = &["module_load", "patch_enable", "module_coming"];

    /// Its name (JSON `stage`).
    pub fn name(&self) -> &'static str {
        match self {
            Stage::ModuleLoad => "module_load",
            Stage::PatchEnable => "patch_enable",
            Stage::ModuleComing { .. } => "module_coming",
        }
    }
}

/// What went wrong (stable identifiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The target has no module support (CONFIG_MODULES off): `finit_module(2)` fails with
    /// -ENOSYS and the kernel logs nothing.
    ModulesUnsupported,
    /// The ELF header is not one the target's module loader takes: not a relocatable object,
    /// or built for another architecture (`Invalid architecture in ELF header: %u`;
    /// 5.10: `Module has invalid ELF structures`): -ENOEXEC, before anything else is read.
    ElfHeader,
    /// The module's `.gnu.linkonce.this_module` is not one the loader takes (6.4+): most
    /// often `module %s: .gnu.linkonce.this_module section size must match the kernel's built
    /// struct module size at run time` — the module was built against the headers of another
    /// configuration; also a missing or duplicated section, SHT_NOBITS, not SHF_ALLOC:
    /// -ENOEXEC, before symbol versions and vermagic.
    ThisModule,
    /// `%s: version magic '%s' should be '%s'` (the module loader, `check_modinfo()`).
    VermagicMismatch,
    /// `%s: disagrees about version of symbol %s` (`check_version()`): for `module_layout`
    /// the load fails at once, for an imported symbol it is then unknown (err -22).
    SymbolVersionMismatch,
    /// `%s: module is marked as livepatch module, but livepatch support is disabled`.
    LivepatchDisabled,
    /// The module has no vermagic, or no symbol versions on a CONFIG_MODVERSIONS kernel, and
    /// the kernel cannot force-load it (CONFIG_MODULE_FORCE_LOAD off): -ENOEXEC.
    ForceLoadRequired,
    /// An unsigned module on a kernel that enforces signatures:
    /// `Loading of unsigned module is rejected`.
    UnsignedModule,
    /// `livepatch: module %s is not marked as a livepatch module`.
    NotLivepatchModule,
    /// `%s: Unknown symbol %s (err -2)`.
    UnknownSymbol,
    /// `%s: please compile with -fno-common`.
    CommonSymbol,
    /// `section %s has an incorrectly formatted name`.
    BadSectionName,
    /// `symbol %s is not marked as a livepatch symbol`.
    NotLivepatchSymbol,
    /// `symbol %s has an incorrectly formatted name`.
    BadSymbolName,
    /// `invalid access to vmlinux symbol '%s' from module-specific livepatch relocation section`.
    VmlinuxSymbolInModuleSection,
    /// `symbol '%s' not found in symbol table`.
    SymbolNotFound,
    /// `unresolvable ambiguity for symbol '%s' in object '%s'`.
    Ambiguous,
    /// `symbol position %lu for symbol '%s' in object '%s' not found`.
    PositionNotFound,
    /// An arch overflow message.
    RelocationOverflow,
    /// `x86/modules: Invalid relocation target, existing value is nonzero ...`.
    RelocationTargetNonzero,
    /// An unknown/unsupported relocation type.
    RelocationType,
    /// A klp_patch/klp_object/klp_func table the kernel rejects without a message
    /// (NULL `objs`/`funcs`/`old_name`/`new_func`, names too long).
    InvalidPatchTable,
    /// Two functions (or objects) with the same sysfs name: kobject_add fails with -EEXIST.
    DuplicateSysfsName,
    /// A replaced function without an ftrace call site (`klp_patch_func()`): `failed to find
    /// location for function '%s'` (5.18+) or `failed to set ftrace filter for function '%s'
    /// (-22)` (before), then `failed to patch object` and `failed to enable patch`: -EINVAL.
    NoFtraceLocation,
}

impl ProblemKind {
    /// True for the module loader's refusals before `apply_relocations()`: the kernel makes
    /// no livepatch lookup after one of these.
    pub fn refuses_before_lookups(self) -> bool {
        matches!(
            self,
            ProblemKind::ModulesUnsupported
                | ProblemKind::ElfHeader
                | ProblemKind::ThisModule
                | ProblemKind::VermagicMismatch
                | ProblemKind::SymbolVersionMismatch
                | ProblemKind::LivepatchDisabled
                | ProblemKind::ForceLoadRequired
                | ProblemKind::UnsignedModule
                | ProblemKind::UnknownSymbol
                | ProblemKind::CommonSymbol
        )
    }
}

/// One problem, with the kernel's exact log lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Stable identifier.
    pub kind: ProblemKind,
    /// When the kernel meets it.
    #[serde(flatten)]
    pub stage: Stage,
    /// The kernel's lines, prefix included (`livepatch: `), in order; empty when the kernel
    /// fails silently.
    pub log: Vec<String>,
    /// The errno the operation fails with (positive: 22 = EINVAL).
    pub errno: i32,
    /// Its name (`EINVAL`).
    pub errno_name: &'static str,
    /// False when the kernel stops at an earlier problem of the same stage first (listed so
    /// the author can fix everything at once).
    pub reached: bool,
    /// The symbol concerned.
    pub symbol: Option<String>,
    /// The section concerned.
    pub section: Option<String>,
    /// The object concerned (`vmlinux` or a module).
    pub object: Option<String>,
    /// What to do about it.
    pub hint: String,
    /// For ambiguity and bad positions: every definition, with its position.
    #[serde(serialize_with = "klpsym_core::serialize_problem_candidates")]
    pub candidates: Vec<Candidate>,
}

/// The overall outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PatchVerdictKind {
    /// The kernel loads and enables the patch, and everything that decides that was checked:
    /// deferred objects against their modules, the module loader's facts, and (by the caller
    /// that knows the built-for kernel) every binding.
    Accepted,
    /// The kernel loads and enables the patch as far as checked, but something that decides
    /// the load was not checked (a deferred object without its module, a loader fact
    /// unknown, bindings nothing proves): the caller lists what.
    Unverified,
    /// The kernel loads and enables the patch, and some symbol binds another definition than
    /// on the kernel the patch was built for: it patches or refers to other code, silently.
    BindsAnotherDefinition,
    /// The kernel loads and enables the patch, and some copy of a function it replaces keeps
    /// running the old code: inlined into a function the patch does not replace, or a clone
    /// of it the patch does not replace (by the caller that reads the kernel's DWARF).
    PartialCoverage,
    /// insmod fails.
    RefusedAtLoad,
    /// The patch loads, but the kernel will refuse to load some module later.
    RefusedWhenModuleLoads,
    /// Not a livepatch (no livepatch tag, klp relocations, klp_patch or klp_enable_patch
    /// call): the kernel loads it as an ordinary module (the module loader's checks passed).
    OrdinaryModule,
}

/// One line the kernel logs, with the load that prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// When: loading the patch module (`module_load`, `patch_enable`) or a module coming.
    #[serde(flatten)]
    pub stage: Stage,
    /// The line, as dmesg shows it.
    pub line: String,
}

/// The verdict with its context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatchVerdict {
    /// The outcome.
    pub kind: PatchVerdictKind,
    /// errno of the failing load (RefusedAtLoad).
    pub errno: Option<i32>,
    /// Modules the kernel would refuse to load (RefusedWhenModuleLoads).
    pub refused_modules: Vec<String>,
    /// Deferred objects that could not be checked (no `.ko` given).
    pub unchecked_modules: Vec<String>,
}

impl PatchVerdict {
    /// The verdict of a list of problems (kernel order) and object states.
    pub fn of(problems: &[Problem], objects: &[ObjectReport]) -> PatchVerdict {
        Self::of_with(problems, objects, &mut Resched::none())
            .expect("a Resched without a cancel flag or callback never cancels")
    }

    /// [`of`](PatchVerdict::of) with a tick per problem and object.
    pub fn of_with(
        problems: &[Problem],
        objects: &[ObjectReport],
        resched: &mut Resched,
    ) -> Result<PatchVerdict, Cancelled> {
        Self::of_module(problems, objects, false, resched)
    }

    /// [`of_with`](PatchVerdict::of_with) for a module that may be an ordinary one.
    pub fn of_module(
        problems: &[Problem],
        objects: &[ObjectReport],
        ordinary: bool,
        resched: &mut Resched,
    ) -> Result<PatchVerdict, Cancelled> {
        let mut first_fatal = None;
        let mut refused: Vec<String> = Vec::new();
        for p in problems {
            resched.tick()?;
            if !p.reached {
                continue;
            }
            match &p.stage {
                Stage::ModuleLoad | Stage::PatchEnable => {
                    first_fatal = first_fatal.or(Some(p));
                }
                Stage::ModuleComing { module } => {
                    if refused.last() != Some(module) {
                        refused.push(module.clone());
                    }
                }
            }
        }
        let mut unchecked: Vec<String> = Vec::new();
        for o in objects {
            resched.tick()?;
            if o.state == ObjectState::DeferredUnchecked {
                unchecked.push(o.name.clone());
            }
        }
        Ok(match first_fatal {
            Some(p) => PatchVerdict {
                kind: PatchVerdictKind::RefusedAtLoad,
                errno: Some(p.errno),
                refused_modules: vec![],
                unchecked_modules: unchecked,
            },
            None if !refused.is_empty() => PatchVerdict {
                kind: PatchVerdictKind::RefusedWhenModuleLoads,
                errno: None,
                refused_modules: refused,
                unchecked_modules: unchecked,
            },
            None => PatchVerdict {
                kind: if ordinary {
                    PatchVerdictKind::OrdinaryModule
                } else if !unchecked.is_empty() {
                    // What happens when those modules load was not checked.
                    PatchVerdictKind::Unverified
                } else {
                    PatchVerdictKind::Accepted
                },
                errno: None,
                refused_modules: vec![],
                unchecked_modules: unchecked,
            },
        })
    }
}

/// How an object of the patch stands on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    /// vmlinux or a loaded module: patched at enable time.
    Loaded,
    /// Not loaded; checked against its `.ko` (applied when it loads).
    DeferredChecked,
    /// Not loaded and no `.ko` given.
    DeferredUnchecked,
}

/// One klp_func.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FuncReport {
    /// `old_name`.
    pub old_name: Option<String>,
    /// `old_sympos`.
    pub old_sympos: u64,
    /// The lookup verdict (None when not looked up).
    pub verdict: Option<klpsym_core::LookupVerdict>,
    /// The address the kernel would patch (offline layout for deferred objects).
    #[serde(serialize_with = "hex_opt")]
    pub address: Option<u64>,
    /// The replacement function's symbol in the patch module.
    pub new_func: Option<String>,
}

/// One klp_object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectReport {
    /// `vmlinux` or the module name.
    pub name: String,
    /// Where it stands.
    pub state: ObjectState,
    /// Its functions.
    pub funcs: Vec<FuncReport>,
}

/// A relocation's `unplaced` in JSON, with `offline`, its older name, beside it.
fn unplaced_and_its_old_name<S: serde::Serializer>(v: &bool, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("unplaced", v)?;
    m.serialize_entry("offline", v)?;
    m.end()
}

/// One klp relocation (`--explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelocationReport {
    /// The klp relocation section.
    pub section: String,
    /// Index of the entry in its section.
    pub index: usize,
    /// The patched section's name.
    pub target_section: String,
    /// `r_offset`.
    pub offset: u64,
    /// Relocation type number.
    pub r_type: u32,
    /// Its name.
    pub type_name: String,
    /// The symbol's name as written in the module.
    pub symbol: String,
    /// The resolved address (S); `None` when unresolved or hidden.
    #[serde(serialize_with = "hex_opt")]
    pub resolved: Option<u64>,
    /// True when S is an unplaced module symbol (an offset in its section, from the module's
    /// own `.ko`), not a load address. JSON `unplaced`, and `offline`, its older name, beside
    /// it (deprecated: schema 2 is the last to write it).
    #[serde(flatten, serialize_with = "unplaced_and_its_old_name")]
    pub unplaced: bool,
    /// `r_addend`.
    pub addend: i64,
    /// `S + A`, `S + A - P`...
    pub expression: String,
    /// The value computed, when known.
    #[serde(serialize_with = "hex_opt")]
    pub value: Option<u64>,
    /// The bytes written, in memory order, when known (JSON: lowercase hex, `"00002081"`).
    #[serde(serialize_with = "klpsym_core::hex_serde::bytes_opt")]
    pub bytes: Option<Vec<u8>>,
    /// What the kernel does with it.
    pub status: RelocationStatus,
    /// A remark.
    pub note: Option<String>,
}

/// What the kernel does with one relocation ([`RelocationReport::status`]): a typed name, so
/// that a program asks `status == RelocationStatus::Applied` (it still compares equal to its
/// JSON name: `status == "applied"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RelocationStatus {
    /// The architecture's code applies it (`value` and `bytes` may still be unknown: a
    /// PC-relative value needs the place's address).
    Applied,
    /// Whether the architecture's code accepts it depends on where the loader places the
    /// module: a PC-relative field that fits some places of the module area and overflows at
    /// others.
    NeedsPlacement,
    /// The architecture's code refuses it (the problem is in `problems`).
    Failed,
    /// The kernel stops at an earlier failure first (or, for a klp relocation, its symbol was
    /// not resolved).
    NotReached,
    /// A NONE relocation (`R_X86_64_NONE`, `R_AARCH64_NONE`): nothing is written.
    None,
}

impl RelocationStatus {
    /// Its name in JSON and in the readable report (`applied`, `needs_placement`...).
    pub fn as_str(self) -> &'static str {
        match self {
            RelocationStatus::Applied => "applied",
            RelocationStatus::NeedsPlacement => "needs_placement",
            RelocationStatus::Failed => "failed",
            RelocationStatus::NotReached => "not_reached",
            RelocationStatus::None => "none",
        }
    }
}

impl std::fmt::Display for RelocationStatus {
    /// Its name, padded as a `{:<16}` asks.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for RelocationStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for RelocationStatus {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// What the `relocations` loader check's detail says of values that depend on where the loader
/// places the patch module's sections: the sections' load addresses decide them (a caller that
/// takes them, as `klpsym check` does with its options, may say how after it).
pub const PLACEMENT_HINT: &str = "exact once the sections' load addresses are given";

/// How one of the module loader's checks went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Ran and passed.
    Passed,
    /// Ran and failed (the problem is in `problems`).
    Failed,
    /// Could not run: what the target does here is not known (`detail` says what is missing).
    NotChecked,
    /// Does not apply (e.g. symbol versions on a kernel without CONFIG_MODVERSIONS).
    NotApplicable,
    /// The kernel stops at an earlier failure first.
    NotReached,
}

/// Which of the module loader's checks a [`LoaderCheck`] is, in the kernel's order: a typed
/// name, so that a program asks `check == LoaderCheckKind::Signature` instead of comparing
/// strings (it still compares equal to its JSON name: `check == "signature"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LoaderCheckKind {
    /// CONFIG_MODULES: whether there is a module loader at all.
    ModuleSupport,
    /// `module_sig_check()`: the signature policy (CONFIG_MODULE_SIG_FORCE) and a signed
    /// module's signature.
    Signature,
    /// `elf_validity_check()`: the ELF header (class, machine, ET_REL).
    ElfHeader,
    /// Since 6.4: `.gnu.linkonce.this_module` against `sizeof(struct module)`.
    ThisModule,
    /// `check_modstruct_version()`: `module_layout`'s CRC.
    ModuleLayout,
    /// `same_magic()`: the vermagic.
    Vermagic,
    /// The livepatch modinfo tag on a kernel without CONFIG_LIVEPATCH.
    LivepatchSupport,
    /// `check_version()` of every imported symbol: its CRC.
    SymbolVersions,
    /// `simplify_symbols()`: every undefined symbol exported by the target.
    UnresolvedSymbols,
    /// `apply_relocations()`: the module's ordinary relocations.
    Relocations,
}

impl LoaderCheckKind {
    /// Every check, in the kernel's order.
    pub const ALL: [LoaderCheckKind; 10] = [
        LoaderCheckKind::ModuleSupport,
        LoaderCheckKind::Signature,
        LoaderCheckKind::ElfHeader,
        LoaderCheckKind::ThisModule,
        LoaderCheckKind::ModuleLayout,
        LoaderCheckKind::Vermagic,
        LoaderCheckKind::LivepatchSupport,
        LoaderCheckKind::SymbolVersions,
        LoaderCheckKind::UnresolvedSymbols,
        LoaderCheckKind::Relocations,
    ];

    /// Its name in JSON and in the readable report (`signature`, `module_layout`...).
    pub fn as_str(self) -> &'static str {
        match self {
            LoaderCheckKind::ModuleSupport => "module_support",
            LoaderCheckKind::Signature => "signature",
            LoaderCheckKind::ElfHeader => "elf_header",
            LoaderCheckKind::ThisModule => "this_module",
            LoaderCheckKind::ModuleLayout => "module_layout",
            LoaderCheckKind::Vermagic => "vermagic",
            LoaderCheckKind::LivepatchSupport => "livepatch_support",
            LoaderCheckKind::SymbolVersions => "symbol_versions",
            LoaderCheckKind::UnresolvedSymbols => "unresolved_symbols",
            LoaderCheckKind::Relocations => "relocations",
        }
    }
}

impl std::fmt::Display for LoaderCheckKind {
    /// Its name, padded as a `{:<20}` asks.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for LoaderCheckKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for LoaderCheckKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// One of the module loader's checks (`load_module()`), in the kernel's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoaderCheck {
    /// Which check: `module_support`, `signature`, `elf_header`, `this_module`,
    /// `module_layout`, `vermagic`, `livepatch_support`, `symbol_versions`,
    /// `unresolved_symbols`, `relocations`.
    pub check: LoaderCheckKind,
    /// How it went.
    pub status: CheckStatus,
    /// What was compared, and with what (or what is missing).
    pub detail: String,
}

/// Everything `check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The patch module's name.
    pub module: String,
    /// Its architecture.
    pub arch: crate::Arch,
    /// The target kernel version the rules were taken from.
    pub kernel_version: String,
    /// The target's KSYM_NAME_LEN.
    pub ksym_name_len: usize,
    /// Where the struct layouts came from.
    pub layouts_source: String,
    /// The verdict.
    pub verdict: PatchVerdict,
    /// What the kernel logs, in order, as far as it gets: the error lines of the problems it
    /// reaches and, on success, `livepatch: enabling patch '%s'`, the transition lines, and
    /// `applying patch '%s' to loading module '%s'` when a deferred module loads.
    pub kernel_log: Vec<LogLine>,
    /// The module loader's checks, in the kernel's order: which ran, which could not.
    pub loader_checks: Vec<LoaderCheck>,
    /// Every problem, in the order the kernel meets them.
    pub problems: Vec<Problem>,
    /// The patch's objects (empty when the patch description could not be read).
    pub objects: Vec<ObjectReport>,
    /// Every klp relocation.
    pub relocations: Vec<RelocationReport>,
    /// Every ordinary relocation the module loader applies (`apply_relocate_add()`), in
    /// section order: what the module's code and data hold after the load.
    pub ordinary_relocations: Vec<RelocationReport>,
    /// Warnings that do not change the verdict (suspicious names, guesses).
    pub warnings: Vec<String>,
}

impl CheckReport {
    /// Frees the report with reschedule points between the steps: a report on a big patch
    /// holds several strings per relocation (tens of thousands of heap blocks).
    pub fn drop_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        let CheckReport {
            problems,
            objects,
            relocations,
            ordinary_relocations,
            warnings,
            kernel_log,
            ..
        } = self;
        free_with_points(relocations, resched)?;
        free_with_points(ordinary_relocations, resched)?;
        free_with_points(problems, resched)?;
        free_with_points(kernel_log, resched)?;
        for o in objects {
            free_with_points(o.funcs, resched)?;
        }
        free_with_points(warnings, resched)
    }
}

pub(crate) use klpsym_core::hex_serde::addr_opt as hex_opt;

/// The name of a (positive) errno value.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        2 => "ENOENT",
        8 => "ENOEXEC",
        17 => "EEXIST",
        22 => "EINVAL",
        38 => "ENOSYS",
        129 => "EKEYREJECTED",
        _ => "E?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: RelocationStatus, bytes: Option<Vec<u8>>) -> RelocationReport {
        RelocationReport {
            section: ".klp.rela.vmlinux..text".into(),
            index: 0,
            target_section: ".text".into(),
            offset: 0x10,
            r_type: 2,
            type_name: "R_X86_64_PC32".into(),
            symbol: ".klp.sym.vmlinux.f,1".into(),
            resolved: Some(0xffff_ffff_8100_0000),
            unplaced: false,
            addend: -4,
            expression: "S + A - P".into(),
            value: Some(0x8120),
            bytes,
            status,
            note: None,
        }
    }

    /// The JSON row keeps today's shape: bytes as one lowercase hex string in memory order,
    /// the status by its name.
    #[test]
    fn relocation_json_keeps_bytes_as_hex_and_status_as_its_name() {
        let j = serde_json::to_string(&report(
            RelocationStatus::NeedsPlacement,
            Some(vec![0, 0, 0x20, 0x81]),
        ))
        .unwrap();
        assert!(
            j.ends_with(r#""value":"0x0000000000008120","bytes":"00002081","status":"needs_placement","note":null}"#),
            "{j}"
        );
        assert!(j.contains(r#""unplaced":false,"offline":false"#), "{j}");
        let j = serde_json::to_value(report(RelocationStatus::None, None)).unwrap();
        assert_eq!(j["bytes"], serde_json::Value::Null);
        assert_eq!(j["status"], "none");
    }

    /// `as_str` (the readable report) is the JSON name of every status, and a name reads back
    /// as its status.
    #[test]
    fn relocation_status_names_are_its_json_names() {
        let all = [
            RelocationStatus::Applied,
            RelocationStatus::NeedsPlacement,
            RelocationStatus::Failed,
            RelocationStatus::NotReached,
            RelocationStatus::None,
        ];
        for s in all {
            // A new status stops this match compiling until it is listed above.
            match s {
                RelocationStatus::Applied
                | RelocationStatus::NeedsPlacement
                | RelocationStatus::Failed
                | RelocationStatus::NotReached
                | RelocationStatus::None => {}
            }
            let j = serde_json::to_value(s).unwrap();
            assert_eq!(j, s.as_str());
            assert_eq!(serde_json::from_value::<RelocationStatus>(j).unwrap(), s);
            assert_eq!(s, s.as_str());
            assert_eq!(format!("{s:<16}|").len(), 17);
        }
        let names: std::collections::HashSet<_> = all.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), all.len());
    }

    /// Every loader check's `as_str` is its JSON name.
    #[test]
    fn loader_check_names_are_their_json_names() {
        for c in LoaderCheckKind::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn stage_names_are_every_variant_s_json_tag() {
        let every = [
            Stage::ModuleLoad,
            Stage::PatchEnable,
            Stage::ModuleComing { module: "m".into() },
        ];
        let names: Vec<&str> = every
            .iter()
            .map(|s| {
                let tag = serde_json::to_value(s).unwrap()["stage"].clone();
                assert_eq!(tag, s.name());
                s.name()
            })
            .collect();
        assert_eq!(names, Stage::NAMES);
    }
}
