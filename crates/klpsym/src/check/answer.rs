//! What a check answers: one kernel's verdict with everything behind it, a run over several
//! kernels, and what could not be checked.

use serde::{Serialize, Serializer};

use klpsym_core::{Cancelled, Resched};
use klpsym_livepatch::{CheckReport, LoaderCheckKind, PatchVerdictKind, ResolutionCost};

use super::patch::Patch;
use crate::binding::{AsBuilt, Binding, ModuleComparison};
use crate::kernel::Note;
use crate::run::{KernelFailure, Outcome};

/// Which row of a check's answer was left open: what a program tests (`matches!(u.row,
/// OpenRow::LoaderCheck { check: LoaderCheckKind::Signature })`) instead of reading the
/// sentence. JSON: `{"row": "loader_check", "check": "signature"}` and so on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "row", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OpenRow {
    /// The module is not a livepatch: nothing of livepatch was checked.
    NotALivepatch,
    /// A deferred object whose module is neither loaded nor at hand: what the kernel does
    /// when that module loads.
    DeferredObject {
        /// The module.
        module: String,
    },
    /// A module loader check whose target fact is not known (the signature's included: a
    /// signed module's signature, an unsigned one's policy without the kernel's config).
    LoaderCheck {
        /// Which check.
        check: LoaderCheckKind,
    },
    /// The bindings as a whole: no built-for kernel to compare them with, or one of another
    /// release than the patch's vermagic names.
    BuiltFor,
    /// One binding that nothing proves the one the patch was built for.
    Binding {
        /// Its object.
        object: String,
        /// Its name.
        name: String,
        /// The position the patch gives.
        sympos: u64,
    },
    /// A module object whose build is not proven the one the patch was made for.
    ModuleBuild {
        /// The module.
        module: String,
    },
}

/// Something that decides the load and was not checked: part of the verdict (a check with
/// one is [`PatchVerdictKind::Unverified`] where it would be accepted) and of `--strict`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchecked {
    /// Which row, typed.
    pub row: OpenRow,
    /// What, in words: `object dummy, for when dummy loads`, `module loader, signature`,
    /// `bindings`, `binding of vmlinux:jhash,2`.
    pub subject: String,
    /// Why it was not checked, and what would check it.
    pub why: String,
}

impl Unchecked {
    pub(crate) fn new(
        row: OpenRow,
        subject: impl Into<String>,
        why: impl Into<String>,
    ) -> Unchecked {
        Unchecked {
            row,
            subject: subject.into(),
            why: why.into(),
        }
    }
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.subject, self.why)
    }
}

/// JSON: the sentence (docs/json.md: "what was not checked, in words").
impl Serialize for Unchecked {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One kernel's answer for a patch. JSON: docs/json.md's `results` element (`unchecked` in
/// words, then `open`: the same rows typed).
#[derive(Debug)]
#[non_exhaustive]
pub struct KernelCheck {
    /// The kernel's source.
    pub kernel: String,
    /// What was not checked (`--strict` fails on these).
    pub unchecked: Vec<Unchecked>,
    /// What the kernel does with the patch. Its verdict is the headline: a patch that loads
    /// but binds another definition is [`PatchVerdictKind::BindsAnotherDefinition`], one
    /// that loads as far as checked while something was not is
    /// [`PatchVerdictKind::Unverified`].
    pub report: CheckReport,
    /// What resolving the patch's symbols costs this kernel (lookups, entries visited, the
    /// longest hold without a reschedule point).
    pub resolution_cost: ResolutionCost,
    /// The definition each symbol of the patch binds here (its replaced functions, then its
    /// klp relocation symbols), with its identity and, when the built-for kernel is known,
    /// whether it is the definition the patch was built for.
    pub bindings: Vec<Binding>,
    /// Each module the patch has an object in, its build here against the one on the kernel
    /// the patch was built for (when that is known and another build).
    pub modules: Vec<ModuleComparison>,
    /// Every copy of each function the patch replaces (out of line, clones, inlined into
    /// which functions), from the kernel's DWARF, and whether the patch replaces it: a copy
    /// it does not replace keeps running the old code
    /// ([`PatchVerdictKind::PartialCoverage`]). A function whose object's DWARF is not at
    /// hand says why in its `unchecked`.
    pub coverage: Vec<super::FunctionCoverage>,
    /// What was said while gathering this kernel's facts.
    pub notes: Vec<Note>,
}

impl Serialize for KernelCheck {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            kernel: &'a str,
            unchecked: &'a [Unchecked],
            open: Vec<&'a OpenRow>,
            report: &'a CheckReport,
            resolution_cost: &'a ResolutionCost,
            bindings: &'a [Binding],
            coverage: &'a [super::FunctionCoverage],
            modules: &'a [ModuleComparison],
        }
        View {
            kernel: &self.kernel,
            unchecked: &self.unchecked,
            open: self.open_rows().collect(),
            report: &self.report,
            resolution_cost: &self.resolution_cost,
            bindings: &self.bindings,
            coverage: &self.coverage,
            modules: &self.modules,
        }
        .serialize(s)
    }
}

impl KernelCheck {
    /// The verdict.
    pub fn verdict(&self) -> PatchVerdictKind {
        self.report.verdict.kind
    }

    /// True when the kernel refuses the patch (now or when a module loads).
    pub fn refused(&self) -> bool {
        matches!(
            self.verdict(),
            PatchVerdictKind::RefusedAtLoad | PatchVerdictKind::RefusedWhenModuleLoads
        )
    }

    /// True when the patch loads here but some symbol binds another definition than on the
    /// kernel it was built for: the silent failure.
    pub fn binds_another(&self) -> bool {
        self.verdict() == PatchVerdictKind::BindsAnotherDefinition
    }

    /// True when the patch loads here and some copy of a function it replaces keeps
    /// running the old code (inlined into a function it does not replace, a clone).
    pub fn partial_coverage(&self) -> bool {
        self.verdict() == PatchVerdictKind::PartialCoverage
    }

    /// The copies the patch does not replace, each with its function.
    pub fn not_replaced(
        &self,
    ) -> impl Iterator<Item = (&super::FunctionCoverage, &super::CoveredCopy)> {
        self.coverage
            .iter()
            .flat_map(|f| f.not_replaced().map(move |c| (f, c)))
    }

    /// The functions whose copies were not checked, each with why (`--strict` fails on
    /// these, as on [`KernelCheck::unchecked`]).
    pub fn coverage_unchecked(&self) -> impl Iterator<Item = String> + '_ {
        // One line per reason (a kernel without DWARF says it once for all its functions).
        let mut by_why: Vec<(String, Vec<String>)> = Vec::new();
        for f in &self.coverage {
            let why = f.unchecked.as_deref().map(str::to_string).or_else(|| {
                (!f.incomplete.is_empty())
                    .then(|| format!("its copies may be incomplete: {}", f.incomplete.join("; ")))
            });
            let Some(why) = why else { continue };
            match by_why.iter_mut().find(|(w, _)| *w == why) {
                Some((_, fs)) => fs.push(f.label()),
                None => by_why.push((why, vec![f.label()])),
            }
        }
        by_why
            .into_iter()
            .map(|(why, fs)| format!("coverage of {}: {why}", fs.join(", ")))
    }

    /// True when something was not checked: what decides the load ([`KernelCheck::unchecked`])
    /// or the copies of a replaced function.
    pub fn incomplete(&self) -> bool {
        !self.unchecked.is_empty() || self.coverage_unchecked().next().is_some()
    }

    /// What this kernel's answer does to a run: [`Outcome::No`] when the kernel refuses the
    /// patch, binds another definition or leaves a copy of a replaced function running the
    /// old code, or, `strict`, when something that decides the load or a replaced function's
    /// copies was not checked; else [`Outcome::Ok`].
    pub fn outcome(&self, strict: bool) -> Outcome {
        Outcome::of(
            !(self.refused()
                || self.binds_another()
                || self.partial_coverage()
                || (strict && self.incomplete())),
        )
    }

    /// The bindings that bind another definition than on the built-for kernel.
    pub fn misbindings(&self) -> impl Iterator<Item = &Binding> {
        self.bindings
            .iter()
            .filter(|b| b.as_built.as_ref().is_some_and(AsBuilt::binds_another))
    }

    /// The rows left open, typed (each [`Unchecked::row`], in order): empty when everything
    /// that decides the load was consulted.
    pub fn open_rows(&self) -> impl Iterator<Item = &OpenRow> {
        self.unchecked.iter().map(|u| &u.row)
    }

    /// True when `check` is among the rows left open.
    pub fn loader_check_open(&self, check: LoaderCheckKind) -> bool {
        self.open_rows()
            .any(|r| matches!(r, OpenRow::LoaderCheck { check: c } if *c == check))
    }

    /// What was not checked, each subject once (`object dummy`, `bindings`...).
    pub fn unchecked_summary(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for u in &self.unchecked {
            let s = if u.subject.starts_with("binding of ") {
                "bindings".to_string()
            } else {
                u.subject.clone()
            };
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The matrix's PROBLEMS cell: the kinds of the problems the kernel reaches, a
    /// misbinding, and how many things were not checked.
    pub fn problem_summary(&self) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for p in self.report.problems.iter().filter(|p| p.reached) {
            let k = serde_json::to_value(p.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        if self.misbindings().next().is_some() {
            kinds.push("binds_another_definition".to_string());
        }
        if self.modules.iter().any(ModuleComparison::differs) {
            kinds.push("another_module_build".to_string());
        }
        if self.not_replaced().next().is_some() {
            kinds.push("partial_coverage".to_string());
        }
        let unchecked = self.unchecked.len() + self.coverage_unchecked().count();
        if unchecked > 0 {
            kinds.push(format!("{unchecked} not checked"));
        }
        kinds
    }

    /// What a user should be warned about, in order: notes from gathering the facts, a hold
    /// longer than asked for, the report's warnings, each thing not checked.
    pub fn warnings(&self) -> Vec<Note> {
        let mut out = self.notes.clone();
        if let Some(w) = &self.resolution_cost.warning {
            out.push(Note::warning(w.clone()));
        }
        out.extend(
            self.report
                .warnings
                .iter()
                .map(|w| Note::warning(w.clone())),
        );
        out.extend(
            self.unchecked
                .iter()
                .map(|u| Note::warning(format!("NOT CHECKED: {u}"))),
        );
        out.extend(
            self.coverage_unchecked()
                .map(|u| Note::warning(format!("NOT CHECKED: {u}"))),
        );
        out
    }
}

/// A patch checked against every kernel given.
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct CheckRun {
    /// The patch's path.
    pub patch: String,
    /// One answer per kernel that could be checked, in the order given.
    pub results: Vec<KernelCheck>,
    /// The kernels that could not be opened or checked, each with why.
    pub failed: Vec<KernelFailure>,
    /// True when sections were placed (ordinary relocations are then exact).
    #[serde(skip)]
    pub placed: bool,
    /// What was said while opening the kernels (each kernel's own warnings are in its
    /// [`KernelCheck::warnings`]).
    #[serde(skip)]
    pub notes: Vec<Note>,
    /// How the run ends: [`Outcome::Failed`] when a kernel could not be checked, else
    /// [`Outcome::No`] when one says no ([`KernelCheck::outcome`]), else [`Outcome::Ok`].
    #[serde(skip)]
    pub outcome: Outcome,
}

impl CheckRun {
    pub(crate) fn new(
        patch: &Patch,
        results: Vec<KernelCheck>,
        failed: Vec<KernelFailure>,
        placed: bool,
        strict: bool,
    ) -> CheckRun {
        let outcome = CheckRun::judge(&results, &failed, strict);
        CheckRun {
            patch: patch.path.display().to_string(),
            results,
            failed,
            placed,
            notes: Vec::new(),
            outcome,
        }
    }

    pub(crate) fn judge(
        results: &[KernelCheck],
        failed: &[KernelFailure],
        strict: bool,
    ) -> Outcome {
        let checked = results
            .iter()
            .fold(Outcome::Ok, |o, r| o.and(r.outcome(strict)));
        if failed.is_empty() {
            checked
        } else {
            Outcome::Failed
        }
    }

    /// True when some kernel refuses the patch.
    pub fn refused(&self) -> bool {
        self.results.iter().any(KernelCheck::refused)
    }

    /// True when on some kernel the patch loads and binds another definition than on the
    /// kernel it was built for.
    pub fn binds_another(&self) -> bool {
        self.results.iter().any(KernelCheck::binds_another)
    }

    /// True when on some kernel the patch loads and leaves a copy of a function it replaces
    /// running the old code.
    pub fn partial_coverage(&self) -> bool {
        self.results.iter().any(KernelCheck::partial_coverage)
    }

    /// True when something that decides a load, or the copies of a replaced function, was
    /// not checked on some kernel.
    pub fn incomplete(&self) -> bool {
        self.results.iter().any(KernelCheck::incomplete)
    }

    /// Frees the reports with reschedule points (a big patch's report is tens of thousands
    /// of strings per kernel).
    pub fn free(self, rs: &mut Resched) -> Result<(), Cancelled> {
        for r in self.results {
            r.report.drop_with_points(rs)?;
        }
        Ok(())
    }
}
