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
//!   failure comes from `ftrace_set_filter_ip()`, which accepts only an address inside a
//!   recorded call (`ftrace_match_addr()`): `failed to set ftrace filter for function '%s' (-22)`.
//! - 5.18+ (aebfd12521d9, "x86/ibt,ftrace: Search for __fentry__ location"; absent in
//!   5.17-rc5, present in 5.19): `ftrace_location()` takes an address inside a recorded call,
//!   or a symbol's start with a call anywhere up to the next kallsyms symbol (the `call
//!   __fentry__` sits after `endbr64` with IBT): `failed to find location for function '%s'`.
//!
//! Records of `.init.text` are freed after boot (`ftrace_free_init_mem()`). Functions of
//! modules are not judged (their call sites are in the module's own `__mcount_loc`, which is
//! not read): a warning says so.

use std::collections::HashSet;

use super::{Ctx, EINVAL};
use crate::elf::Arch;
use crate::report::*;
use klpsym_core::resched::Cancelled;
use klpsym_core::{ObjectId, SymbolizeOutcome, SIZE_UNKNOWN};

/// `MCOUNT_INSN_SIZE` on x86: the 5-byte `call __fentry__` (a 5-byte NOP at rest).
const MCOUNT_INSN_SIZE: u64 = 5;

impl Ctx<'_, '_, '_, '_> {
    /// `klp_patch_func()` for each function of vmlinux, in the patch's order, as far as the
    /// target's call sites are known.
    pub(super) fn patch_functions(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        if m.is_ordinary_module() {
            return Ok(());
        }
        let Ok(patch) = &m.patch else { return Ok(()) };
        let stage = Stage::PatchEnable;
        // A module object's functions: their call sites are the module's own (its relocated
        // `__mcount_loc`), which are not read. Said, never passed in silence — unless the
        // load or the enable already fails, and the kernel never gets here.
        if !self.blocked(&Stage::PatchEnable) {
            for o in &patch.objects {
                self.r.tick()?;
                let name = o.object_name();
                if name != "vmlinux" && !o.funcs.is_empty() {
                    self.warn_once(format!(
                        "object {name}: whether its replaced functions have an ftrace call site is not checked (a module's call sites are in its own __mcount_loc): the kernel refuses the patch, or {name}'s load, when one has none (notrace)"
                    ));
                }
            }
        }
        // The vmlinux functions the lookups found, in the kernel's order.
        let mut funcs = Vec::new();
        for (i, o) in patch.objects.iter().enumerate() {
            self.r.tick()?;
            if o.object_name() != "vmlinux" {
                continue;
            }
            let Some(report) = self.objects.get(i) else {
                continue;
            };
            for f in &report.funcs {
                self.r.tick()?;
                if let (Some(klpsym_core::LookupVerdict::Found), Some(a)) = (f.verdict, f.address) {
                    funcs.push((f.old_name.clone().unwrap_or_default(), a));
                }
            }
        }
        if funcs.is_empty() {
            return Ok(());
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
            return Ok(());
        };
        let sites = sites.value;
        let init = self.init_text();
        let mut patched = HashSet::with_capacity(funcs.len());
        for (name, a) in funcs {
            self.r.tick()?;
            // klp_find_ops(): a function patched already (by this patch, at the same address)
            // shares its ftrace ops; no location is looked up.
            if !patched.insert(a) {
                continue;
            }
            match self.ftrace_location(a, sites, init)? {
                Some(true) => continue,
                Some(false) => {}
                None => {
                    // The extent the kernel searches is unknown here: say so, never guess.
                    self.warn_once(format!(
                        "{name} at {a:#x}: no ftrace call site at its address, and its extent up to the next symbol is unknown: whether the kernel finds a location for it is not checked"
                    ));
                    continue;
                }
            }
            let pname = m.name.clone();
            let first = if self.t.rules.version < (5, 18) {
                format!("livepatch: failed to set ftrace filter for function '{name}' (-{EINVAL})")
            } else {
                format!("livepatch: failed to find location for function '{name}'")
            };
            let log = vec![
                first,
                "livepatch: failed to patch object 'vmlinux'".to_string(),
                format!("livepatch: failed to enable patch '{pname}'"),
            ];
            self.problem(
                ProblemKind::NoFtraceLocation,
                &stage,
                log,
                EINVAL,
                Some(&name),
                None,
                Some("vmlinux"),
                format!(
                    "{name} at {a:#x} has no ftrace call site (no __mcount_loc entry from its start to the next symbol): it was built without the `call __fentry__` (notrace or noinstr, an inline copy, a file built without CC_FLAGS_FTRACE), so livepatch cannot redirect it; patch its callers instead"
                ),
            );
            self.fail(&stage);
            // __klp_enable_patch() stops at the first object that fails.
            break;
        }
        Ok(())
    }

    /// vmlinux's init memory, whose ftrace records are freed after boot: `ftrace_free_init_mem()`
    /// frees `[__init_begin, __init_end)` (init and exit text alike); `[_sinittext,
    /// _einittext)` when those are not listed.
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
        let live = |r: u64| init.is_none_or(|(s, e)| !(s <= r && r < e));
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
        if self.t.rules.version < (5, 18) {
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
