//! Where a function's code lives in a kernel: its out-of-line copy (the symbol a livepatch
//! binds), the compiler's clones of it (`.isra.N`, `.constprop.N`, `.part.N`, `.llvm.N`),
//! and every function it is inlined into, from the kernel's DWARF (a vmlinux with debug
//! info, a `-dbg` package; a module's debug file).
//!
//! Livepatch redirects one out-of-line symbol, found by name and position; the other copies
//! keep running the old code. A copy is named as the kernel names its code: the symbol it is
//! (or that holds it), with that symbol's position among its name's definitions in the
//! object (what a patch's `old_sympos` gives), so "patch the caller" is one `klp_func` away.
//!
//! DWARF ties each copy to one definition (a compilation unit and a declaration line), so two
//! static functions of one name in two files are never mixed up. Finding a function by name in
//! a vmlinux needs an index of all its DWARF (one walk, seconds, made once and kept in the
//! cache under the vmlinux's build id); finding the copies of the function a patch binds reads
//! only the compilation units that hold them.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use klpsym_core::{hex_serde, ObjectId, SymbolTable, SymbolizeOutcome};
use klpsym_elf::{CopiesIndex, CopyPlace, DebugLines, FunctionCopies};

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::run::Answer;

/// What a copy of a function is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CopyKind {
    /// The function's own out-of-line code: the symbol of its name.
    OutOfLine,
    /// A clone the compiler made of it (`.isra.N`, `.constprop.N`, `.part.N`, `.llvm.N`):
    /// a function of its own, which callers reach instead of the original.
    Clone,
    /// Inlined into another function, whose code runs it.
    Inlined,
    /// A symbol named like a clone of it (`NAME.isra.0`) whose code DWARF ties to no
    /// function: it may be a copy.
    ByName,
}

/// One place a function's code lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Copy {
    /// What it is.
    pub kind: CopyKind,
    /// The symbol whose code it is: its own (out of line, a clone), or the function it is
    /// inlined into. `None` where no symbol holds the code.
    pub symbol: Option<String>,
    /// That symbol's position among its name's definitions in the object, in kallsyms order
    /// (what a `klp_func`'s `old_sympos` names).
    pub position: Option<u64>,
    /// Where the copy starts in that symbol (0 out of line).
    #[serde(serialize_with = "hex_serde::num_opt")]
    pub offset: Option<u64>,
    /// Its entry: a vmlinux address as this kernel's table gives them (None for a module's:
    /// see `section`).
    #[serde(serialize_with = "hex_serde::addr_opt")]
    pub address: Option<u64>,
    /// A module's copy: the section holding it.
    pub section: Option<String>,
    /// Other symbols its code starts (a `.cold` part split off).
    pub parts: Vec<String>,
    /// An inlined copy inlined through other inline functions: their names, innermost first.
    pub through: Vec<String>,
    /// An inlined copy's call site (`fs/inode.c:160`).
    pub call_site: Option<String>,
    /// Its code is init code (`.init.text`), freed once the kernel or its module has
    /// started: nothing runs it later, and no patch can reach it.
    pub init: bool,
    /// Bytes of code.
    pub bytes: u64,
}

impl Copy {
    /// `name,pos` of the symbol, as a `klp_func` names it (`inl_caller,1`).
    pub fn target(&self) -> Option<String> {
        Some(format!("{},{}", self.symbol.as_ref()?, self.position?))
    }
}

/// One function as DWARF defines it, with every copy of its code.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Definition {
    /// Its name.
    pub name: String,
    /// The object: `vmlinux` or a module.
    pub object: String,
    /// Its compilation unit's source file (`fs/inode.c`).
    pub file: String,
    /// The file that declares it: `file`, or a header for a `static inline` function.
    pub decl_file: Option<String>,
    /// Its declaration line there.
    pub decl_line: Option<u64>,
    /// Every copy: out of line and clones first, then inlined ones, each in address order.
    pub copies: Vec<Copy>,
    /// What could not be read (the list may then miss copies).
    pub incomplete: Vec<String>,
}

impl Definition {
    /// `fs/inode.c:432`, or `fs/inode.c (include/linux/fs.h:12)` for a header's function.
    pub fn file_text(&self) -> String {
        match (&self.decl_file, self.decl_line) {
            (Some(d), Some(l)) if *d == self.file => format!("{d}:{l}"),
            (Some(d), Some(l)) => format!("{} ({d}:{l})", self.file),
            _ => self.file.clone(),
        }
    }
}

/// Where a name's functions live in one kernel ([`Kernel::copies`]).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Copies {
    /// The kernel's source.
    pub kernel: String,
    /// The name asked for.
    pub name: String,
    /// The object (`vmlinux` or a module).
    pub object: String,
    /// The file asked for (a path suffix), when one was.
    pub file: Option<String>,
    /// Every function of that name (in that file), each with its copies.
    pub definitions: Vec<Definition>,
    /// Symbols named like clones of it (`NAME.isra.0`) that DWARF ties to no function.
    pub by_name: Vec<Copy>,
}

/// The DWARF of one object of a kernel, and how its addresses are named.
pub(crate) struct ObjectDwarf<'k> {
    kernel: &'k Kernel,
    object: String,
    dwarf: Dwarf<'k>,
}

enum Dwarf<'k> {
    Vmlinux(&'k Mutex<DebugLines>),
    Module(Arc<Mutex<DebugLines>>),
}

/// A symbol holding a DWARF address.
struct Held {
    name: String,
    position: u64,
    offset: u64,
    /// The kernel address (vmlinux) of the address asked.
    address: Option<u64>,
    section: Option<String>,
    init: bool,
}

impl Kernel {
    /// Every function named `name` in `object` (default vmlinux; `file`: only those whose
    /// compilation unit or declaring file ends with that path), each with every place its code
    /// lives: out of line, as clones, inlined into which functions. A name with a compiler
    /// suffix (`foo.isra.0`) asks for the function that symbol is a copy of. Needs the
    /// object's DWARF: a vmlinux with debug info or `-dbg` package for vmlinux, the module's
    /// debug file for a module (an error says what to give otherwise).
    pub fn copies(&self, name: &str, file: Option<&str>, object: Option<&str>) -> Result<Copies> {
        let object = object.unwrap_or("vmlinux");
        let Some(d) = self.object_dwarf(object)? else {
            return Err(Error::bad_input(format!(
                "{}: {}",
                self.path().display(),
                no_dwarf(object)
            )));
        };
        let mut rs = self.opts.resched();
        let index = match &d.dwarf {
            Dwarf::Vmlinux(_) => self.copies_index(&d)?,
            Dwarf::Module(_) => None,
        };
        let mut found = d.with_lines(|l| l.copies_named(name, index, &mut rs))?;
        if found.is_empty() && name.contains('.') {
            // A clone's symbol: the function its code is a copy of.
            for addr in d.symbol_addresses(name) {
                let f = d.with_lines(|l| l.copies_at(addr, index, &mut rs))?;
                if let Some(f) = f.filter(|f| !found.iter().any(|g| g.definition == f.definition)) {
                    found.push(f);
                }
            }
        }
        let mut definitions = Vec::new();
        for f in found {
            let def = d.definition(&f)?;
            let keep = file.is_none_or(|want| {
                klpsym_core::file_matches(&def.file, want)
                    || def
                        .decl_file
                        .as_deref()
                        .is_some_and(|df| klpsym_core::file_matches(df, want))
            });
            if keep {
                definitions.push(def);
            }
        }
        let stem = name.split('.').next().unwrap_or(name);
        let by_name = d.unexplained_variants(stem, &definitions, index)?;
        Ok(Copies {
            kernel: self.path().display().to_string(),
            name: name.to_string(),
            object: object.to_string(),
            file: file.map(str::to_string),
            definitions,
            by_name,
        })
    }

    /// The DWARF of `object` on this kernel: the vmlinux with debug info at hand, or the
    /// module's debug file; `None` without one.
    pub(crate) fn object_dwarf(&self, object: &str) -> Result<Option<ObjectDwarf<'_>>> {
        let dwarf = if object == "vmlinux" {
            match self.vmlinux_lines()? {
                Some(l) => Dwarf::Vmlinux(l),
                None => return Ok(None),
            }
        } else {
            match self.module_lines(object)? {
                Some(l) => Dwarf::Module(l),
                None => return Ok(None),
            }
        };
        Ok(Some(ObjectDwarf {
            kernel: self,
            object: object.to_string(),
            dwarf,
        }))
    }

    /// The vmlinux DWARF's copies index: kept in the cache under its build id, else made
    /// now (one walk of all of it) and kept.
    pub(crate) fn copies_index<'a>(
        &'a self,
        d: &ObjectDwarf<'_>,
    ) -> Result<Option<&'a CopiesIndex>> {
        if let Some(i) = self.lines.copies_index.get() {
            return Ok(i.as_ref());
        }
        let mut rs = self.opts.resched();
        let id = self.debug_build_id();
        let cache = self.opts.load_options().cache;
        let kept = match (&cache, &id) {
            (Some(c), Some(id)) => c.read_copies_index(id, &mut rs)?,
            _ => None,
        };
        let index = match kept {
            Some(i) => i,
            None => {
                let i = d.with_lines(|l| l.copies_index(&mut rs))?;
                if let (Some(c), Some(id)) = (&cache, &id) {
                    // The cache is an optimisation: a failure to keep is not an error.
                    let _ = c.keep_copies_index(id, &i, &mut rs)?;
                }
                i
            }
        };
        Ok(self.lines.copies_index.get_or_init(|| Some(index)).as_ref())
    }
}

/// Why `object` has no DWARF here, and what would give it.
pub(crate) fn no_dwarf(object: &str) -> String {
    if object == "vmlinux" {
        "no DWARF for vmlinux: give the kernel's -dbg package or its vmlinux with debug info (a debug vmlinux)".to_string()
    } else {
        format!(
            "no debug file for module {object}: its .ko with debug info in the module tree, /usr/lib/debug/lib/modules/RELEASE, or the kernel's -dbg package"
        )
    }
}

impl ObjectDwarf<'_> {
    fn lock(&self) -> MutexGuard<'_, DebugLines> {
        match &self.dwarf {
            Dwarf::Vmlinux(l) => l.lock(),
            Dwarf::Module(l) => l.lock(),
        }
        .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn with_lines<T>(
        &self,
        f: impl FnOnce(&DebugLines) -> std::result::Result<T, klpsym_core::Cancelled>,
    ) -> Result<T> {
        Ok(f(&self.lock())?)
    }

    pub(crate) fn is_vmlinux(&self) -> bool {
        matches!(self.dwarf, Dwarf::Vmlinux(_))
    }

    /// The table vmlinux's DWARF addresses are named in, and how far its addresses are from
    /// the DWARF's: the kernel's own when it shows addresses, else the debug vmlinux's.
    fn naming(&self) -> (&SymbolTable, u64) {
        let k = self.kernel;
        match k.inner.debug.as_deref() {
            Some(d) if k.table().addresses_hidden() => (&d.table, 0),
            _ => (k.table(), k.link_delta()),
        }
    }

    /// The DWARF address of `name`'s definition at `position` (1-based) in this object.
    pub(crate) fn address_of(&self, name: &str, position: u64) -> Option<u64> {
        let i = usize::try_from(position.checked_sub(1)?).ok()?;
        match &self.dwarf {
            Dwarf::Vmlinux(_) => {
                let (t, delta) = self.naming();
                let s = t.by_name_in(name, ObjectId::VMLINUX).nth(i)?;
                Some(s.addr.wrapping_sub(delta))
            }
            Dwarf::Module(l) => {
                let l = l.lock().unwrap_or_else(|p| p.into_inner());
                let (_, section, off) = l.module_symbols().filter(|s| s.0 == name).nth(i)?;
                l.place(section, off)
            }
        }
    }

    /// The DWARF addresses of every symbol named exactly `name`.
    fn symbol_addresses(&self, name: &str) -> Vec<u64> {
        match &self.dwarf {
            Dwarf::Vmlinux(_) => {
                let (t, delta) = self.naming();
                t.by_name_in(name, ObjectId::VMLINUX)
                    .map(|s| s.addr.wrapping_sub(delta))
                    .collect()
            }
            Dwarf::Module(l) => {
                let l = l.lock().unwrap_or_else(|p| p.into_inner());
                l.module_symbols()
                    .filter(|s| s.0 == name)
                    .filter_map(|s| l.place(s.1, s.2))
                    .collect()
            }
        }
    }

    /// The text symbols named like a compiler's variant of `stem` (`stem.isra.0`), with
    /// their DWARF addresses.
    fn variants(&self, stem: &str) -> Vec<(String, u64)> {
        let prefix = format!("{stem}.");
        match &self.dwarf {
            Dwarf::Vmlinux(_) => {
                let (t, delta) = self.naming();
                t.variants_of(stem)
                    .filter(|s| s.object == ObjectId::VMLINUX && matches!(s.kind, 't' | 'T'))
                    .filter(|s| s.name.starts_with(&prefix))
                    .map(|s| (s.name.to_string(), s.addr.wrapping_sub(delta)))
                    .collect()
            }
            Dwarf::Module(l) => {
                let l = l.lock().unwrap_or_else(|p| p.into_inner());
                l.module_symbols()
                    .filter(|s| s.0.starts_with(&prefix) && s.1.starts_with(".text"))
                    .filter_map(|s| Some((s.0.to_string(), l.place(s.1, s.2)?)))
                    .collect()
            }
        }
    }

    /// The symbol holding DWARF address `addr`; of several starting there, one named
    /// `prefer` (or a variant of it) when there is one.
    fn held(&self, addr: u64, prefer: Option<&str>) -> Option<Held> {
        let fits = |n: &str| {
            prefer.is_some_and(|p| n == p || n.strip_prefix(p).is_some_and(|r| r.starts_with('.')))
        };
        match &self.dwarf {
            Dwarf::Vmlinux(_) => {
                let (t, delta) = self.naming();
                let at = addr.wrapping_add(delta);
                let SymbolizeOutcome::Found(s) = t.symbolize(at) else {
                    return None;
                };
                if s.module.is_some() {
                    return None;
                }
                let mut symbol = s.symbol;
                if s.offset == 0 && !fits(symbol.name) {
                    if let Some(x) = t
                        .at_address(at)
                        .find(|x| x.object == ObjectId::VMLINUX && fits(x.name))
                    {
                        symbol = x;
                    }
                }
                let name = symbol.name;
                let position = t
                    .by_name_in(name, ObjectId::VMLINUX)
                    .position(|x| x.id == symbol.id)? as u64
                    + 1;
                let text = |n: &str| t.by_name_in(n, ObjectId::VMLINUX).next().map(|s| s.addr);
                let init = matches!((text("_sinittext"), text("_einittext")), (Some(a), Some(b)) if at >= a && at < b);
                Some(Held {
                    name: name.to_string(),
                    position,
                    offset: s.offset,
                    address: (!t.addresses_hidden()).then_some(at),
                    section: None,
                    init,
                })
            }
            Dwarf::Module(l) => {
                let l = l.lock().unwrap_or_else(|p| p.into_inner());
                let (mut name, mut section, mut off) = l.symbol_at(addr)?;
                if !fits(name) {
                    if let Some(x) = l
                        .module_symbols()
                        .find(|x| fits(x.0) && l.place(x.1, x.2) == Some(addr))
                    {
                        (name, section, off) = x;
                    }
                }
                let start = l.place(section, off)?;
                let position =
                    l.module_symbols()
                        .filter(|s| s.0 == name)
                        .position(|s| s.1 == section && s.2 == off)? as u64
                        + 1;
                Some(Held {
                    name: name.to_string(),
                    position,
                    offset: addr - start,
                    address: None,
                    section: Some(section.to_string()),
                    init: section.starts_with(".init"),
                })
            }
        }
    }

    /// The symbols starting exactly at DWARF address `addr`.
    fn starting_at(&self, addr: u64) -> Vec<String> {
        match self.held(addr, None) {
            Some(h) if h.offset == 0 => vec![h.name],
            _ => Vec::new(),
        }
    }

    /// A DWARF function as the kernel names its copies.
    pub(crate) fn definition(&self, f: &FunctionCopies) -> Result<Definition> {
        let mut copies = Vec::new();
        let mut rs = self.kernel.opts.resched();
        for c in &f.copies {
            rs.tick()?;
            let held_entry = match c.place {
                CopyPlace::OutOfLine => self.held(c.entry, Some(&f.name)),
                CopyPlace::Inlined => self.held(c.entry, None),
            };
            let bytes = c.ranges.iter().map(|r| r.1 - r.0).sum();
            let mut parts = Vec::new();
            for r in &c.ranges {
                if r.0 != c.entry {
                    parts.extend(self.starting_at(r.0));
                }
            }
            let copy = match c.place {
                CopyPlace::OutOfLine => {
                    let kind = match &held_entry {
                        Some(h) if h.name.starts_with(&format!("{}.", f.name)) => CopyKind::Clone,
                        _ => CopyKind::OutOfLine,
                    };
                    Copy {
                        kind,
                        symbol: held_entry.as_ref().map(|h| h.name.clone()),
                        position: held_entry.as_ref().map(|h| h.position),
                        offset: held_entry.as_ref().map(|h| h.offset),
                        address: held_entry.as_ref().and_then(|h| h.address),
                        section: held_entry.as_ref().and_then(|h| h.section.clone()),
                        parts,
                        through: Vec::new(),
                        call_site: None,
                        init: held_entry.as_ref().is_some_and(|h| h.init),
                        bytes,
                    }
                }
                CopyPlace::Inlined => {
                    let caller = c
                        .caller
                        .as_ref()
                        .and_then(|c| self.held(c.entry, c.name.as_deref()));
                    // Where the copy starts: in its caller, or in a part of it (`.cold`).
                    let offset = match (&caller, &held_entry) {
                        (Some(c), Some(h)) if c.name == h.name && c.position == h.position => {
                            Some(h.offset)
                        }
                        (_, Some(h)) => {
                            if !parts.contains(&h.name) {
                                parts.push(h.name.clone());
                            }
                            None
                        }
                        _ => None,
                    };
                    Copy {
                        kind: CopyKind::Inlined,
                        symbol: caller.as_ref().map(|h| h.name.clone()),
                        position: caller.as_ref().map(|h| h.position),
                        offset,
                        address: held_entry.as_ref().and_then(|h| h.address),
                        section: held_entry.as_ref().and_then(|h| h.section.clone()),
                        parts,
                        through: c.through.clone(),
                        call_site: c
                            .call_site
                            .as_ref()
                            .map(|s| format!("{}:{}", s.file, s.line)),
                        init: caller.as_ref().is_some_and(|h| h.init)
                            || held_entry.as_ref().is_some_and(|h| h.init),
                        bytes,
                    }
                }
            };
            copies.push(copy);
        }
        Ok(Definition {
            name: f.name.clone(),
            object: self.object.clone(),
            file: f.unit.clone(),
            decl_file: f.decl.as_ref().map(|d| d.file.clone()),
            decl_line: f.decl.as_ref().map(|d| d.line),
            copies,
            incomplete: f.incomplete.clone(),
        })
    }

    /// The variants of `stem` (`stem.isra.0`) that are no copy of `definitions` and that
    /// DWARF ties to no function at all: they may be copies.
    pub(crate) fn unexplained_variants(
        &self,
        stem: &str,
        definitions: &[Definition],
        index: Option<&CopiesIndex>,
    ) -> Result<Vec<Copy>> {
        let mut rs = self.kernel.opts.resched();
        let mut out = Vec::new();
        for (name, addr) in self.variants(stem) {
            rs.tick()?;
            let explained = definitions
                .iter()
                .flat_map(|d| &d.copies)
                .any(|c| c.symbol.as_deref() == Some(name.as_str()) || c.parts.contains(&name));
            if explained {
                continue;
            }
            if self
                .with_lines(|l| l.copies_at(addr, index, &mut rs))?
                .is_some_and(|f| f.incomplete.is_empty())
            {
                // Another function's (a same-named static of another file, say).
                continue;
            }
            let h = self.held(addr, Some(&name));
            out.push(Copy {
                kind: CopyKind::ByName,
                symbol: Some(name),
                position: h.as_ref().map(|h| h.position),
                offset: Some(0),
                address: h.as_ref().and_then(|h| h.address),
                section: h.as_ref().and_then(|h| h.section.clone()),
                parts: Vec::new(),
                through: Vec::new(),
                call_site: None,
                init: h.as_ref().is_some_and(|h| h.init),
                bytes: 0,
            });
        }
        Ok(out)
    }
}

/// No function of that name says no, as a name without definitions does.
impl Answer for Copies {
    fn says_no(&self) -> bool {
        self.definitions.is_empty()
    }
}
