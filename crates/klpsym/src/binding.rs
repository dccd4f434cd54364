//! Which definition each symbol of a patch binds on a kernel, and whether it is the one the
//! patch was built for.
//!
//! The kernel counts positions (`old_sympos`, the `,N` of a klp symbol); it cannot know which
//! definition the author meant. On another build of the same series a position can still be
//! in range and name another function: the patch loads and patches the wrong code. A
//! definition's identity here is its source file and its rank among the name's definitions in
//! that file, in kallsyms order (`fs/inode.c`, first). Line numbers are not part of it: they
//! move between point releases while the definition stays the same. Two copies in one file
//! (a `static inline` in a header compiled twice into one unit) are told apart by their rank.
//! A definition without a source file (an image's kallsyms names none; a vmlinux with DWARF,
//! a `-dbg` package or a `.ko`'s STT_FILE entries do) has no identity: its binding cannot be
//! proven either way, and says so. How a name's definitions differ between two builds without
//! a patch is `drift.rs`'s.

use serde::{Deserialize, Serialize};

use klpsym_livepatch::{parse_klp_symbol, LivepatchModule};

use std::rc::Rc;

use crate::error::Result;
use crate::kernel::Kernel;
use klpsym_core::Candidate;

/// Where a patch names a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingSource {
    /// A `klp_func`: the function it replaces (`old_name`, `old_sympos`).
    Function,
    /// A klp relocation symbol (`.klp.sym.OBJ.NAME,POS`).
    Relocation,
}

/// A definition's identity: its source file and its rank among the name's definitions in
/// that file (1 for the first, in kallsyms order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// The source file (`fs/inode.c` from DWARF, `inode.c` from STT_FILE).
    pub file: String,
    /// 1-based rank among the name's definitions in that file.
    pub rank: usize,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.rank == 1 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{} (copy {} in it)", self.file, self.rank)
        }
    }
}

/// How a binding compares with the one on the kernel the patch was built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AsBuilt {
    /// The same definition.
    Same,
    /// Another definition: the one the patch was built for is at `intended_position` here.
    Moved {
        /// The definition on the built-for kernel.
        built_for: Identity,
        /// Its position on this kernel.
        intended_position: u64,
    },
    /// The definition the patch was built for is not on this kernel (another file, inlined
    /// away, renamed by the compiler).
    Gone {
        /// The definition on the built-for kernel.
        built_for: Identity,
    },
    /// Nothing proves it either way.
    Unproven {
        /// Why.
        why: String,
    },
    /// Assumed from the vermagic: this kernel is itself the one taken as the built-for kernel
    /// because its release is the one the patch's vermagic names. One build compared with
    /// itself proves nothing: another build of that release (a rebuild, another package
    /// revision) can bind other definitions. Said as such, never as [`AsBuilt::Same`].
    Assumed {
        /// What was assumed, and what would prove it.
        why: String,
    },
}

impl AsBuilt {
    /// Every status name (JSON `status`, Python's `AsBuilt` constants), in declaration order.
    pub const STATUSES: &'static [&'static str] = &["same", "moved", "gone", "unproven", "assumed"];

    /// Its status name (JSON `status`).
    pub fn status(&self) -> &'static str {
        match self {
            AsBuilt::Same => "same",
            AsBuilt::Moved { .. } => "moved",
            AsBuilt::Gone { .. } => "gone",
            AsBuilt::Unproven { .. } => "unproven",
            AsBuilt::Assumed { .. } => "assumed",
        }
    }

    /// What it says, in words (`built for fs/proc/cmdline.c (copy 1 in it), which is position
    /// 2 here`).
    pub fn detail(&self) -> String {
        match self {
            AsBuilt::Same => "the definition it was built for".to_string(),
            AsBuilt::Moved {
                built_for,
                intended_position,
            } => format!("built for {built_for}, which is position {intended_position} here"),
            AsBuilt::Gone { built_for } => {
                format!("built for {built_for}, which this kernel does not have")
            }
            AsBuilt::Unproven { why } | AsBuilt::Assumed { why } => why.clone(),
        }
    }

    /// True when the kernel binds another definition than the built-for kernel does.
    pub fn binds_another(&self) -> bool {
        matches!(self, AsBuilt::Moved { .. } | AsBuilt::Gone { .. })
    }
}

/// What one symbol of the patch binds on one kernel.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Binding {
    /// A replaced function or a klp relocation symbol.
    pub source: BindingSource,
    /// The object (`vmlinux` or a module).
    pub object: String,
    /// The name.
    pub name: String,
    /// The position the patch gives (0: the only definition).
    pub sympos: u64,
    /// Every definition of the name in the object here, in kallsyms order.
    pub definitions: usize,
    /// The definition the kernel binds; `None` when it binds none (not found, ambiguous,
    /// position out of range, the object not in this table).
    pub bound: Option<Candidate>,
    /// The bound definition's identity, when its source file is known.
    pub identity: Option<Identity>,
    /// Against the built-for kernel, when one is known.
    pub as_built: Option<AsBuilt>,
}

/// The symbols a patch names: its replaced functions and its klp relocation symbols, each
/// once, in that order.
pub(crate) fn wanted(
    module: &LivepatchModule<'_>,
    ksym_name_len: usize,
) -> Vec<(BindingSource, String, String, u64)> {
    let mut out: Vec<(BindingSource, String, String, u64)> = Vec::new();
    if let Ok(p) = &module.patch {
        for o in &p.objects {
            for f in &o.funcs {
                if let Some(n) = &f.old_name {
                    out.push((
                        BindingSource::Function,
                        o.object_name().to_string(),
                        n.clone(),
                        f.old_sympos,
                    ));
                }
            }
        }
    }
    for s in &module.elf.symbols {
        if let Some(k) = s
            .name
            .starts_with(".klp.sym.")
            .then(|| parse_klp_symbol(s.name.as_bytes(), ksym_name_len))
            .flatten()
        {
            out.push((BindingSource::Relocation, k.object, k.name, k.sympos));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|w| seen.insert(w.clone()));
    out
}

/// The identity of `defs[i]` among `defs` (one name's definitions in one object).
pub(crate) fn identity(defs: &[Candidate], i: usize) -> Option<Identity> {
    let file = defs[i].file.clone()?;
    let rank = defs[..=i]
        .iter()
        .filter(|d| d.file.as_deref() == Some(file.as_str()))
        .count();
    Some(Identity { file, rank })
}

/// Where `want` is among `defs`: the position (1-based) of the definition with that identity.
/// A file from DWARF (`fs/inode.c`) and one from STT_FILE (`inode.c`) match on a path suffix.
pub(crate) fn position_of(defs: &[Candidate], want: &Identity) -> Option<u64> {
    let mut rank = 0;
    for (i, d) in defs.iter().enumerate() {
        if d.file.as_deref().is_some_and(|f| {
            klpsym_core::file_matches(f, &want.file) || klpsym_core::file_matches(&want.file, f)
        }) {
            rank += 1;
            if rank == want.rank {
                return Some(i as u64 + 1);
            }
        }
    }
    None
}

/// The definitions of names on one kernel: vmlinux's and loaded modules' from its table, a
/// module that is not loaded from its `.ko` (the module tree, or the kernel's packages), read
/// once per module.
pub(crate) struct Sources<'k> {
    kernel: &'k Kernel,
    modules: std::cell::RefCell<std::collections::HashMap<String, Option<Rc<ModuleDefs>>>>,
    /// Why a module name's definitions have no source files here, by (object, name).
    unfiled: std::cell::RefCell<std::collections::HashMap<(String, String), String>>,
}

/// A module read from its `.ko`: its symbols (unplaced) and its identity.
pub(crate) struct ModuleDefs {
    table: klpsym_core::SymbolTable,
    id: ModuleId,
}

impl<'k> Sources<'k> {
    pub(crate) fn new(kernel: &'k Kernel) -> Sources<'k> {
        Sources {
            kernel,
            modules: Default::default(),
            unfiled: Default::default(),
        }
    }

    /// Module `object`'s `.ko` on this kernel, when the module tree or the packages have it.
    fn module(&self, object: &str) -> Result<Option<Rc<ModuleDefs>>> {
        if let Some(m) = self.modules.borrow().get(object) {
            return Ok(m.clone());
        }
        let k = self.kernel;
        let names = vec![object.to_string()];
        let found = match k.module_tree_for(&names)? {
            Some(tree) if tree.file(object).is_some() => {
                let mut rs = k.opts.resched();
                let m = tree.load(object, &k.opts.load_options(), &mut rs)?;
                let id = ModuleId {
                    file: tree.file(object).map(|f| f.label().display().to_string()),
                    srcversion: m
                        .modinfo
                        .iter()
                        .find(|(key, _)| key == "srcversion")
                        .map(|(_, v)| v.clone()),
                    build_id: m.build_id.clone(),
                };
                let table = klpsym_io::module_symbols_table(&m, None)?;
                Some(Rc::new(ModuleDefs { table, id }))
            }
            _ => None,
        };
        self.modules
            .borrow_mut()
            .insert(object.to_string(), found.clone());
        Ok(found)
    }

    /// Every definition of `name` in `object`, in kallsyms order; a module's with the source
    /// files its debug file tells (see `crate::module_files`).
    fn definitions(&self, object: &str, name: &str) -> Result<Vec<Candidate>> {
        let k = self.kernel;
        if object == "vmlinux" {
            return Ok(k.definitions(name, Some(object)));
        }
        let (mut defs, build_id) = if k.table().object_by_name(object).is_some() {
            (k.definitions(name, Some(object)), None)
        } else {
            let Some(m) = self.module(object)? else {
                return Ok(Vec::new());
            };
            let t = &m.table;
            let ids: Vec<klpsym_core::SymbolId> = t.by_name(name).map(|s| s.id).collect();
            (klpsym_core::candidates(t, &ids), m.id.build_id.clone())
        };
        if let Some(why) = k.add_module_files(object, name, &mut defs, build_id.as_deref())? {
            self.unfiled
                .borrow_mut()
                .insert((object.to_string(), name.to_string()), why);
        }
        Ok(defs)
    }

    /// Why `object`'s definitions of `name` name no source file here, when a debug file was
    /// looked for.
    fn unfiled(&self, object: &str, name: &str) -> Option<String> {
        self.unfiled
            .borrow()
            .get(&(object.to_string(), name.to_string()))
            .cloned()
    }
}

/// How the kernel a patch was built for was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuiltForWay {
    /// Named by the caller ([`crate::CheckOptions::built_for`]).
    Given,
    /// Among the kernels given, by the release the patch's vermagic names.
    Vermagic,
}

/// What each of `wanted` binds on `k`, compared with `built_for`'s when given (found the
/// `way` it was). A module object binds in the module's own symbols: its table when it is
/// loaded, its `.ko` when not (the kernel binds there when it loads). Objects in `unloaded`
/// (neither loaded nor given) are not compared: they bind nothing until they load, and the
/// check already says they are not checked.
pub(crate) fn bindings(
    k: &Sources<'_>,
    wanted: &[(BindingSource, String, String, u64)],
    built_for: Option<(&Sources<'_>, BuiltForWay)>,
    unloaded: &[String],
) -> Result<Vec<Binding>> {
    let mut out = Vec::with_capacity(wanted.len());
    for (source, object, name, sympos) in wanted {
        let (defs, bound) = bound_on(k, object, name, *sympos)?;
        let identity = bound.and_then(|i| identity(&defs, i));
        let as_built = match built_for {
            // Where the target binds nothing the kernel refuses the patch (its own verdict
            // says why): there is no binding to compare.
            None => None,
            Some(_) if bound.is_none() || unloaded.contains(object) => None,
            // The kernel itself: named as the built-for kernel, every position binds what it
            // was built with; found by its release alone, that it is the patch's build is
            // assumed, not proven.
            Some((b, way)) if same_source(k.kernel, b.kernel) => Some(match way {
                BuiltForWay::Given => AsBuilt::Same,
                BuiltForWay::Vermagic => AsBuilt::Assumed {
                    why: assumed_why(k.kernel),
                },
            }),
            // Two sources of one build (the same GNU build id): every position binds what it
            // bound.
            Some((b, _)) if same_build(k.kernel, b.kernel) && object == "vmlinux" => {
                Some(AsBuilt::Same)
            }
            // One module build against itself (the same build id, or the same sources and
            // as many definitions): every position binds what it bound, source files or
            // not (distributions strip them from modules).
            Some((b, _)) if object != "vmlinux" && same_module(k, b, object, name, defs.len())? => {
                Some(AsBuilt::Same)
            }
            Some((b, _)) => Some(compare(k, b, object, name, *sympos, &defs, bound)?),
        };
        out.push(Binding {
            source: *source,
            object: object.clone(),
            name: name.clone(),
            sympos: *sympos,
            definitions: defs.len(),
            identity,
            bound: bound.map(|i| defs[i].clone()),
            as_built,
        });
    }
    // Declaration lines of the bound definitions, in one pass over the DWARF.
    let mut bound: Vec<Candidate> = out.iter().filter_map(|b| b.bound.clone()).collect();
    k.kernel.add_lines(&mut bound)?;
    let mut lines = bound.into_iter();
    for b in out.iter_mut().filter(|b| b.bound.is_some()) {
        b.bound = lines.next();
    }
    Ok(out)
}

/// Which build of a module: the `.ko` it was read from, its `srcversion` (modpost's hash of
/// its sources, when it has one) and its GNU build id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleId {
    /// The file read.
    pub file: Option<String>,
    /// `srcversion` from its `.modinfo`.
    pub srcversion: Option<String>,
    /// The GNU build id.
    pub build_id: Option<String>,
}

/// How a patch's target module here compares with the one on the kernel it was built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ModuleAsBuilt {
    /// The same build (build id), or the same sources (srcversion).
    Same,
    /// Other sources: the patch was made for another module (an out-of-tree rebuild, another
    /// version): what it replaces is not what it was written against.
    Differs {
        /// How they differ.
        why: String,
    },
    /// Nothing proves it either way.
    Unproven {
        /// Why.
        why: String,
    },
}

/// One module object of a patch: its build here and on the built-for kernel.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleComparison {
    /// The module.
    pub object: String,
    /// Its build on this kernel, when its `.ko` is at hand.
    pub here: Option<ModuleId>,
    /// Its build on the built-for kernel, when its `.ko` is at hand.
    pub built_for: Option<ModuleId>,
    /// How they compare.
    pub as_built: ModuleAsBuilt,
}

impl ModuleComparison {
    /// True when the sources differ: exit 1, like a binding of another definition.
    pub fn differs(&self) -> bool {
        matches!(self.as_built, ModuleAsBuilt::Differs { .. })
    }
}

/// Each module object of `objects` here against the built-for kernel: by srcversion when
/// both have one, else by build id.
pub(crate) fn compare_modules(
    k: &Sources<'_>,
    built_for: &Sources<'_>,
    objects: &[String],
    unloaded: &[String],
) -> Result<Vec<ModuleComparison>> {
    let mut out = Vec::new();
    for o in objects {
        if o == "vmlinux"
            || unloaded.contains(o)
            || out.iter().any(|c: &ModuleComparison| &c.object == o)
        {
            continue;
        }
        let here = k.module(o)?.map(|m| m.id.clone());
        let there = built_for.module(o)?.map(|m| m.id.clone());
        let as_built = match (&here, &there) {
            (None, _) => ModuleAsBuilt::Unproven {
                why: format!("no {o}.ko at hand for this kernel"),
            },
            (_, None) => ModuleAsBuilt::Unproven {
                why: format!("no {o}.ko at hand for the built-for kernel"),
            },
            (Some(h), Some(t)) => match (&h.srcversion, &t.srcversion, &h.build_id, &t.build_id) {
                (Some(a), Some(b), _, _) if a != b => ModuleAsBuilt::Differs {
                    why: format!("srcversion {a} here, {b} on the built-for kernel: other sources"),
                },
                (Some(_), Some(_), _, _) => ModuleAsBuilt::Same,
                (_, _, Some(a), Some(b)) if a == b => ModuleAsBuilt::Same,
                (_, _, Some(a), Some(b)) => ModuleAsBuilt::Unproven {
                    why: format!("another build (build id {a} here, {b} there) and no srcversion on both to compare their sources"),
                },
                _ => ModuleAsBuilt::Unproven {
                    why: "neither a srcversion nor a build id on both".to_string(),
                },
            },
        };
        out.push(ModuleComparison {
            object: o.clone(),
            here,
            built_for: there,
            as_built,
        });
    }
    Ok(out)
}

/// True when module `object` is one build on `k` and `b`: the same file of one kernel, the
/// same GNU build id, or the same srcversion (sources) with as many definitions of `name`
/// (`count` on `k`).
fn same_module(
    k: &Sources<'_>,
    b: &Sources<'_>,
    object: &str,
    name: &str,
    count: usize,
) -> Result<bool> {
    let (Some(here), Some(there)) = (k.module(object)?, b.module(object)?) else {
        return Ok(false);
    };
    let (h, t) = (&here.id, &there.id);
    if same_build(k.kernel, b.kernel) && h.file.is_some() && h.file == t.file {
        return Ok(true);
    }
    if matches!((&h.build_id, &t.build_id), (Some(x), Some(y)) if x == y) {
        return Ok(true);
    }
    let same_sources = matches!((&h.srcversion, &t.srcversion), (Some(x), Some(y)) if x == y);
    Ok(same_sources && b.definitions(object, name)?.len() == count)
}

/// True when `a` and `b` are one build: the same kernel, or the same GNU build id.
pub(crate) fn same_build(a: &Kernel, b: &Kernel) -> bool {
    same_source(a, b)
        || matches!((&a.facts().build_id, &b.facts().build_id), (Some(x), Some(y)) if x == y)
}

/// True when `a` and `b` are one kernel: the same object, or opened from the same source.
pub(crate) fn same_source(a: &Kernel, b: &Kernel) -> bool {
    std::ptr::eq(a, b) || a.path() == b.path()
}

/// Why a kernel compared with itself as the built-for kernel is an assumption (the kernel's
/// path is its result's: not repeated here).
fn assumed_why(k: &Kernel) -> String {
    format!(
        "assumed from vermagic: this kernel is {}, the release the patch's vermagic names, so it is taken as the kernel the patch was built for; nothing compares two builds, so that it is the patch's build is not proven (naming the built-for kernel proves it)",
        k.release().as_deref().unwrap_or("the release")
    )
}

/// The name's definitions in the object on `k`, and the index of the one the kernel binds.
fn bound_on(
    k: &Sources<'_>,
    object: &str,
    name: &str,
    sympos: u64,
) -> Result<(Vec<Candidate>, Option<usize>)> {
    let defs = k.definitions(object, name)?;
    // klp_find_object_symbol(): position 0 binds the only definition; N the N-th.
    let bound = match sympos {
        0 if defs.len() == 1 => Some(0),
        0 => None,
        n => usize::try_from(n - 1).ok().filter(|&i| i < defs.len()),
    };
    Ok((defs, bound))
}

fn compare(
    k: &Sources<'_>,
    b: &Sources<'_>,
    object: &str,
    name: &str,
    sympos: u64,
    defs: &[Candidate],
    bound: Option<usize>,
) -> Result<AsBuilt> {
    let (bdefs, bbound) = bound_on(b, object, name, sympos)?;
    let unproven = |why: String| Ok(AsBuilt::Unproven { why });
    let Some(bi) = bbound else {
        return unproven("the built-for kernel binds no definition of it".into());
    };
    let because = |s: &Sources<'_>| {
        s.unfiled(object, name)
            .map(|why| format!(": {why}"))
            .unwrap_or_default()
    };
    let Some(want) = identity(&bdefs, bi) else {
        return unproven(format!(
            "the built-for kernel does not say its source file{}",
            because(b)
        ));
    };
    if defs.iter().all(|d| d.file.is_none()) {
        return unproven(format!(
            "this kernel does not say its definitions' source files{}",
            because(k)
        ));
    }
    Ok(match position_of(defs, &want) {
        None => AsBuilt::Gone { built_for: want },
        Some(p) if bound.map(|b| b as u64 + 1) == Some(p) => AsBuilt::Same,
        Some(p) => AsBuilt::Moved {
            built_for: want,
            intended_position: p,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(position: u64, file: Option<&str>) -> Candidate {
        Candidate {
            position,
            address: None,
            kind: 't',
            size: None,
            object: "vmlinux".into(),
            unplaced: false,
            file: file.map(str::to_string),
            line: None,
            decl_file: None,
            id: klpsym_core::SymbolId(0),
        }
    }

    #[test]
    fn identity_is_file_and_rank_and_matches_across_file_name_forms() {
        let defs = [
            def(1, Some("fs/inode.c")),
            def(2, Some("fs/dcache.c")),
            def(3, Some("fs/inode.c")),
        ];
        let id = identity(&defs, 2).unwrap();
        assert_eq!(
            id,
            Identity {
                file: "fs/inode.c".into(),
                rank: 2
            }
        );
        // Another build whose source is STT_FILE: basenames, and a new copy in front.
        let other = [
            def(1, Some("super.c")),
            def(2, Some("inode.c")),
            def(3, Some("dcache.c")),
            def(4, Some("inode.c")),
        ];
        assert_eq!(position_of(&other, &id), Some(4));
        let gone = [def(1, Some("inode.c"))];
        assert_eq!(position_of(&gone, &id), None);
    }

    #[test]
    fn as_built_statuses_are_every_variant_s_json_tag() {
        let id = || Identity {
            file: "f.c".into(),
            rank: 1,
        };
        let every = [
            AsBuilt::Same,
            AsBuilt::Moved {
                built_for: id(),
                intended_position: 2,
            },
            AsBuilt::Gone { built_for: id() },
            AsBuilt::Unproven { why: "w".into() },
            AsBuilt::Assumed { why: "w".into() },
        ];
        let tags: Vec<String> = every
            .iter()
            .map(|a| {
                // A new variant stops this match compiling: give it a status and a sample.
                match a {
                    AsBuilt::Same
                    | AsBuilt::Moved { .. }
                    | AsBuilt::Gone { .. }
                    | AsBuilt::Unproven { .. }
                    | AsBuilt::Assumed { .. } => {}
                }
                let tag = serde_json::to_value(a).unwrap()["status"]
                    .as_str()
                    .unwrap()
                    .to_string();
                assert_eq!(a.status(), tag);
                tag
            })
            .collect();
        assert_eq!(tags, AsBuilt::STATUSES);
    }
}
