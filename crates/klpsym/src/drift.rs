//! How a name's definitions differ between two builds, without a patch (`klpsym drift`):
//! each definition matched by its identity (see `binding.rs`), what a patch built for the
//! first build binds on the second.

use serde::{Deserialize, Serialize};

use crate::binding::{identity, position_of, Identity};
use crate::error::Result;
use crate::kernel::Kernel;
use crate::run::{settle, Answer, KernelFailure, Kernels, Run};
use klpsym_core::Candidate;

/// How one definition of a name fares from one build to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DriftStatus {
    /// The same definition at the same position.
    Same,
    /// The same definition at another position: a patch built with the first binds another
    /// definition on the second (or none).
    Moved,
    /// On the first build only.
    Gone,
    /// On the second build only.
    New,
    /// No source file on one side: nothing tells which definition is which.
    Unknown,
}

/// One definition's place on both builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DriftRow {
    /// Its source file and rank in it, when known.
    pub identity: Option<Identity>,
    /// Its position on the first build (1-based), when there.
    pub from_position: Option<u64>,
    /// Its position on the second build, when there.
    pub to_position: Option<u64>,
    /// What became of it.
    pub status: DriftStatus,
}

/// A name's definitions on two builds, matched by identity (source file and rank in it; see
/// the module docs): what a patch built for `from` binds on `to`, without a patch.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Drift {
    /// The name.
    pub name: String,
    /// The object (`vmlinux` or a module).
    pub object: String,
    /// The first build's source.
    pub from_kernel: String,
    /// The second build's source.
    pub to_kernel: String,
    /// The definitions on the first build, in kallsyms order.
    pub from: Vec<Candidate>,
    /// The definitions on the second build.
    pub to: Vec<Candidate>,
    /// Each definition of either build once: the first's in order, then those new on the
    /// second.
    pub rows: Vec<DriftRow>,
}

impl Drift {
    /// True when a position binds another definition, or none, on the second build (a row
    /// moved, gone or new).
    pub fn moved(&self) -> bool {
        self.rows.iter().any(|r| {
            matches!(
                r.status,
                DriftStatus::Moved | DriftStatus::Gone | DriftStatus::New
            )
        })
    }
}

/// How the definitions of each of `names` in `object` differ between the first of `kernels`
/// (the build positions were chosen on) and each other one, as one run: a kernel that cannot
/// answer is a failure row (once, however many names), the others still answer.
pub fn drift_all(kernels: Kernels, names: &[String], object: &str) -> Result<Run<Drift>> {
    let (kernels, mut failed, notes) = kernels.into_parts();
    let Some((from, others)) = kernels.split_first().filter(|(_, o)| !o.is_empty()) else {
        let why: Vec<String> = failed
            .iter()
            .map(|f| format!("{}: {}", f.kernel, f.error))
            .collect();
        return Err(crate::Error::usage(format!(
            "drift compares builds: only one kernel could be opened{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        )));
    };
    let mut results = Vec::new();
    for to in others {
        for name in names {
            match drift(from, to, name, object) {
                Ok(d) => results.push(d),
                Err(e) if e.is_cancelled() => return Err(e),
                Err(e) => failed.push(KernelFailure::new(to.path().display().to_string(), &e)),
            }
        }
    }
    failed.dedup_by(|a, b| a.kernel == b.kernel && a.error == b.error);
    settle(results.len(), &mut failed)?;
    Ok(Run::judged(results, failed, notes, Drift::says_no))
}

/// How the definitions of `name` in `object` differ between `from` and `to`.
pub fn drift(from: &Kernel, to: &Kernel, name: &str, object: &str) -> Result<Drift> {
    let (a, b) = (
        from.definitions(name, Some(object)),
        to.definitions(name, Some(object)),
    );
    // Definitions are told apart by their source files: a side with definitions and no file
    // proves nothing, and a drift that proves nothing must not read as "no drift".
    let known = |d: &[Candidate]| d.is_empty() || d.iter().any(|c| c.file.is_some());
    for (k, d) in [(from, &a), (to, &b)] {
        if !known(d) {
            return Err(crate::Error::bad_input(format!(
                "{}: names no source files, so its definitions of {name} cannot be told apart from another build's (an image's kallsyms names none): give its -dbg package or a vmlinux with debug info",
                k.path().display()
            )));
        }
    }
    let mut rows = Vec::new();
    let mut matched = vec![false; b.len()];
    for i in 0..a.len() {
        let id = identity(&a, i);
        let row = match &id {
            Some(id) => {
                let to_position = position_of(&b, id);
                if let Some(p) = to_position {
                    matched[p as usize - 1] = true;
                }
                DriftRow {
                    identity: Some(id.clone()),
                    from_position: Some(i as u64 + 1),
                    to_position,
                    status: match to_position {
                        None => DriftStatus::Gone,
                        Some(p) if p == i as u64 + 1 => DriftStatus::Same,
                        Some(_) => DriftStatus::Moved,
                    },
                }
            }
            None => DriftRow {
                identity: id,
                from_position: Some(i as u64 + 1),
                to_position: None,
                status: DriftStatus::Unknown,
            },
        };
        rows.push(row);
    }
    for (j, m) in matched.iter().enumerate() {
        if !m {
            let identity = identity(&b, j);
            rows.push(DriftRow {
                status: if identity.is_some() {
                    DriftStatus::New
                } else {
                    DriftStatus::Unknown
                },
                identity,
                from_position: None,
                to_position: Some(j as u64 + 1),
            });
        }
    }
    Ok(Drift {
        name: name.to_string(),
        object: object.to_string(),
        from_kernel: from.path().display().to_string(),
        to_kernel: to.path().display().to_string(),
        from: a,
        to: b,
        rows,
    })
}

/// A drift says no when a definition moved, is gone or is new.
impl Answer for Drift {
    fn says_no(&self) -> bool {
        self.moved()
    }
}
