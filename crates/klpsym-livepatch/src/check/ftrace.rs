//! `__klp_enable_patch()` -> `klp_patch_object()` -> `klp_patch_func()`: once every object of
//! the patch is initialized, each function of each loaded object gets an ftrace handler at its
//! ftrace location. A function without one (declared `notrace` or `noinstr`, an out-of-line
//! copy of an `inline` function, code of a file built without CC_FLAGS_FTRACE such as
//! kernel/trace/) fails the enable: the module's init returns -EINVAL and the kernel unpatches
//! what it had patched.
//!
//! The location, by version (kernel/livepatch/patch.c `klp_patch_func()`,
//! kernel/trace/ftrace.c `ftrace_location()`):
//! - before 5.18: `klp_get_ftrace_location()` is the function's address itself on x86; the
//!   failure comes from `ftrace_set_filter_ip()`, which accepts only what `ftrace_location()`
//!   finds (`ftrace_match_addr()`): `failed to set ftrace filter for function '%s' (-22)`.
//!   `ftrace_location()` is an address inside a recorded call, or, from 5.10.227 and
//!   5.15.162 (the stable trees' backport of the 5.18 search below), also a symbol's start
//!   with a call before the next symbol.
//! - 5.18+ (aebfd12521d9, "x86/ibt,ftrace: Search for __fentry__ location"; absent in
//!   5.17-rc5, present in 5.19; stable 5.15.162 and 5.10.227 took the search, not the
//!   message, see `KernelRules::ftrace_location_searches`): `ftrace_location()` takes an
//!   address inside a recorded call, or a symbol's start with a call anywhere up to the next
//!   kallsyms symbol (the `call __fentry__` sits after `endbr64` with IBT): `failed to find
//!   location for function '%s'`.
//!
//! Records of `.init.text` are freed after boot (`ftrace_free_init_mem()`). A module's call
//! sites are its own `__mcount_loc`, relocated when it loads (`ftrace_module_init()`): they
//! are read from its `.ko` ([`crate::ModuleFtrace`]), for a module loaded at enable time and
//! for one that loads later (`klp_module_coming()` refuses that module: `failed to apply
//! patch '%s' to module '%s' (-22)`); without its `.ko` a warning says they were not checked.

use std::collections::HashSet;

use super::{Ctx, EINVAL};
use crate::elf::Arch;
use crate::report::*;
use klpsym_core::resched::Cancelled;
use klpsym_core::{ObjectId, SymbolizeOutcome, SIZE_UNKNOWN};

/// `MCOUNT_INSN_SIZE` on x86: the 5-byte `call __fentry__` (a 5-byte NOP at rest).
const MCOUNT_INSN_SIZE: u64 = 5;

impl Ctx<'_, '_, '_, '_> {
    /// `__klp_enable_patch()`'s `klp_patch_object()` for each loaded object, in the patch's
    /// order, and `klp_patch_func()` for each of its functions, as far as the call sites are
    /// known: vmlinux's from its `__mcount_loc`, a module's from its `.ko`'s.
    pub(super) fn patch_functions(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        if m.is_ordinary_module() || self.blocked(&Stage::PatchEnable) {
            return Ok(());
        }
        let Ok(patch) = &m.patch else { return Ok(()) };
        let mut patched = HashSet::new();
        for (i, o) in patch.objects.iter().enumerate() {
            self.r.tick()?;
            let Some(report) = self.objects.get(i) else {
                continue;
            };
            if report.state != ObjectState::Loaded {
                continue;
            }
            let object = report.name.clone();
            let funcs = found_funcs(report);
            // Found by name, but a call site is found by address: a target that hides its
            // addresses (a kallsyms read without the right to see them) cannot say.
            let unplaced = report
                .funcs
                .iter()
                .filter(|f| {
                    matches!(f.verdict, Some(klpsym_core::LookupVerdict::Found))
                        && f.address.is_none()
                })
                .count();
            if unplaced > 0 {
                self.warn_once(format!(
                    "object {object}: whether {unplaced} replaced function(s) found by name have an ftrace call site is not checked: the target hides its addresses (kptr_restrict: a kallsyms read without the right to see them), and a call site is found by address; the kernel refuses the patch at enable when one has none (notrace)"
                ));
            }
            let failed = if object == "vmlinux" {
                self.vmlinux_without_site(&funcs, &mut patched)?
            } else {
                self.module_without_site(&object, &funcs, o.funcs.is_empty())?
            };
            if let Some((name, a)) = failed {
                let log = self.no_location_lines(&name, &object, None);
                self.no_location(&name, a, &object, &Stage::PatchEnable, log);
                // __klp_enable_patch() stops at the first object that fails.
                break;
            }
        }
        Ok(())
    }

    /// `klp_module_coming()` of a deferred object, once its symbols and relocations are
    /// initialized: `klp_patch_object()` of the loading module's functions.
    pub(super) fn coming_functions(&mut self, i: usize, module: &str) -> Result<(), Cancelled> {
        let Some(report) = self.objects.get(i) else {
            return Ok(());
        };
        let funcs = found_funcs(report);
        let empty = funcs.is_empty();
        if let Some((name, a)) = self.module_without_site(module, &funcs, empty)? {
            let stage = Stage::ModuleComing {
                module: module.to_string(),
            };
            let log = self.no_location_lines(&name, module, Some(module));
            self.no_location(&name, a, module, &stage, log);
        }
        Ok(())
    }

    /// The kernel's lines for a function without a location: at enable, then the object's and
    /// the patch's failure; when a module loads, `klp_module_coming()`'s notice (printed once
    /// the object is initialized, before `klp_patch_object()`), then its failure's two lines.
    fn no_location_lines(&self, name: &str, object: &str, coming: Option<&str>) -> Vec<String> {
        let pname = &self.m.name;
        // The message is livepatch's own: 5.18 changed it with the search (the stable trees'
        // backport of the search changed only ftrace.c: Debian's 5.10.262 still prints the
        // filter line, lab case notrace).
        let first = if self.t.rules.version < (5, 18) {
            format!("livepatch: failed to set ftrace filter for function '{name}' (-{EINVAL})")
        } else {
            format!("livepatch: failed to find location for function '{name}'")
        };
        match coming {
            None => vec![
                first,
                format!("livepatch: failed to patch object '{object}'"),
                format!("livepatch: failed to enable patch '{pname}'"),
            ],
            Some(m) => vec![
                format!("livepatch: applying patch '{pname}' to loading module '{m}'"),
                first,
                format!("livepatch: failed to apply patch '{pname}' to module '{m}' (-{EINVAL})"),
                format!("livepatch: patch '{pname}' failed for module '{m}', refusing to load module '{m}'"),
            ],
        }
    }

    /// Records the problem of `name` (at `a`) without an ftrace location.
    fn no_location(&mut self, name: &str, a: u64, object: &str, stage: &Stage, log: Vec<String>) {
        self.problem(
            ProblemKind::NoFtraceLocation,
            stage,
            log,
            EINVAL,
            Some(name),
            None,
            Some(object),
            format!(
                "{name} at {a:#x} in {object} has no ftrace call site (no __mcount_loc entry from its start to the next symbol): it was built without the `call __fentry__` (notrace or noinstr, an inline copy, a file built without CC_FLAGS_FTRACE), so livepatch cannot redirect it; patch its callers instead"
            ),
        );
        self.fail(stage);
    }

    /// The first of vmlinux's `funcs` without an ftrace location, when the sites are known.
    fn vmlinux_without_site(
        &mut self,
        funcs: &[(String, u64, u64)],
        patched: &mut HashSet<u64>,
    ) -> Result<Option<(String, u64)>, Cancelled> {
        if funcs.is_empty() {
            return Ok(None);
        }
        let Some(sites) = self.t.ftrace.clone() else {
            let why = if self.t.arch != Arch::X86_64 {
                "the call sites of this architecture are not modelled".to_string()
            } else {
                "the target gives no __mcount_loc table (a vmlinux or kernel image has it; /proc/kallsyms does not)".to_string()
            };
            self.warn_once(format!(
                "whether each replaced vmlinux function has an ftrace call site is not checked ({why}): the kernel refuses the patch at enable when one has none (notrace)"
            ));
            return Ok(None);
        };
        let sites = sites.value;
        let init = self.init_text();
        for (name, a, _) in funcs {
            self.r.tick()?;
            // klp_find_ops(): a function patched already (by this patch, at the same address)
            // shares its ftrace ops; no location is looked up.
            if !patched.insert(*a) {
                continue;
            }
            match self.ftrace_location(*a, sites, init)? {
                Some(true) => continue,
                Some(false) => return Ok(Some((name.clone(), *a))),
                None => {
                    // The extent the kernel searches is unknown here: say so, never guess.
                    self.warn_once(format!(
                        "{name} at {a:#x}: no ftrace call site at its address, and its extent up to the next symbol is unknown: whether the kernel finds a location for it is not checked"
                    ));
                }
            }
        }
        Ok(None)
    }

    /// The first of module `object`'s `funcs` without an ftrace location, from the call sites
    /// its `.ko` gives (`sympos`: the position each was found at); a warning when they are not
    /// known (`none`: the object replaces no function, so nothing to say).
    fn module_without_site(
        &mut self,
        object: &str,
        funcs: &[(String, u64, u64)],
        none: bool,
    ) -> Result<Option<(String, u64)>, Cancelled> {
        if none || funcs.is_empty() {
            return Ok(None);
        }
        let Some(facts) = self.t.module_ftrace.get(object).copied() else {
            self.warn_once(format!(
                "object {object}: whether its replaced functions have an ftrace call site is not checked (its call sites are in its own __mcount_loc, and no {object}.ko was given): the kernel refuses the patch, or {object}'s load, when one has none (notrace)"
            ));
            return Ok(None);
        };
        let newer = self.t.rules.ftrace_location_searches();
        for (name, a, position) in funcs {
            self.r.tick()?;
            // The position-th definition of the name in the module's kallsyms order.
            let at = facts
                .names
                .iter()
                .enumerate()
                .filter(|(_, n)| *n == name)
                .nth(position.saturating_sub(1) as usize)
                .and_then(|(k, _)| facts.sites.get(k));
            let Some(f) = at else { continue };
            if !(f.at_start || (newer && f.within)) {
                return Ok(Some((name.clone(), *a)));
            }
        }
        Ok(None)
    }

    /// vmlinux's init memory, whose ftrace records are freed after boot: `ftrace_free_init_mem()`
    /// frees those between `__init_begin` and `__init_end` (init and exit text alike; the
    /// bounds are in [`Self::ftrace_location`]); `_sinittext` and `_einittext` when those are
    /// not listed.
    fn init_text(&self) -> Option<(u64, u64)> {
        let at = |n: &str| {
            self.t
                .kernel
                .by_name(n)
                .find(|s| s.object == ObjectId::VMLINUX)
                .map(|s| s.addr)
        };
        at("__init_begin")
            .zip(at("__init_end"))
            .or_else(|| at("_sinittext").zip(at("_einittext")))
    }

    /// Whether `ftrace_location(a)` of this target's version is nonzero: a live call site
    /// covers `a` (`site <= a < site + MCOUNT_INSN_SIZE`), or (5.18+) one starts between `a`,
    /// a symbol's start, and the next kallsyms symbol. `None` when that extent is unknown.
    fn ftrace_location(
        &mut self,
        a: u64,
        sites: &[u64],
        init: Option<(u64, u64)>,
    ) -> Result<Option<bool>, Cancelled> {
        // ftrace_free_mem(NULL, __init_begin, __init_end) removes every record that
        // ftrace_cmp_recs() matches with the key [start, end], whose end is inclusive: a call
        // overlapping the start (`rec + MCOUNT_INSN_SIZE > start`) or beginning at the end.
        let live =
            |r: u64| init.is_none_or(|(s, e)| !(r.saturating_add(MCOUNT_INSN_SIZE) > s && r <= e));
        // The sites from `lo` to `hi` (inclusive), sorted.
        let any_live = |lo: u64, hi: u64| {
            let from = sites.partition_point(|&r| r < lo);
            sites[from..]
                .iter()
                .take_while(|&&r| r <= hi)
                .any(|&r| live(r))
        };
        if any_live(a.saturating_sub(MCOUNT_INSN_SIZE - 1), a) {
            return Ok(Some(true));
        }
        if !self.t.rules.ftrace_location_searches() {
            return Ok(Some(false));
        }
        // kallsyms_lookup_size_offset(): the extent up to the next higher address (the
        // kernel bounds the last symbol by _etext or _end, which the table may not know).
        self.t.kernel.build_indexes(self.r)?;
        let end = match self.t.kernel.symbolize(a) {
            SymbolizeOutcome::Found(s) if s.offset == 0 && s.size != SIZE_UNKNOWN && s.size > 0 => {
                a.checked_add(s.size - 1)
            }
            _ => None,
        };
        Ok(end.map(|end| any_live(a, end)))
    }
}

/// The functions a report's object found, in its order: (name, address, position).
fn found_funcs(report: &ObjectReport) -> Vec<(String, u64, u64)> {
    report
        .funcs
        .iter()
        .filter_map(|f| match (f.verdict, f.address) {
            (Some(klpsym_core::LookupVerdict::Found), Some(a)) => Some((
                f.old_name.clone().unwrap_or_default(),
                a,
                f.old_sympos.max(1),
            )),
            _ => None,
        })
        .collect()
}
