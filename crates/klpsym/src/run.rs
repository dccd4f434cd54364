//! A run over kernels as one value: each kernel's answer, the kernels that could not answer
//! (each with its error kind), what was said, and how the run ends. The library decides the
//! outcome and what a failed kernel does to the run, once, for every front end: the command
//! turns [`Outcome`] into its exit status, Python reads the same value.

use serde::Serialize;

use crate::error::{Error, ErrorKind, Input, Result};
use crate::kernel::{Kernel, Note};

/// How a run ends. Ordered: a run's outcome is the worst of its parts'.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Every kernel answered as hoped: found, accepted, unchanged (exit status 0).
    Ok,
    /// Some kernel says no: a name not found, a patch refused or binding another
    /// definition, a definition moved, an address outside every symbol (exit status 1).
    No,
    /// Some input could not be read or answered (each is in the run's `failed`); the others'
    /// answers were given (exit status 2).
    Failed,
}

impl Outcome {
    /// [`Outcome::Ok`] when `ok`, else [`Outcome::No`].
    pub fn of(ok: bool) -> Outcome {
        if ok {
            Outcome::Ok
        } else {
            Outcome::No
        }
    }

    /// The worse of the two.
    #[must_use]
    pub fn and(self, other: Outcome) -> Outcome {
        self.max(other)
    }

    /// The exit status a command ends with: 0, 1 or 2.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::No => 1,
            Outcome::Failed => 2,
        }
    }
}

/// What a run over kernels gave. The one rule for a kernel that fails, in every run: it is a
/// failure row beside the others' answers and the run ends [`Outcome::Failed`]; only when a
/// single kernel was asked and nothing answered is its error the run's error instead.
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct Run<T> {
    /// One answer per kernel that answered, in the order given.
    pub results: Vec<T>,
    /// The kernels that could not be opened or could not answer, each with why.
    pub failed: Vec<KernelFailure>,
    /// What was said while opening and answering (folders' files passed over, each kernel's
    /// notes), in order.
    #[serde(skip)]
    pub notes: Vec<Note>,
    /// How the run ends: [`Outcome::Failed`] when a kernel failed, else [`Outcome::No`] when
    /// some answer says no, else [`Outcome::Ok`].
    pub outcome: Outcome,
}

impl<T> Run<T> {
    /// The run of `results` and `failed`, judged: `says_no` tells an answer that says no.
    pub fn judged(
        results: Vec<T>,
        failed: Vec<KernelFailure>,
        notes: Vec<Note>,
        says_no: impl Fn(&T) -> bool,
    ) -> Run<T> {
        let outcome = if !failed.is_empty() {
            Outcome::Failed
        } else {
            Outcome::of(!results.iter().any(says_no))
        };
        Run {
            results,
            failed,
            notes,
            outcome,
        }
    }

    /// Sets the outcome to the worse of it and `other` (an answer's own reason to say no, a
    /// query that could not be read).
    pub fn at_least(&mut self, other: Outcome) {
        self.outcome = self.outcome.and(other);
    }
}

/// A kernel that could not be checked (its facts could not be read: a broken BTF,
/// configuration or Module.symvers), or opened: the others still are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelFailure {
    /// The kernel's source.
    pub kernel: String,
    /// What kind of failure (JSON `not_found`, `bad_input`, `too_large`, `io`, `usage`,
    /// `cancelled`).
    pub kind: ErrorKind,
    /// Why, as the error says it.
    pub error: String,
    /// The caller's input the error is about, when it is about one.
    #[serde(skip)]
    pub input: Option<Input>,
}

impl KernelFailure {
    /// `kernel` could not be opened or checked because of `error`. The error's own mention of
    /// the file in front is left out (the row names it).
    pub fn new(kernel: impl Into<String>, error: &Error) -> KernelFailure {
        let kernel = kernel.into();
        let text = error.to_string();
        let message = text
            .strip_prefix(&format!("{kernel}: "))
            .map_or(text.clone(), str::to_string);
        KernelFailure {
            kernel,
            kind: error.kind(),
            error: message,
            input: error.input(),
        }
    }

    /// The failure as an error again: its kind, input and message, the kernel in front.
    pub fn into_error(self) -> Error {
        let e = Error::new(self.kind, format!("{}: {}", self.kernel, self.error));
        match self.input {
            Some(i) => e.about(i),
            None => e,
        }
    }
}

/// The one rule for a run that has no answer at all: when a single kernel was asked and it
/// failed, its error is the run's (as it would be for that kernel alone); with more, each is
/// a failure row and the run ends [`Outcome::Failed`].
pub(crate) fn settle(answered: usize, failed: &mut Vec<KernelFailure>) -> Result<()> {
    if answered == 0 && failed.len() == 1 {
        return Err(failed.remove(0).into_error());
    }
    Ok(())
}

/// An answer that can say no: what one kernel's answer does to a run's [`Outcome`]. Each
/// answer type says it once, for every front end.
pub trait Answer {
    /// True when the answer says no: a name not found, a definition moved, an address
    /// outside every symbol.
    fn says_no(&self) -> bool;
}

/// The kernels of a [`crate::KernelSet`], ready to answer: those that opened, and a failure row for
/// each source that did not.
#[derive(Debug)]
pub struct Kernels {
    /// The kernels that opened, in the order given.
    pub kernels: Vec<Kernel>,
    failed: Vec<KernelFailure>,
    notes: Vec<Note>,
}

impl Kernels {
    /// The kernels that opened, the failure rows of those that did not and what was said.
    /// When not one opened, the one rule of every [`Run`] applies: a single source's error is the run's.
    pub(crate) fn new(
        kernels: Vec<Kernel>,
        mut failed: Vec<KernelFailure>,
        mut notes: Vec<Note>,
    ) -> Result<Kernels> {
        settle(kernels.len(), &mut failed)?;
        for k in &kernels {
            notes.extend(k.notes().iter().cloned());
        }
        Ok(Kernels {
            kernels,
            failed,
            notes,
        })
    }

    /// The sources that could not be opened, each with why.
    pub fn failed(&self) -> &[KernelFailure] {
        &self.failed
    }

    /// What was said while opening: folders' files passed over, each kernel's notes.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The kernels, the failure rows and the notes, apart.
    pub fn into_parts(self) -> (Vec<Kernel>, Vec<KernelFailure>, Vec<Note>) {
        (self.kernels, self.failed, self.notes)
    }

    /// Each kernel's answer to `ask`, judged by [`Answer::says_no`] (see [`Run::judged`]). A
    /// kernel that cannot answer is a failure row of its own and the others still answer; a
    /// cancellation ends the run; a run without an answer follows the one rule of every [`Run`].
    pub fn answer<T: Answer>(
        self,
        mut ask: impl FnMut(&mut Kernel) -> Result<T>,
    ) -> Result<Run<T>> {
        let (mut kernels, mut failed, notes) = self.into_parts();
        let mut results = Vec::with_capacity(kernels.len());
        for k in &mut kernels {
            match ask(k) {
                Ok(a) => results.push(a),
                Err(e) if e.is_cancelled() => return Err(e),
                Err(e) => failed.push(KernelFailure::new(k.path().display().to_string(), &e)),
            }
        }
        settle(results.len(), &mut failed)?;
        Ok(Run::judged(results, failed, notes, T::says_no))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kernel: &str) -> KernelFailure {
        KernelFailure::new(kernel, &Error::new(ErrorKind::NotFound, "gone"))
    }

    #[test]
    fn a_failed_kernel_outweighs_every_answer() {
        let r = Run::judged(vec![true, false], vec![failure("k")], Vec::new(), |&ok| !ok);
        assert_eq!(r.outcome, Outcome::Failed);
        assert_eq!(r.outcome.exit_code(), 2);
    }

    #[test]
    fn one_answer_that_says_no_makes_the_run_say_no() {
        let r = Run::judged(vec![true, false, true], Vec::new(), Vec::new(), |&ok| !ok);
        assert_eq!(r.outcome, Outcome::No);
        assert_eq!(r.outcome.exit_code(), 1);
        let r = Run::judged(vec![true, true], Vec::new(), Vec::new(), |&ok| !ok);
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.outcome.exit_code(), 0);
    }

    #[test]
    fn outcomes_combine_to_the_worst() {
        assert_eq!(Outcome::Ok.and(Outcome::No), Outcome::No);
        assert_eq!(Outcome::Failed.and(Outcome::No), Outcome::Failed);
        assert_eq!(Outcome::Ok.and(Outcome::Ok), Outcome::Ok);
        let mut r = Run::judged(vec![1], Vec::new(), Vec::new(), |_| false);
        r.at_least(Outcome::No);
        assert_eq!(r.outcome, Outcome::No);
        r.at_least(Outcome::Ok);
        assert_eq!(r.outcome, Outcome::No);
    }

    #[test]
    fn a_single_failed_kernel_is_the_runs_error_several_are_rows() {
        let mut one = vec![failure("a.deb")];
        let e = settle(0, &mut one).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.to_string(), "a.deb: gone");
        let mut two = vec![failure("a.deb"), failure("b.deb")];
        settle(0, &mut two).unwrap();
        assert_eq!(two.len(), 2);
        let mut answered = vec![failure("a.deb")];
        settle(1, &mut answered).unwrap();
        assert_eq!(answered.len(), 1);
    }

    #[test]
    fn a_failure_row_keeps_the_error_kind() {
        let f = failure("k.deb");
        assert_eq!(f.kind, ErrorKind::NotFound);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["kind"], "not_found");
        assert_eq!(json["error"], "gone");
    }
}
