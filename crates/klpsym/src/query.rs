//! Questions about names, answered as the kernel would: `klp_find_object_symbol()` with its
//! verdicts and messages, every definition with its position (`old_sympos`) and source file,
//! names by pattern, compiler-made variants.

use std::collections::HashMap;

use serde::Serialize;

use klpsym_core::{
    find_object_symbol, normalize_module_name, search_names, LookupRequest, NamePattern, ObjectId,
    SymbolId, SymbolTable, Verdict, SIZE_UNKNOWN,
};

use crate::error::{Error, ErrorKind, Result};
use crate::kernel::Kernel;

/// `0x`-prefixed, zero-padded hex as JSON carries addresses (a u64 does not fit a JSON number).
pub fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// One definition of a name, as the reports list it.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// 1-based position in the object's kallsyms order (old_sympos).
    pub position: usize,
    /// Address, `0x`-prefixed hex; null when the source hides addresses.
    pub address: Option<String>,
    /// Type letter.
    #[serde(rename = "type")]
    pub kind: String,
    /// Size in bytes, `0x`-prefixed hex; null when unknown.
    pub size: Option<String>,
    /// The object.
    pub object: String,
    /// True when `address` is an offset in the symbol's section (a module read from its
    /// `.ko`, not placed): no load address yet. Printed as `+0x150`.
    pub unplaced: bool,
    /// The same as `unplaced` (its first name; kept for readers of older output).
    pub relative: bool,
    /// The source file of its translation unit (STT_FILE: `inode.c`; DWARF: `fs/inode.c`),
    /// when the source has them; null otherwise.
    pub file: Option<String>,
    /// The declaration line in `decl_file`, from DWARF; null otherwise.
    pub line: Option<u64>,
    /// The file holding that line: `file` itself, or a header for a `static inline` copy.
    pub decl_file: Option<String>,
    /// The symbol.
    #[serde(skip)]
    pub id: SymbolId,
    /// The address as text prints it (`0x...`, `+0x...`, `(hidden)`).
    #[serde(skip)]
    pub text: String,
}

/// Describes `ids` (one object's matches in kernel order) as candidates.
pub fn candidates(table: &SymbolTable, ids: &[SymbolId]) -> Vec<Candidate> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let s = table.symbol(id);
            let relative = table.object_info(s.object).relative;
            let size = if table.addresses_hidden() || relative {
                SIZE_UNKNOWN
            } else {
                table.size(id)
            };
            Candidate {
                position: i + 1,
                address: (!table.addresses_hidden()).then(|| hex(s.addr)),
                kind: s.kind.to_string(),
                size: (size != SIZE_UNKNOWN).then(|| format!("{size:#x}")),
                object: table.object_info(s.object).name.clone(),
                unplaced: relative,
                relative,
                file: table.file(id).map(str::to_string),
                line: None,
                decl_file: None,
                id,
                text: klpsym_core::address_text(table, id),
            }
        })
        .collect()
}

/// `fs/inode.c:432`, `fs/inode.c (include/linux/fs.h:12)` for a `static inline` copy declared
/// in a header, or the file alone.
pub fn file_line_text(file: &str, decl_file: Option<&str>, line: Option<u64>) -> String {
    match (decl_file, line) {
        (Some(d), Some(l)) if klpsym_core::file_matches(d, file) => format!("{d}:{l}"),
        (Some(d), Some(l)) => format!("{file} ({d}:{l})"),
        _ => file.to_string(),
    }
}

impl Kernel {
    /// Adds DWARF declaration lines to the vmlinux candidates that have a source file, when
    /// this kernel is a vmlinux with debug info or was opened with one.
    pub fn add_lines(&self, cands: &mut [Candidate]) -> Result<()> {
        let wanted: Vec<usize> = (0..cands.len())
            .filter(|&i| cands[i].file.is_some() && cands[i].object == "vmlinux")
            .collect();
        if wanted.is_empty()
            || (self.inner.kind != klpsym_io::SourceKind::VmlinuxElf && self.inner.debug.is_none())
        {
            return Ok(());
        }
        let ids: Vec<SymbolId> = wanted.iter().map(|&i| cands[i].id).collect();
        let lines = self.decl_lines(&ids)?;
        for (i, l) in wanted.into_iter().zip(lines) {
            if let Some(l) = l {
                cands[i].line = Some(l.line);
                cands[i].decl_file = Some(l.file);
            }
        }
        Ok(())
    }

    /// An error naming what to give instead when this source knows no source files.
    pub fn require_files(&self) -> Result<()> {
        if self.inner.table.has_files() {
            return Ok(());
        }
        Err(Error::bad_input(format!(
            "--file: {} has no source files (FILE entries); give a vmlinux with .symtab (the -dbg package's) or a module",
            self.inner.path.display()
        )))
    }

    /// The object id of `name` (any spelling: `nf-tables`, `nf_tables.ko`), or an error that
    /// names the table.
    pub fn object(&self, name: &str) -> Result<ObjectId> {
        let n = normalize_module_name(name);
        self.inner.table.object_by_name(&n).ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("--object {n}: not in {}", self.inner.path.display()),
            )
        })
    }
}

/// What to look up: [`Kernel::lookup`].
#[derive(Debug, Clone, Copy)]
pub struct LookupQuery<'q> {
    /// The symbol name (exact, as the kernel compares it).
    pub name: &'q str,
    /// The object: `None` for vmlinux, else a module name in any spelling.
    pub object: Option<&'q str>,
    /// The position (`old_sympos`): 0 = the name must be unique in the object.
    pub sympos: u64,
    /// Choose the definition in this source file instead of by position (`fs/inode.c` or
    /// `inode.c`, matched on a path suffix).
    pub file: Option<&'q str>,
}

impl<'q> LookupQuery<'q> {
    /// `name` in vmlinux, position 0.
    pub fn new(name: &'q str) -> Self {
        LookupQuery {
            name,
            object: None,
            sympos: 0,
            file: None,
        }
    }

    /// The same query at position `sympos`.
    pub fn sympos(self, sympos: u64) -> Self {
        LookupQuery { sympos, ..self }
    }

    /// The same query in module `object`.
    pub fn object(self, object: &'q str) -> Self {
        LookupQuery {
            object: Some(object),
            ..self
        }
    }

    /// The same query choosing the definition in source file `file`.
    pub fn file(self, file: &'q str) -> Self {
        LookupQuery {
            file: Some(file),
            ..self
        }
    }
}

/// The kernel's answer to one lookup (`klp_find_object_symbol()`), with what an author needs
/// to act on a refusal.
#[derive(Debug, Clone, Serialize)]
pub struct LookupAnswer {
    /// The source.
    pub kernel: String,
    /// Found, not found, ambiguous, or position not found.
    pub verdict: Verdict,
    /// The address the kernel would use.
    pub address: Option<String>,
    /// Its type letter.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its size, when known.
    pub size: Option<String>,
    /// Its position among the name's definitions in the object (found only).
    pub position: Option<u64>,
    /// How many definitions the kernel counted.
    pub count: u64,
    /// The kernel's message (`livepatch: ...`) when it refuses.
    pub message: Option<String>,
    /// With a file: why no position could be chosen from it (then `message` is null).
    pub file_note: Option<String>,
    /// Whether the object is in this table.
    pub object_loaded: bool,
    /// True when `address` is an offset in its section (an unplaced module symbol).
    pub unplaced: bool,
    /// When the name is missing: its compiler-made variants (`NAME.isra.0 [OBJECT]`...).
    pub variants: Vec<String>,
    /// The found line as `/proc/kallsyms` prints it (`+0x..` when unplaced).
    #[serde(skip)]
    pub text: Option<String>,
    /// The object's name as the kernel prints it.
    #[serde(skip)]
    pub object: String,
    /// Every definition of the name in the object, in kallsyms order.
    pub candidates: Vec<Candidate>,
    /// Set when this kernel loads no livepatch at all ([`Kernel::livepatch_unsupported`]):
    /// the answer is what the lookup code would return, but no patch will ask it.
    pub livepatch_unsupported: Option<String>,
}

/// Candidates sized by walking the table (one walk each, usually a few records); more build
/// the indexes first.
const WALKED_SIZES: usize = 64;

impl Kernel {
    /// `klp_find_object_symbol(object, name, sympos)` as this kernel runs it: the address, or
    /// the kernel's verdict and message, with every definition of the name (position,
    /// address, size, source file and line when known).
    ///
    /// ```no_run
    /// use klpsym::{LookupQuery, Verdict};
    /// let k = klpsym::open_running(&klpsym::Options::new())?;
    /// let a = k.lookup(&LookupQuery::new("init_once").sympos(3))?;
    /// if a.verdict == Verdict::Found {
    ///     println!("{}", a.address.unwrap_or_default());
    /// } else {
    ///     println!("{}", a.message.unwrap_or_default());
    /// }
    /// # Ok::<(), klpsym::Error>(())
    /// ```
    pub fn lookup(&self, q: &LookupQuery<'_>) -> Result<LookupAnswer> {
        let t = &self.inner.table;
        let mut req = LookupRequest {
            name: q.name,
            object: q.object,
            sympos: q.sympos,
        };
        // A file: the position of the definition in that file, then the kernel's lookup.
        let mut file_miss = None;
        if let Some(f) = q.file {
            self.require_files()?;
            let all = find_object_symbol(t, &LookupRequest { sympos: 0, ..req });
            let hits: Vec<u64> = all
                .candidates
                .iter()
                .enumerate()
                .filter(|(_, &id)| t.file(id).is_some_and(|x| klpsym_core::file_matches(x, f)))
                .map(|(i, _)| i as u64 + 1)
                .collect();
            match hits.as_slice() {
                [p] => req.sympos = *p,
                [] => {
                    let mut files: Vec<&str> =
                        all.candidates.iter().filter_map(|&id| t.file(id)).collect();
                    files.dedup();
                    file_miss = Some(format!(
                        "no definition of '{}' in {f}{}",
                        q.name,
                        if files.is_empty() {
                            String::new()
                        } else {
                            format!(" (its definitions are in {})", files.join(", "))
                        }
                    ));
                }
                many => {
                    file_miss = Some(format!(
                        "{} definitions of '{}' in {f} (positions {:?}): one file holds several copies; choose with --sympos",
                        many.len(),
                        q.name,
                        many
                    ));
                }
            }
        }
        let mut o = find_object_symbol(t, &req);
        if o.candidates.len() > WALKED_SIZES {
            // Each size would be a walk of the table: build the address index instead, with
            // the reschedule points.
            t.build_indexes(&mut self.opts.resched())?;
        }
        if file_miss.is_some() {
            // Not the kernel's answer: no position could be chosen from the file.
            o.verdict = Verdict::NotFound;
            o.symbol = None;
            o.address = None;
            o.message = None;
        }
        let sym = o.symbol.map(|id| (t.symbol(id), t.size(id)));
        let mut cands = candidates(t, &o.candidates);
        self.add_lines(&mut cands)?;
        Ok(LookupAnswer {
            kernel: self.inner.path.display().to_string(),
            verdict: o.verdict,
            address: o.address.map(hex),
            kind: sym.map(|(s, _)| s.kind.to_string()),
            size: sym.and_then(|(_, sz)| {
                (sz != SIZE_UNKNOWN && !t.addresses_hidden()).then(|| format!("{sz:#x}"))
            }),
            position: (o.verdict == Verdict::Found).then_some(o.count),
            count: o.count,
            message: o.message.as_ref().map(|m| format!("livepatch: {m}")),
            file_note: file_miss,
            object_loaded: o.object_id.is_some(),
            variants: if o.candidates.is_empty() {
                self.variants(q.name)
            } else {
                Vec::new()
            },
            unplaced: o
                .object_id
                .is_some_and(|id| t.object_info(id).relative && o.symbol.is_some()),
            text: o.symbol.map(|id| {
                let a = klpsym_core::address_text(t, id);
                a.strip_prefix("0x").map_or(a.clone(), str::to_string)
            }),
            object: o.object,
            candidates: cands,
            livepatch_unsupported: self.livepatch_unsupported(),
        })
    }
}

/// Every definition of a name in one kernel: [`Kernel::sympos`].
#[derive(Debug, Clone, Serialize)]
pub struct Definitions {
    /// The source.
    pub kernel: String,
    /// Definitions listed.
    pub count: usize,
    /// With a file: every definition of the name (in the objects asked), before the file
    /// chose.
    pub all: usize,
    /// Positions restart at 1 in each object, in kallsyms order.
    pub candidates: Vec<Candidate>,
    /// When the name has no definition: its compiler-made variants (`NAME.isra.0 [OBJECT]`),
    /// as [`LookupAnswer::variants`].
    pub variants: Vec<String>,
    /// As [`LookupAnswer::livepatch_unsupported`].
    pub livepatch_unsupported: Option<String>,
}

impl Kernel {
    /// Every definition of `name` (in `object` only when given), positions restarting at 1 in
    /// each object, without declaration lines (DWARF is read once for many, by
    /// [`Kernel::add_lines`]).
    pub(crate) fn definitions(&self, name: &str, object: Option<&str>) -> Vec<Candidate> {
        let t = &self.inner.table;
        let want: Option<String> = object.map(normalize_module_name);
        // The matches by object, objects in table order.
        let mut per_object: Vec<(ObjectId, Vec<SymbolId>)> = Vec::new();
        for s in t.by_name(name) {
            let oname = &t.object_info(s.object).name;
            if want.as_ref().is_some_and(|w| w != oname) {
                continue;
            }
            match per_object.iter_mut().find(|(o, _)| *o == s.object) {
                Some((_, v)) => v.push(s.id),
                None => per_object.push((s.object, vec![s.id])),
            }
        }
        per_object.sort_by_key(|(o, _)| *o);
        per_object
            .iter()
            .flat_map(|(_, ids)| candidates(t, ids))
            .collect()
    }

    /// The compiler-made variants of a name (`NAME.isra.0 [OBJECT]`), for a name without a
    /// definition of its own.
    fn variants(&self, name: &str) -> Vec<String> {
        let t = &self.inner.table;
        t.variants_of(name)
            .map(|s| format!("{} [{}]", s.name, t.object_info(s.object).name))
            .collect()
    }

    /// Every definition of `name` with its position (`old_sympos`), address, type, size,
    /// object, and source file and line where the source tells: in `object` only when given,
    /// in `file` only when given.
    pub fn sympos(
        &self,
        name: &str,
        object: Option<&str>,
        file: Option<&str>,
    ) -> Result<Definitions> {
        let mut cands = self.definitions(name, object);
        let all = cands.len();
        if let Some(f) = file {
            self.require_files()?;
            cands.retain(|c| {
                c.file
                    .as_deref()
                    .is_some_and(|x| klpsym_core::file_matches(x, f))
            });
        }
        self.add_lines(&mut cands)?;
        Ok(Definitions {
            kernel: self.inner.path.display().to_string(),
            count: cands.len(),
            all,
            variants: if all == 0 {
                self.variants(name)
            } else {
                Vec::new()
            },
            candidates: cands,
            livepatch_unsupported: self.livepatch_unsupported(),
        })
    }
}

/// Names matching a pattern in one kernel: [`Kernel::search`].
#[derive(Debug, Clone, Serialize)]
pub struct SearchAnswer {
    /// The source.
    pub kernel: String,
    /// Distinct matching names (all of them, even past the limit).
    pub names: usize,
    /// The first `limit` names, in the order kallsyms first lists them.
    pub matches: Vec<NameMatch>,
}

/// One name a search found.
#[derive(Debug, Clone, Serialize)]
pub struct NameMatch {
    /// The name.
    pub name: String,
    /// Definitions in all objects.
    pub count: usize,
    /// The objects defining it, in kallsyms order, each once.
    pub objects: Vec<String>,
    /// With [`SearchQuery::fold_twins`]: the `__pfx_NAME` and `__cfi_NAME` entries folded
    /// into this name (the compiler's padding and CFI twins of a function).
    pub twins: Vec<String>,
}

/// A search: [`Kernel::search_by`].
#[derive(Debug, Clone, Copy)]
pub struct SearchQuery<'a> {
    /// The names to find.
    pub pattern: &'a NamePattern,
    /// Only this object.
    pub object: Option<&'a str>,
    /// List at most this many (all are counted).
    pub limit: usize,
    /// Only names defined more than once (the ones a patch must give a position for).
    pub duplicates: bool,
    /// In name order instead of the order kallsyms first lists them.
    pub sort_by_name: bool,
    /// Fold `__pfx_NAME` and `__cfi_NAME` (function padding, kCFI) into `NAME` when it
    /// matches too.
    pub fold_twins: bool,
}

impl<'a> SearchQuery<'a> {
    /// All names matching `pattern`, up to 200 listed, in kallsyms order.
    pub fn new(pattern: &'a NamePattern) -> Self {
        SearchQuery {
            pattern,
            object: None,
            limit: 200,
            duplicates: false,
            sort_by_name: false,
            fold_twins: false,
        }
    }
}

impl Kernel {
    /// The names matching `pattern` (a [`NamePattern`]: a glob, or a substring), in `object`
    /// only when given; at most `limit` listed, all counted.
    pub fn search(
        &self,
        pattern: &NamePattern,
        object: Option<&str>,
        limit: usize,
    ) -> Result<SearchAnswer> {
        self.search_by(&SearchQuery {
            object,
            limit,
            ..SearchQuery::new(pattern)
        })
    }

    /// [`Kernel::search`] with the choices of a [`SearchQuery`]: only duplicated names, name
    /// order, `__pfx_`/`__cfi_` twins folded into their function.
    pub fn search_by(&self, q: &SearchQuery<'_>) -> Result<SearchAnswer> {
        let object = q.object.map(|o| self.object(o)).transpose()?;
        let t = &self.inner.table;
        let mut rs = self.opts.resched();
        let mut all: Vec<NameMatch> = search_names(t, q.pattern, object, &mut rs)?
            .into_iter()
            .map(|x| NameMatch {
                name: x.name.to_string(),
                count: x.count,
                objects: x
                    .objects
                    .iter()
                    .map(|&o| t.object_info(o).name.clone())
                    .collect(),
                twins: Vec::new(),
            })
            .collect();
        if q.fold_twins {
            let present: std::collections::HashSet<String> =
                all.iter().map(|m| m.name.clone()).collect();
            let twin_of = |n: &str| {
                ["__pfx_", "__cfi_"]
                    .iter()
                    .find_map(|p| n.strip_prefix(p))
                    .filter(|f| present.contains(*f))
                    .map(str::to_string)
            };
            let mut folded: HashMap<String, Vec<String>> = HashMap::new();
            all.retain(|m| match twin_of(&m.name) {
                Some(f) => {
                    folded.entry(f).or_default().push(m.name.clone());
                    false
                }
                None => true,
            });
            for m in &mut all {
                if let Some(t) = folded.remove(&m.name) {
                    m.twins = t;
                }
            }
        }
        if q.duplicates {
            all.retain(|m| m.count > 1);
        }
        if q.sort_by_name {
            all.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let names = all.len();
        all.truncate(q.limit);
        Ok(SearchAnswer {
            kernel: self.inner.path.display().to_string(),
            names,
            matches: all,
        })
    }
}
