//! What a patch does not replace: for every function it replaces, every place that
//! function's code lives on the kernel (see `crate::copies`), and whether the patch replaces
//! it. Livepatch redirects the one out-of-line symbol a `klp_func` binds
//! (`klp_find_object_symbol()`, then an ftrace handler at its entry: kernel/livepatch/
//! patch.c, `klp_patch_func()`); an inlined copy runs as part of its caller's code, and a
//! clone is a function of its own that callers call directly: both keep running the old code
//! unless the patch replaces the function that holds them (the caller, the clone itself).
//! kpatch-build and klp-build find these copies when they build, for the build they compile;
//! this finds them on the kernel the patch is checked against.

use serde::{Deserialize, Serialize};

use crate::binding::{Binding, BindingSource};
use crate::copies::{Copy, CopyKind};
use crate::error::Result;
use crate::kernel::Kernel;

/// Whether the patch replaces a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CopyStatus {
    /// The patch replaces the function holding it (the copy itself, or its caller).
    Replaced,
    /// Nothing of the patch replaces it: it keeps running the old code.
    NotReplaced,
    /// Init code, freed once the kernel or the module has started: nothing runs it later.
    Init,
    /// A symbol named like a copy whose code DWARF ties to no function: it may be one.
    Unknown,
}

/// A copy against the kernel the patch was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyAsBuilt {
    /// The built-for kernel has it too (the same kind of copy in a function of that name).
    Same,
    /// Only this kernel has it: a patch complete on the kernel it was built for misses it
    /// here.
    New,
}

/// One copy of a replaced function, and whether the patch replaces it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct CoveredCopy {
    /// The copy.
    #[serde(flatten)]
    pub copy: Copy,
    /// Whether the patch replaces it.
    pub status: CopyStatus,
    /// The replaced function that covers it (`name,pos`), when replaced.
    pub replaced_by: Option<String>,
    /// What to replace to cover it (`name,pos`, as a `klp_func` names it), when not
    /// replaced: the function it is inlined into, or the clone itself.
    pub patch: Option<String>,
    /// Against the built-for kernel, when that kernel's DWARF is at hand.
    pub as_built: Option<CopyAsBuilt>,
}

/// Every copy of one function the patch replaces, on one kernel.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct FunctionCoverage {
    /// The object (`vmlinux` or a module).
    pub object: String,
    /// The function the patch replaces (`old_name`).
    pub name: String,
    /// The position the patch gives (`old_sympos`).
    pub sympos: u64,
    /// The definition it binds: `fs/inode.c:432` (its unit and declaration), from DWARF.
    pub definition: Option<String>,
    /// Every copy of its code.
    pub copies: Vec<CoveredCopy>,
    /// Copies the built-for kernel has and this one does not.
    pub gone: Vec<Copy>,
    /// Why its copies were not checked (no DWARF for its object, no definition bound...).
    pub unchecked: Option<String>,
    /// What could not be read: the list may miss copies.
    pub incomplete: Vec<String>,
}

impl FunctionCoverage {
    /// The copies the patch does not replace.
    pub fn not_replaced(&self) -> impl Iterator<Item = &CoveredCopy> {
        self.copies
            .iter()
            .filter(|c| c.status == CopyStatus::NotReplaced)
    }

    /// `vmlinux:name,pos`.
    pub fn label(&self) -> String {
        format!("{}:{},{}", self.object, self.name, self.sympos)
    }

    fn unchecked(b: &Binding, why: impl Into<String>) -> FunctionCoverage {
        FunctionCoverage {
            object: b.object.clone(),
            name: b.name.clone(),
            sympos: b.sympos,
            definition: None,
            copies: Vec::new(),
            gone: Vec::new(),
            unchecked: Some(why.into()),
            incomplete: Vec::new(),
        }
    }
}

/// The copies of every function `bindings` replaces on `k` (their definitions as bound
/// there), each marked replaced or not by the functions the patch replaces; against
/// `built_for` (another build) where its DWARF is at hand. `unloaded`: module objects not at
/// hand (their bindings are not checked either).
pub(crate) fn coverage(
    k: &Kernel,
    bindings: &[Binding],
    built_for: Option<&Kernel>,
    unloaded: &[String],
) -> Result<Vec<FunctionCoverage>> {
    // What the patch replaces: (object, symbol, position).
    let replaced: Vec<(&str, &str, u64)> = bindings
        .iter()
        .filter(|b| b.source == BindingSource::Function)
        .filter_map(|b| {
            let c = b.bound.as_ref()?;
            Some((b.object.as_str(), b.name.as_str(), c.position))
        })
        .collect();
    let mut out = Vec::new();
    for b in bindings
        .iter()
        .filter(|b| b.source == BindingSource::Function)
    {
        if unloaded.contains(&b.object) {
            out.push(FunctionCoverage::unchecked(
                b,
                format!("module {} is not at hand", b.object),
            ));
            continue;
        }
        let Some(bound) = &b.bound else {
            // The kernel binds nothing: it refuses the patch, and says why.
            continue;
        };
        let copies = match definition_copies(k, &b.object, &b.name, bound.position)? {
            Ok(d) => d,
            Err(why) => {
                out.push(FunctionCoverage::unchecked(b, why));
                continue;
            }
        };
        let (definition, copies, incomplete) = copies;
        let mut covered: Vec<CoveredCopy> = copies
            .into_iter()
            .map(|c| cover(c, &b.object, &replaced))
            .collect();
        let mut gone = Vec::new();
        if let Some(other) = built_for.filter(|o| !crate::binding::same_build(k, o)) {
            if let Some(there) = built_for_copies(other, b)? {
                gone = compare(&mut covered, there);
            }
        }
        out.push(FunctionCoverage {
            object: b.object.clone(),
            name: b.name.clone(),
            sympos: b.sympos,
            definition: Some(definition),
            copies: covered,
            gone,
            unchecked: None,
            incomplete,
        });
    }
    Ok(out)
}

/// (the definition's file text, its copies, what could not be read) of `name`'s definition
/// at `position` in `object` on `k`; `Err(why)` when its copies cannot be found.
type Found = (String, Vec<Copy>, Vec<String>);

fn definition_copies(
    k: &Kernel,
    object: &str,
    name: &str,
    position: u64,
) -> Result<std::result::Result<Found, String>> {
    let Some(d) = k.object_dwarf(object)? else {
        return Ok(Err(crate::copies::no_dwarf(object)));
    };
    let Some(addr) = d.address_of(name, position) else {
        return Ok(Err(format!(
            "{name},{position} is not among the symbols of the DWARF's {object}"
        )));
    };
    let mut rs = k.opts.resched();
    let across = d.with_lines(|l| l.refers_across_units(&mut rs))?;
    let index = if across && d.is_vmlinux() {
        k.copies_index(&d)?
    } else {
        None
    };
    let Some(f) = d.with_lines(|l| l.copies_at(addr, index, &mut rs))? else {
        return Ok(Err(format!(
            "DWARF describes no function starting at {name},{position} (an assembly function has no DWARF of its own)"
        )));
    };
    if f.name.is_empty() {
        return Ok(Err(f.incomplete.join("; ")));
    }
    let def = d.definition(&f)?;
    let stem = name.split('.').next().unwrap_or(name);
    let by_name = d.unexplained_variants(stem, std::slice::from_ref(&def), index)?;
    let text = def.file_text();
    let mut copies = def.copies;
    copies.extend(by_name);
    Ok(Ok((text, copies, def.incomplete)))
}

/// Whether the patch replaces `c` (a copy in `object`).
fn cover(c: Copy, object: &str, replaced: &[(&str, &str, u64)]) -> CoveredCopy {
    let target = c.target();
    let by = |c: &Copy| {
        let (s, p) = (c.symbol.as_deref()?, c.position?);
        replaced
            .iter()
            .any(|r| r.0 == object && r.1 == s && r.2 == p)
            .then(|| format!("{s},{p}"))
    };
    let (status, replaced_by) = if c.kind == CopyKind::ByName {
        (CopyStatus::Unknown, None)
    } else if let Some(r) = by(&c) {
        (CopyStatus::Replaced, Some(r))
    } else if c.init {
        (CopyStatus::Init, None)
    } else {
        (CopyStatus::NotReplaced, None)
    };
    CoveredCopy {
        patch: (status != CopyStatus::Replaced).then_some(target).flatten(),
        copy: c,
        status,
        replaced_by,
        as_built: None,
    }
}

/// The copies of the definition `b` binds on the built-for kernel `other` (by the same rule:
/// position 0 the only definition, N the N-th), when its DWARF is at hand.
fn built_for_copies(other: &Kernel, b: &Binding) -> Result<Option<Vec<Copy>>> {
    let defs = other.definitions(&b.name, Some(&b.object));
    let position = match b.sympos {
        0 if defs.len() == 1 => 1,
        0 => return Ok(None),
        n if n as usize <= defs.len() => n,
        _ => return Ok(None),
    };
    match definition_copies(other, &b.object, &b.name, position)? {
        Ok((_, copies, _)) => Ok(Some(copies)),
        Err(_) => Ok(None),
    }
}

/// What matches a copy across builds: its kind and the name of the function holding it,
/// without the numbers a compiler gives clones (`foo.isra.0` and `foo.isra.1` are one clone
/// of two builds), and the functions it is inlined through.
fn key(c: &Copy) -> (CopyKind, String, Vec<String>) {
    let name = c
        .symbol
        .as_deref()
        .unwrap_or("?")
        .split('.')
        .filter(|p| !p.chars().all(|ch| ch.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(".");
    let kind = match c.kind {
        CopyKind::ByName => CopyKind::Clone,
        k => k,
    };
    (kind, name, c.through.clone())
}

/// Marks each copy here the same as one there or new; returns the copies there that are not
/// here.
fn compare(here: &mut [CoveredCopy], there: Vec<Copy>) -> Vec<Copy> {
    let mut left: Vec<Option<Copy>> = there.into_iter().map(Some).collect();
    for c in here.iter_mut() {
        let k = key(&c.copy);
        let m = left
            .iter_mut()
            .find(|t| t.as_ref().is_some_and(|t| key(t) == k));
        c.as_built = Some(match m {
            Some(slot) => {
                *slot = None;
                CopyAsBuilt::Same
            }
            None => CopyAsBuilt::New,
        });
    }
    left.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(kind: CopyKind, symbol: &str, position: u64, init: bool) -> Copy {
        Copy {
            kind,
            symbol: Some(symbol.into()),
            position: Some(position),
            offset: Some(0),
            address: None,
            section: None,
            parts: Vec::new(),
            through: Vec::new(),
            call_site: None,
            init,
            bytes: 16,
        }
    }

    #[test]
    fn a_copy_is_replaced_by_the_function_holding_it_at_its_position() {
        let replaced = [("vmlinux", "helper", 1), ("vmlinux", "caller_a", 2)];
        let own = cover(
            copy(CopyKind::OutOfLine, "helper", 1, false),
            "vmlinux",
            &replaced,
        );
        assert_eq!(own.status, CopyStatus::Replaced);
        assert_eq!(own.replaced_by.as_deref(), Some("helper,1"));
        assert_eq!(own.patch, None);
        // Inlined into caller_a at position 2 (replaced) and at position 1 (not: another
        // definition of that name).
        let a2 = cover(
            copy(CopyKind::Inlined, "caller_a", 2, false),
            "vmlinux",
            &replaced,
        );
        assert_eq!(a2.status, CopyStatus::Replaced);
        let a1 = cover(
            copy(CopyKind::Inlined, "caller_a", 1, false),
            "vmlinux",
            &replaced,
        );
        assert_eq!(a1.status, CopyStatus::NotReplaced);
        assert_eq!(a1.patch.as_deref(), Some("caller_a,1"));
        // The same names in a module are other functions.
        let m = cover(
            copy(CopyKind::Inlined, "caller_a", 2, false),
            "fat",
            &replaced,
        );
        assert_eq!(m.status, CopyStatus::NotReplaced);
        // A clone nobody replaces; init code; a copy by name only.
        let c = cover(
            copy(CopyKind::Clone, "helper.isra.0", 1, false),
            "vmlinux",
            &replaced,
        );
        assert_eq!(c.status, CopyStatus::NotReplaced);
        assert_eq!(c.patch.as_deref(), Some("helper.isra.0,1"));
        let i = cover(
            copy(CopyKind::Inlined, "start_kernel", 1, true),
            "vmlinux",
            &replaced,
        );
        assert_eq!(i.status, CopyStatus::Init);
        let n = cover(
            copy(CopyKind::ByName, "helper.part.0", 1, false),
            "vmlinux",
            &replaced,
        );
        assert_eq!(n.status, CopyStatus::Unknown);
    }

    #[test]
    fn copies_match_across_builds_by_kind_and_holder_without_clone_numbers() {
        let mut here: Vec<CoveredCopy> = [
            copy(CopyKind::OutOfLine, "helper", 1, false),
            copy(CopyKind::Clone, "helper.isra.1", 1, false),
            copy(CopyKind::Inlined, "caller_a", 1, false),
            copy(CopyKind::Inlined, "caller_b", 1, false),
        ]
        .into_iter()
        .map(|c| cover(c, "vmlinux", &[]))
        .collect();
        let there = vec![
            copy(CopyKind::OutOfLine, "helper", 1, false),
            copy(CopyKind::Clone, "helper.isra.0", 1, false),
            copy(CopyKind::Inlined, "caller_a", 3, false),
            copy(CopyKind::Inlined, "caller_c", 1, false),
        ];
        let gone = compare(&mut here, there);
        let got: Vec<Option<CopyAsBuilt>> = here.iter().map(|c| c.as_built).collect();
        use CopyAsBuilt::*;
        assert_eq!(got, [Some(Same), Some(Same), Some(Same), Some(New)]);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].symbol.as_deref(), Some("caller_c"));
    }
}
