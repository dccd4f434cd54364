//! The livepatches loaded on the running system, their functions resolved against the
//! kernel's symbols as the kernel resolved them.

use std::path::Path;

use serde::Serialize;

use klpsym_core::{find_object_symbol, LookupRequest, LookupVerdict, SymbolTable};

use crate::error::Result;
use crate::kernel::Kernel;
use crate::run::Answer;

/// One function of a loaded patch.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct FuncStatus {
    /// The replaced function's name.
    pub name: String,
    /// The `,N` of the sysfs entry (old_sympos, 0 shown as 1).
    pub sympos: u64,
    /// Where it resolves on this kernel.
    #[serde(serialize_with = "klpsym_core::hex_serde::addr_opt")]
    pub address: Option<u64>,
    /// The lookup's verdict.
    pub verdict: LookupVerdict,
    /// The kernel's message when it does not resolve.
    pub message: Option<String>,
}

/// One object of a loaded patch.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ObjectStatus {
    /// `vmlinux` or a module name.
    pub name: String,
    /// Whether its module is loaded.
    pub loaded: bool,
    /// Its functions.
    pub funcs: Vec<FuncStatus>,
}

/// One loaded patch.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PatchStatus {
    /// The patch module's name.
    pub name: String,
    /// `enabled`.
    pub enabled: Option<bool>,
    /// `transition`.
    pub transition: Option<bool>,
    /// Its objects.
    pub objects: Vec<ObjectStatus>,
}

/// Every loaded patch.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// The patches, sorted by name.
    pub patches: Vec<PatchStatus>,
}

impl Status {
    /// True when every function of every loaded object resolves.
    pub fn all_resolved(&self) -> bool {
        self.patches
            .iter()
            .flat_map(|p| &p.objects)
            .filter(|o| o.loaded)
            .flat_map(|o| &o.funcs)
            .all(|f| f.verdict == LookupVerdict::Found)
    }
}

/// Resolves a sysfs `name,N` entry: N is old_sympos with 0 shown as 1, so a `,1` entry is
/// tried as 0 (unique) first.
fn resolve(table: &SymbolTable, object: &str, entry: &str) -> FuncStatus {
    let (name, pos) = entry.rsplit_once(',').unwrap_or((entry, "1"));
    let sympos: u64 = pos.parse().unwrap_or(1);
    let obj = (object != "vmlinux").then_some(object);
    let look = |p| {
        find_object_symbol(
            table,
            &LookupRequest {
                name,
                object: obj,
                sympos: p,
            },
        )
    };
    let mut out = look(if sympos == 1 { 0 } else { sympos });
    if sympos == 1 && out.verdict == LookupVerdict::Ambiguous {
        out = look(1);
    }
    FuncStatus {
        name: name.to_string(),
        sympos,
        address: out.address,
        verdict: out.verdict,
        message: out.message,
    }
}

/// The livepatches the kernel shows under `sysfs` (normally `/sys/kernel/livepatch`); a
/// missing folder is an error that says what it means (no CONFIG_LIVEPATCH, sysfs not
/// mounted).
pub fn loaded_livepatches(sysfs: &Path) -> Result<Vec<klpsym_io::SysfsPatch>> {
    Ok(klpsym_io::read_livepatch_sysfs(sysfs)?)
}

/// The loaded livepatches `patches` (from [`loaded_livepatches`]), their functions resolved
/// against `kernel` (normally the running one).
pub fn status(patches: &[klpsym_io::SysfsPatch], kernel: &Kernel) -> Status {
    let table = kernel.table();
    Status {
        patches: patches
            .iter()
            .map(|p| PatchStatus {
                name: p.name.clone(),
                enabled: p.enabled,
                transition: p.transition,
                objects: p
                    .objects
                    .iter()
                    .map(|(o, funcs)| ObjectStatus {
                        loaded: o == "vmlinux" || table.object_by_name(o).is_some(),
                        funcs: funcs.iter().map(|f| resolve(table, o, f)).collect(),
                        name: o.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A status says no when a loaded patch's function does not resolve.
impl Answer for Status {
    fn says_no(&self) -> bool {
        !self.all_resolved()
    }
}
