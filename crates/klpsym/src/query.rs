//! Questions about names, answered as the kernel would: `klp_find_object_symbol()` with its
//! verdicts and messages, every definition with its position (`old_sympos`) and source file,
//! names by pattern, compiler-made variants.

use std::collections::HashMap;

use serde::Serialize;

use klpsym_core::hex_serde;
use klpsym_core::{file_match, FileMatch};
use klpsym_core::{
    find_object_symbol, normalize_module_name, search_names, LookupRequest, LookupVerdict,
    NamePattern, ObjectId, SymbolId, SIZE_UNKNOWN,
};

use crate::error::{Error, ErrorKind, Result};
use crate::kernel::Kernel;
use crate::run::Answer;

pub use klpsym_core::{candidates, file_line_text, hex, Candidate};

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
        match self.files_unknown() {
            None => Ok(()),
            Some(why) => Err(Error::bad_input(why)),
        }
    }

    /// Why a source file cannot choose a definition here, when this source names none.
    fn files_unknown(&self) -> Option<String> {
        (!self.inner.table.has_files()).then(|| format!(
            "{}: names no source files (no DWARF, no ELF FILE symbols): a file cannot choose a definition here; give a vmlinux with debug info (the -dbg package's) or a module",
            self.inner.path.display()
        ))
    }

    /// The object id of `name` (any spelling: `nf-tables`, `nf_tables.ko`), or an error that
    /// names the table.
    pub fn object(&self, name: &str) -> Result<ObjectId> {
        let n = normalize_module_name(name);
        self.inner.table.object_by_name(&n).ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("object {n} is not in {}", self.inner.path.display()),
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
#[non_exhaustive]
pub struct LookupAnswer {
    /// The source.
    pub kernel: String,
    /// Found, not found, ambiguous, or position not found.
    pub verdict: LookupVerdict,
    /// The address the kernel would use (an offset in its section when [`LookupAnswer::unplaced`]).
    #[serde(serialize_with = "hex_serde::addr_opt")]
    pub address: Option<u64>,
    /// Its type letter.
    #[serde(rename = "type")]
    pub kind: Option<char>,
    /// Its size, when known.
    #[serde(serialize_with = "hex_serde::num_opt")]
    pub size: Option<u64>,
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
    /// use klpsym::{LookupQuery, LookupVerdict};
    /// let k = klpsym::open_running(&klpsym::Options::new())?;
    /// let a = k.lookup(&LookupQuery::new("init_once").sympos(3))?;
    /// if a.verdict == LookupVerdict::Found {
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
        // A kernel that names no source files cannot answer by file: said in the answer (not
        // found, with why), so that the other kernels of a run still answer.
        if let Some(why) = q.file.and_then(|_| self.files_unknown()) {
            file_miss = Some(why);
        } else if let Some(f) = q.file {
            let all = find_object_symbol(t, &LookupRequest { sympos: 0, ..req });
            let files: Vec<Option<&str>> = all.candidates.iter().map(|&id| t.file(id)).collect();
            match choose_by_file(&files, f) {
                Ok(p) => req.sympos = p,
                Err(why) => file_miss = Some(why.text(q.name, f, &files)),
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
            o.verdict = LookupVerdict::NotFound;
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
            address: o.address,
            kind: sym.map(|(s, _)| s.kind),
            size: sym
                .and_then(|(_, sz)| (sz != SIZE_UNKNOWN && !t.addresses_hidden()).then_some(sz)),
            position: (o.verdict == LookupVerdict::Found).then_some(o.count),
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
                .is_some_and(|id| t.object_info(id).unplaced && o.symbol.is_some()),
            object: o.object,
            candidates: cands,
            livepatch_unsupported: self.livepatch_unsupported(),
        })
    }
}

/// Every definition of a name in one kernel: [`Kernel::sympos`].
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
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
    /// With a file the table knows by its base name only (ELF FILE symbols): that the
    /// definitions listed are those of every file of that base name, the one named or not.
    pub file_note: Option<String>,
    /// The file named is a path the table cannot confirm: it knows source files by base name
    /// only, and the definitions listed are every file of that base name's (the path named
    /// may not even exist). Not an answer for the path: the command exits 1.
    pub base_name_only: bool,
    /// A file was named and this kernel names no source files at all (an image without its
    /// debug package): no definition could be chosen by file (`candidates` is empty,
    /// `file_note` says what to give). Not an answer: the command exits 1.
    pub files_unknown: bool,
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
        let mut file_note = None;
        let files_unknown = file.and_then(|_| self.files_unknown());
        if let Some(why) = &files_unknown {
            cands.clear();
            file_note = Some(why.clone());
        } else if let Some(f) = file {
            let how = |c: &Candidate| {
                c.file
                    .as_deref()
                    .map_or(FileMatch::No, |x| file_match(x, f))
            };
            if !cands.iter().any(|c| how(c) == FileMatch::Exact)
                && cands.iter().any(|c| how(c) == FileMatch::BaseName)
            {
                cands.retain(|c| how(c) == FileMatch::BaseName);
                file_note = Some(base_name_note(
                    f,
                    &cands[0].file.clone().unwrap_or_default(),
                ));
            } else {
                cands.retain(|c| how(c) == FileMatch::Exact);
            }
        }
        self.add_lines(&mut cands)?;
        Ok(Definitions {
            kernel: self.inner.path.display().to_string(),
            count: cands.len(),
            all,
            base_name_only: file_note.is_some() && files_unknown.is_none(),
            files_unknown: files_unknown.is_some(),
            file_note,
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
#[non_exhaustive]
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
#[non_exhaustive]
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
            limit: crate::options::defaults::SEARCH_LIMIT,
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

/// Why no position could be chosen from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileMiss {
    /// No definition in that file.
    None,
    /// Several definitions in that file (one file holds several copies): their positions.
    Several(Vec<u64>),
    /// The table knows the file by its base name only, and the user named a path.
    BaseNameOnly(String),
}

impl FileMiss {
    /// The sentence a user reads.
    pub(crate) fn text(&self, name: &str, wanted: &str, files: &[Option<&str>]) -> String {
        match self {
            FileMiss::None => {
                let mut known: Vec<&str> = files.iter().flatten().copied().collect();
                known.dedup();
                format!(
                    "no definition of '{name}' in {wanted}{}",
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!(" (its definitions are in {})", known.join(", "))
                    }
                )
            }
            FileMiss::Several(p) => format!(
                "{} definitions of '{name}' in {wanted} (positions {p:?}): one file holds several copies; choose a position",
                p.len()
            ),
            FileMiss::BaseNameOnly(base) => format!(
                "no position chosen for '{name}': {}",
                base_name_note(wanted, base)
            ),
        }
    }
}

/// Says that `wanted` (a path) was matched by its base name `base` alone.
pub(crate) fn base_name_note(wanted: &str, base: &str) -> String {
    format!(
        "this kernel's table names source files by base name only (ELF FILE symbols: '{base}'), so {wanted} cannot be told from any other {base}; give a vmlinux with DWARF (the -dbg package) to match paths, or name the file as '{base}' to accept every {base}"
    )
}

/// The position (1-based) of the one definition in file `wanted` among definitions whose
/// files are `files` (kallsyms order), or why there is none. A path matched only by a base
/// name chooses nothing: another file of that name could be the one.
pub(crate) fn choose_by_file(files: &[Option<&str>], wanted: &str) -> Result<u64, FileMiss> {
    let how: Vec<FileMatch> = files
        .iter()
        .map(|f| f.map_or(FileMatch::No, |f| file_match(f, wanted)))
        .collect();
    let at = |m: FileMatch| -> Vec<u64> {
        how.iter()
            .enumerate()
            .filter(|(_, h)| **h == m)
            .map(|(i, _)| i as u64 + 1)
            .collect()
    };
    let exact = at(FileMatch::Exact);
    match exact.as_slice() {
        [p] => Ok(*p),
        [] => match at(FileMatch::BaseName).first() {
            Some(&p) => Err(FileMiss::BaseNameOnly(
                files[p as usize - 1].unwrap_or_default().to_string(),
            )),
            None => Err(FileMiss::None),
        },
        _ => Err(FileMiss::Several(exact)),
    }
}

/// A lookup says no unless the kernel finds the symbol.
impl Answer for LookupAnswer {
    fn says_no(&self) -> bool {
        self.verdict != LookupVerdict::Found
    }
}

/// Definitions say no when there is none, when a path given can only be matched by base
/// name, or when the kernel names no source files (nothing tells its definitions apart).
impl Answer for Definitions {
    fn says_no(&self) -> bool {
        self.candidates.is_empty() || self.base_name_only || self.files_unknown
    }
}

/// A search says no when no name matches.
impl Answer for SearchAnswer {
    fn says_no(&self) -> bool {
        self.names == 0
    }
}

#[cfg(test)]
mod file_tests {
    use super::*;

    #[test]
    fn a_file_chooses_one_definition_or_says_why_not() {
        let files = [Some("fs/inode.c"), Some("fs/proc/inode.c"), None];
        assert_eq!(choose_by_file(&files, "fs/inode.c"), Ok(1));
        assert_eq!(choose_by_file(&files, "proc/inode.c"), Ok(2));
        assert_eq!(
            choose_by_file(&files, "inode.c"),
            Err(FileMiss::Several(vec![1, 2]))
        );
        assert_eq!(choose_by_file(&files, "x.c"), Err(FileMiss::None));
        // ELF FILE base names: a path is never confirmed.
        let base = [Some("sysfs.c"), Some("core.c")];
        assert_eq!(
            choose_by_file(&base, "drivers/cpuidle/sysfs.c"),
            Err(FileMiss::BaseNameOnly("sysfs.c".into()))
        );
        assert_eq!(choose_by_file(&base, "sysfs.c"), Ok(1));
        let text =
            FileMiss::BaseNameOnly("sysfs.c".into()).text("f", "drivers/cpuidle/sysfs.c", &base);
        assert!(
            text.contains("base name only") && text.contains("-dbg"),
            "{text}"
        );
    }
}
