//! The library's answers as Python objects: plain values (ints, strings, lists), read-only,
//! with `__repr__`s that read well and `to_dict()` for JSON's shape.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::kinds::kind_name;

pub fn notes(n: &[klpsym::Note]) -> Vec<(String, String)> {
    n.iter()
        .map(|n| (kind_name(&n.level), n.text.clone()))
        .collect()
}

/// One definition of a name.
#[pyclass(module = "klpsym", frozen, get_all)]
#[derive(Clone)]
pub struct Candidate {
    /// 1-based position (old_sympos) among the name's definitions in its object.
    pub position: u64,
    /// Its address (an offset in its section when `unplaced`); None when hidden.
    pub address: Option<u64>,
    /// The kallsyms type letter.
    pub r#type: String,
    /// Its size, when known.
    pub size: Option<u64>,
    /// `vmlinux` or a module.
    pub object: String,
    /// True for a module read from its .ko and not placed.
    pub unplaced: bool,
    /// Its source file, when the kernel's tables tell.
    pub file: Option<String>,
    /// Its declaration line (DWARF), when known: a line of `decl_file`.
    pub line: Option<u64>,
    /// The file declaring it (DWARF's `DW_AT_decl_file`): `file`, or a header for a `static
    /// inline` function's out-of-line copy (`jhash`: include/linux/jhash.h), so that
    /// `f"{c.decl_file}:{c.line}"` is the declaration's place.
    pub decl_file: Option<String>,
}

impl From<klpsym::Candidate> for Candidate {
    fn from(c: klpsym::Candidate) -> Candidate {
        Candidate {
            position: c.position,
            address: c.address,
            r#type: c.kind.to_string(),
            size: c.size,
            object: c.object,
            unplaced: c.unplaced,
            file: c.file,
            line: c.line,
            decl_file: c.decl_file,
        }
    }
}

#[pymethods]
impl Candidate {
    fn __repr__(&self) -> String {
        format!(
            "<Candidate {} {} {}{}{}>",
            self.position,
            self.address
                .map_or("(hidden)".into(), |a| format!("{a:#x}")),
            self.object,
            self.file
                .as_deref()
                .map_or(String::new(), |f| format!(" {f}")),
            // The line is the declaring file's: said with it where that is another file.
            match (&self.decl_file, self.line) {
                (Some(d), Some(l)) if Some(d) != self.file.as_ref() => format!(" ({d}:{l})"),
                (_, Some(l)) => format!(":{l}"),
                _ => String::new(),
            }
        )
    }
}

/// What `klp_find_object_symbol()` answers.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct Lookup {
    /// `found`, `not_found`, `ambiguous`, `position_not_found`.
    pub verdict: String,
    /// The address the kernel would use.
    pub address: Option<u64>,
    /// Its position (found only).
    pub position: Option<u64>,
    /// The kernel's `count`.
    pub count: u64,
    /// The kernel's message (`livepatch: ...`) when it refuses.
    pub message: Option<String>,
    /// With a file: why no position could be chosen from it.
    pub file_note: Option<String>,
    /// Every definition, in kallsyms order.
    pub candidates: Vec<Candidate>,
}

impl From<klpsym::LookupAnswer> for Lookup {
    fn from(a: klpsym::LookupAnswer) -> Lookup {
        Lookup {
            verdict: kind_name(&a.verdict),
            address: a.address,
            position: a.position,
            count: a.count,
            message: a.message,
            file_note: a.file_note,
            candidates: a.candidates.into_iter().map(Candidate::from).collect(),
        }
    }
}

#[pymethods]
impl Lookup {
    fn __bool__(&self) -> bool {
        self.verdict == "found"
    }

    fn __repr__(&self) -> String {
        match self.address {
            Some(a) if self.verdict == "found" => {
                format!(
                    "<Lookup found {a:#x} (position {})>",
                    self.position.unwrap_or(0)
                )
            }
            _ => format!(
                "<Lookup {}: {}>",
                self.verdict,
                self.message
                    .as_deref()
                    .or(self.file_note.as_deref())
                    .unwrap_or("")
            ),
        }
    }
}

/// One name a search found.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct NameMatch {
    /// The name.
    pub name: String,
    /// Definitions in all objects.
    pub count: usize,
    /// The objects defining it.
    pub objects: Vec<String>,
}

impl From<klpsym::NameMatch> for NameMatch {
    fn from(m: klpsym::NameMatch) -> NameMatch {
        NameMatch {
            name: m.name,
            count: m.count,
            objects: m.objects,
        }
    }
}

#[pymethods]
impl NameMatch {
    fn __repr__(&self) -> String {
        format!(
            "<NameMatch {} x{} {}>",
            self.name,
            self.count,
            self.objects.join(" ")
        )
    }
}

/// A symbolized address: what `%pS` names (drgn-like: name, address, size).
///
/// Made without a string: it holds the kernel and the symbol's index, and reads its name,
/// module and text from the kernel's table when asked, so a batch of 100,000 answers makes
/// 100,000 small objects and no copy of any name.
#[pyclass(module = "klpsym", frozen)]
pub struct Symbol {
    kernel: Arc<klpsym::Kernel>,
    id: klpsym::SymbolId,
    object: klpsym::ObjectId,
    /// The symbol's address.
    #[pyo3(get)]
    pub address: u64,
    /// The offset of the address asked for into it.
    #[pyo3(get)]
    pub offset: u64,
    /// Its size, or `SIZE_UNKNOWN`.
    size: u64,
}

impl Symbol {
    /// The symbol `o` found in `kernel`'s table, when it found one.
    pub fn of(kernel: &Arc<klpsym::Kernel>, o: &klpsym::SymbolizeOutcome<'_>) -> Option<Symbol> {
        match o {
            klpsym::SymbolizeOutcome::Found(s) => Some(Symbol {
                kernel: Arc::clone(kernel),
                id: s.symbol.id,
                object: s.symbol.object,
                address: s.symbol.addr,
                offset: s.offset,
                size: s.size,
            }),
            _ => None,
        }
    }

    /// The answer as the library gives it.
    fn symbolized(&self) -> klpsym::Symbolized<'_> {
        let t = self.kernel.table();
        let mut symbol = t.symbol(self.id);
        symbol.addr = self.address;
        klpsym::Symbolized {
            symbol,
            offset: self.offset,
            size: self.size,
            module: self.module(),
        }
    }
}

#[pymethods]
impl Symbol {
    /// The symbol's name.
    #[getter]
    fn name(&self) -> &str {
        self.kernel.table().symbol(self.id).name
    }

    /// Its size, when known.
    #[getter]
    fn size(&self) -> Option<u64> {
        (self.size != klpsym::SIZE_UNKNOWN).then_some(self.size)
    }

    /// Its module (or pseudo-object); None for vmlinux.
    #[getter]
    fn module(&self) -> Option<&str> {
        let info = self.kernel.table().object_info(self.object);
        match info.kind {
            klpsym::ObjectKind::Vmlinux => None,
            _ => Some(info.name.as_str()),
        }
    }

    /// What `%pS` prints: `name+0xoff/0xsize [module]`.
    #[getter]
    fn text(&self) -> String {
        self.symbolized().to_string()
    }

    fn __repr__(&self) -> String {
        format!("<Symbol {} at {:#x}>", self.text(), self.address)
    }

    fn __str__(&self) -> String {
        self.text()
    }
}

/// One frame of a place's inline chain, as `addr2line -f -i` gives it
/// (`Kernel.source_lines`): innermost first, every frame after the first the call site its
/// predecessor was inlined at (`(inlined by)`).
#[pyclass(module = "klpsym", frozen)]
pub struct SourceFrame {
    frame: klpsym::SourceFrame,
}

impl From<klpsym::SourceFrame> for SourceFrame {
    fn from(frame: klpsym::SourceFrame) -> SourceFrame {
        SourceFrame { frame }
    }
}

#[pymethods]
impl SourceFrame {
    /// The function, when DWARF names one (for an assembly function's outermost frame, the
    /// symbol's name, as addr2line gives it).
    #[getter]
    fn function(&self) -> Option<&str> {
        self.frame.function.as_deref()
    }

    /// The file, relative to the kernel's source tree as `scripts/faddr2line` prints it;
    /// None where DWARF has no line for the place (`??` to addr2line).
    #[getter]
    fn file(&self) -> Option<&str> {
        self.frame.file.as_deref()
    }

    /// The line (0 where the line table says 0); None without `file`.
    #[getter]
    fn line(&self) -> Option<u32> {
        self.frame.line
    }

    /// The line table row's discriminator (innermost frame only); None when 0.
    #[getter]
    fn discriminator(&self) -> Option<u32> {
        self.frame.discriminator
    }

    /// `function at file:line`, as `addr2line -f -p` prints a frame.
    fn __str__(&self) -> String {
        self.frame.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<SourceFrame {}>", self.frame)
    }

    fn __eq__(&self, other: &SourceFrame) -> bool {
        self.frame == other.frame
    }
}

/// One problem the kernel meets, with its lines.
#[pyclass(module = "klpsym", frozen, get_all)]
#[derive(Clone)]
pub struct Problem {
    /// Its kind (`ambiguous`, `symbol_not_found`, `vermagic_mismatch`, ...).
    pub kind: String,
    /// When: `module_load`, `patch_enable`, `module_coming`.
    pub stage: String,
    /// The module whose load meets it (`module_coming`).
    pub module: Option<String>,
    /// The kernel's lines.
    pub log: Vec<String>,
    /// The errno (22 = EINVAL).
    pub errno: i32,
    /// False when the kernel stops at an earlier problem first.
    pub reached: bool,
    /// The symbol concerned.
    pub symbol: Option<String>,
    /// What to do about it.
    pub hint: String,
    /// The definitions to choose from.
    pub candidates: Vec<Candidate>,
}

#[pymethods]
impl Problem {
    fn __repr__(&self) -> String {
        format!(
            "<Problem {}{}: {}>",
            self.kind,
            if self.reached { "" } else { " (not reached)" },
            self.log.first().map_or("", String::as_str)
        )
    }
}

/// The definition one symbol of a patch binds on a kernel.
#[pyclass(module = "klpsym", frozen, get_all)]
#[derive(Clone)]
pub struct Binding {
    /// `function` (a klp_func) or `relocation` (a klp relocation symbol).
    pub source: String,
    /// `vmlinux` or a module.
    pub object: String,
    /// The name.
    pub name: String,
    /// The position the patch gives.
    pub sympos: u64,
    /// How many definitions the object has.
    pub definitions: usize,
    /// The definition bound; None when none.
    pub bound: Option<Candidate>,
    /// Its identity: (source file, copy in it), when known.
    pub identity: Option<(String, usize)>,
    /// Against the built-for kernel: `same`, `moved`, `gone`, `unproven`; None when not
    /// compared.
    pub as_built: Option<String>,
    /// What `as_built` says, in words.
    pub as_built_detail: Option<String>,
}

impl From<klpsym::Binding> for Binding {
    fn from(b: klpsym::Binding) -> Binding {
        let detail = b.as_built.as_ref().map(klpsym::AsBuilt::detail);
        Binding {
            source: kind_name(&b.source),
            object: b.object,
            name: b.name,
            sympos: b.sympos,
            definitions: b.definitions,
            bound: b.bound.map(Candidate::from),
            identity: b.identity.map(|i| (i.file, i.rank)),
            as_built: b.as_built.as_ref().map(kind_name),
            as_built_detail: detail,
        }
    }
}

#[pymethods]
impl Binding {
    fn __repr__(&self) -> String {
        format!(
            "<Binding {}:{},{} -> {}{}>",
            self.object,
            self.name,
            self.sympos,
            self.identity
                .as_ref()
                .map_or("?".to_string(), |(f, r)| if *r == 1 {
                    f.clone()
                } else {
                    format!("{f} (copy {r})")
                }),
            self.as_built
                .as_ref()
                .map_or(String::new(), |a| format!(" {a}"))
        )
    }
}

/// An open row as `(row, what)`.
fn open_row(o: &klpsym::OpenRow) -> (String, String) {
    let row = serde_json::to_value(o)
        .ok()
        .and_then(|v| v.get("row").and_then(|r| r.as_str()).map(str::to_string))
        .unwrap_or_default();
    let what = match o {
        klpsym::OpenRow::LoaderCheck { check } => check.to_string(),
        klpsym::OpenRow::DeferredObject { module } | klpsym::OpenRow::ModuleBuild { module } => {
            module.clone()
        }
        klpsym::OpenRow::Binding {
            object,
            name,
            sympos,
        } => format!("{object}:{name},{sympos}"),
        _ => String::new(),
    };
    (row, what)
}

/// One kernel's answer for a patch.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct CheckResult {
    /// The kernel's source.
    pub kernel: String,
    /// `accepted`, `unverified`, `binds_another_definition`, `partial_coverage`,
    /// `refused_at_load`, `refused_when_module_loads`, `ordinary_module`.
    pub verdict: String,
    /// The errno of a refused load.
    pub errno: Option<i32>,
    /// What was not checked (a reason the verdict is `unverified`).
    pub unchecked: Vec<String>,
    /// The replaced functions whose copies were not checked, each with why.
    pub unchecked_coverage: Vec<String>,
    /// The same rows typed, as `(row, what)`: `("loader_check", "signature")`,
    /// `("deferred_object", "dummy")`, `("built_for", "")`, `("binding", "vmlinux:f,2")`,
    /// `("module_build", "dummy")`, `("not_a_livepatch", "")`.
    pub open: Vec<(String, String)>,
    /// Every problem, in the kernel's order.
    pub problems: Vec<Problem>,
    /// The lines the kernel prints, in order.
    pub kernel_log: Vec<String>,
    /// What every symbol binds.
    pub bindings: Vec<Binding>,
    /// Every copy of each replaced function and whether the patch replaces it: a list of
    /// Coverage (verdict `partial_coverage` when a copy is not replaced).
    pub coverage: Vec<crate::copies::Coverage>,
    /// Whether the patch leaves a copy of a replaced function running the old code.
    pub partial_coverage: bool,
    /// The module loader's checks: (check, status, detail).
    pub loader_checks: Vec<(String, String, String)>,
    /// True when the kernel refuses the patch (at load or when a module loads).
    pub refused: bool,
    /// What this kernel's answer does to a run (`OK`, `NO`; as `check --strict` when the
    /// check was strict): the library's rule, the same as the command's exit status.
    pub outcome: String,
    /// The report as JSON (docs/json.md's `results` element).
    pub json: String,
    /// The report as `klpsym check` prints it.
    pub text: String,
}

impl CheckResult {
    /// One kernel's check, judged as a `strict` check is.
    pub(crate) fn checked(r: klpsym::KernelCheck, strict: bool) -> CheckResult {
        let json = serde_json::to_string(&r).unwrap_or_default();
        let mut text = Vec::new();
        let _ =
            klpsym::render::check_report(&mut text, &r, false, false, &mut klpsym::Resched::none());
        let rep = &r.report;
        CheckResult {
            kernel: r.kernel.clone(),
            verdict: kind_name(&rep.verdict.kind),
            errno: rep.verdict.errno,
            unchecked: r.unchecked.iter().map(ToString::to_string).collect(),
            open: r.open_rows().map(open_row).collect(),
            problems: rep
                .problems
                .iter()
                .map(|p| Problem {
                    kind: kind_name(&p.kind),
                    stage: p.stage.name().to_string(),
                    module: match &p.stage {
                        klpsym::Stage::ModuleComing { module } => Some(module.clone()),
                        _ => None,
                    },
                    log: p.log.clone(),
                    errno: p.errno,
                    reached: p.reached,
                    symbol: p.symbol.clone(),
                    hint: p.hint.clone(),
                    candidates: p.candidates.iter().cloned().map(Candidate::from).collect(),
                })
                .collect(),
            kernel_log: rep.kernel_log.iter().map(|l| l.line.clone()).collect(),
            loader_checks: rep
                .loader_checks
                .iter()
                .map(|c| (c.check.to_string(), kind_name(&c.status), c.detail.clone()))
                .collect(),
            partial_coverage: r.partial_coverage(),
            refused: r.refused(),
            outcome: kind_name(&r.outcome(strict)),
            unchecked_coverage: r.coverage_unchecked().collect(),
            coverage: r
                .coverage
                .into_iter()
                .map(crate::copies::Coverage::from)
                .collect(),
            bindings: r.bindings.into_iter().map(Binding::from).collect(),
            json,
            text: String::from_utf8_lossy(&text).into_owned(),
        }
    }
}

#[pymethods]
impl CheckResult {
    fn __repr__(&self) -> String {
        format!("<CheckResult {} on {}>", self.verdict, self.kernel)
    }
}

/// A kernel that could not be opened or checked.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct Failure {
    /// The kernel's source.
    pub kernel: String,
    /// What kind of failure: `not_found`, `bad_input`, `too_large`, `io`, `usage`,
    /// `cancelled` (the constants of `ErrorKind`; the exception classes' kinds).
    pub kind: String,
    /// Why.
    pub error: String,
}

impl From<klpsym::KernelFailure> for Failure {
    fn from(f: klpsym::KernelFailure) -> Failure {
        Failure {
            kind: kind_name(&f.kind),
            kernel: f.kernel,
            error: f.error,
        }
    }
}

#[pymethods]
impl Failure {
    fn __repr__(&self) -> String {
        format!("<Failure {}: {}>", self.kernel, self.error)
    }
}

/// A patch checked on several kernels.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct CheckRun {
    /// One CheckResult per kernel checked.
    pub results: Vec<Py<CheckResult>>,
    /// The kernels that could not be checked.
    pub failed: Vec<Py<Failure>>,
    /// How the run ends (`OK`, `NO`, `FAILED`): decided by the library, as the command's
    /// exit status 0, 1, 2.
    pub outcome: String,
    /// The command's exit status for this run.
    pub exit_code: u8,
}

impl CheckRun {
    /// The run of a check, `strict` as it was asked.
    pub(crate) fn checked(r: klpsym::CheckRun, strict: bool) -> CheckRun {
        Python::attach(|py| CheckRun {
            outcome: kind_name(&r.outcome),
            exit_code: r.outcome.exit_code(),
            results: r
                .results
                .into_iter()
                .filter_map(|c| Py::new(py, CheckResult::checked(c, strict)).ok())
                .collect(),
            failed: r
                .failed
                .into_iter()
                .filter_map(|f| Py::new(py, Failure::from(f)).ok())
                .collect(),
        })
    }
}

#[pymethods]
impl CheckRun {
    fn __repr__(&self) -> String {
        format!(
            "<CheckRun {} checked, {} failed>",
            self.results.len(),
            self.failed.len()
        )
    }
}

/// One definition's place on two builds.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct DriftRow {
    /// (source file, copy in it), when known.
    pub identity: Option<(String, usize)>,
    /// Its position on the first build.
    pub from_position: Option<u64>,
    /// Its position on the second.
    pub to_position: Option<u64>,
    /// `same`, `moved`, `gone`, `new`, `unknown`.
    pub status: String,
}

/// A name's definitions on two builds.
#[pyclass(module = "klpsym", frozen, get_all)]
pub struct Drift {
    /// The name.
    pub name: String,
    /// The object.
    pub object: String,
    /// Each definition of either build once.
    pub rows: Vec<Py<DriftRow>>,
    /// True when a position binds another definition, or none, on the second build.
    pub moved: bool,
}

impl From<klpsym::Drift> for Drift {
    fn from(d: klpsym::Drift) -> Drift {
        let moved = d.moved();
        Python::attach(|py| Drift {
            name: d.name,
            object: d.object,
            moved,
            rows: d
                .rows
                .into_iter()
                .filter_map(|r| {
                    Py::new(
                        py,
                        DriftRow {
                            identity: r.identity.map(|i| (i.file, i.rank)),
                            from_position: r.from_position,
                            to_position: r.to_position,
                            status: kind_name(&r.status),
                        },
                    )
                    .ok()
                })
                .collect(),
        })
    }
}

#[pymethods]
impl Drift {
    fn __repr__(&self) -> String {
        format!(
            "<Drift {} in {}: {} rows{}>",
            self.name,
            self.object,
            self.rows.len(),
            if self.moved { ", moved" } else { "" }
        )
    }
}

#[pymethods]
impl DriftRow {
    fn __repr__(&self) -> String {
        format!(
            "<DriftRow {} {:?} -> {:?}>",
            self.status, self.from_position, self.to_position
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Candidate>()?;
    m.add_class::<Lookup>()?;
    m.add_class::<NameMatch>()?;
    m.add_class::<Symbol>()?;
    m.add_class::<SourceFrame>()?;
    m.add_class::<Problem>()?;
    m.add_class::<Binding>()?;
    m.add_class::<CheckResult>()?;
    m.add_class::<Failure>()?;
    m.add_class::<CheckRun>()?;
    m.add_class::<Drift>()?;
    m.add_class::<DriftRow>()?;
    Ok(())
}
