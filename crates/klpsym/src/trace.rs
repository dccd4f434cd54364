//! What people paste: an oops, a stack trace, a list of addresses. Every line is kept in its
//! order; each stack entry in it (every form the kernels print: see `stack_entry.rs`) is a
//! query, a line shaped as one that cannot be read is marked, the rest passes through.

use std::io::BufRead;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kernel::{Kernel, Note};
use crate::run::{Answer, Kernels, Outcome, Run};
use crate::stack_entry::{arch_of, parse_line, parse_query, text_arch, Line, Query};
use crate::symbolize::{AddrAnswer, Ended};
use crate::version::KernelVersion;

/// One line of a [`Trace`].
#[derive(Debug)]
pub enum TraceLine {
    /// A stack entry (an address, `[<address>]`, `name+0xoff/0xsize [module]`), or a line
    /// that was to be one and could not be read.
    Query {
        /// As given (a whole line, timestamp and `?` kept).
        input: String,
        /// Its line number in the input (from 1), `None` for an argument.
        line: Option<usize>,
        /// What it asks, or why it could not be read.
        query: Result<Query>,
    },
    /// A line without a stack entry, passed through as it is.
    Text(String),
}

/// A pasted trace, or arguments: its lines in order.
#[derive(Debug, Default)]
pub struct Trace {
    /// The lines.
    pub lines: Vec<TraceLine>,
    /// True when the queries are arguments ([`Trace::from_args`]): one that cannot be read
    /// is a question not asked, where a pasted trace's is an entry that cannot be decoded.
    from_args: bool,
}

impl Trace {
    /// Reads `r` line by line: each stack entry a query, a line shaped as one that cannot be
    /// read a query that could not be read (marked in place), other lines passed through;
    /// with `strict`, every non-empty line must be a stack entry (one that is not is a query
    /// that could not be read, naming its line).
    pub fn read(r: impl BufRead, strict: bool) -> Result<Trace> {
        let mut lines = Vec::new();
        for (i, line) in r.split(b'\n').enumerate() {
            let line = String::from_utf8_lossy(&line.map_err(Error::from)?)
                .trim_end_matches('\r')
                .to_string();
            if line.trim().is_empty() {
                if !strict {
                    lines.push(TraceLine::Text(line));
                }
                continue;
            }
            let query = match parse_line(&line) {
                Line::Other if !strict => {
                    lines.push(TraceLine::Text(line));
                    continue;
                }
                Line::Entry(q) => Ok(q),
                Line::Undecodable(why) => Err(Error::bad_input(why)),
                Line::Other => parse_query(&line),
            };
            lines.push(TraceLine::Query {
                query: query.map_err(|e| e.context(format!("standard input line {}", i + 1))),
                input: line,
                line: Some(i + 1),
            });
        }
        Ok(Trace {
            lines,
            from_args: false,
        })
    }

    /// Each argument a query.
    pub fn from_args(args: &[String]) -> Trace {
        let query = |a: &String| TraceLine::Query {
            input: a.clone(),
            line: None,
            query: parse_query(a),
        };
        Trace {
            lines: args.iter().map(query).collect(),
            from_args: true,
        }
    }
}

impl Trace {
    /// The kernel version the trace's own header line tells (`CPU: 0 PID: 1 Comm: x Not
    /// tainted 6.1.0-57-amd64 #1 Debian 6.1.192-3`), with that line's number (from 1; for
    /// arguments, their order). The first such line.
    pub fn kernel_version(&self) -> Option<(KernelVersion, usize)> {
        self.lines.iter().enumerate().find_map(|(i, l)| {
            let (text, n) = match l {
                TraceLine::Query { input, line, .. } => (input.as_str(), line.unwrap_or(i + 1)),
                TraceLine::Text(t) => (t.as_str(), i + 1),
            };
            KernelVersion::from_oops_line(text).map(|v| (v, n))
        })
    }

    /// The architecture the trace is from, with what tells it (see `stack_entry::arch_of`):
    /// its lines (`RIP: `, `Call Trace:`... or `pc : `, `Call trace:`...), else the kernel
    /// text addresses it asks about. `None` when nothing tells.
    pub fn arch(&self) -> Option<(&'static str, String)> {
        let lines = self.lines.iter().map(|l| match l {
            TraceLine::Query { input, .. } => input.as_str(),
            TraceLine::Text(t) => t.as_str(),
        });
        let addrs = self.lines.iter().filter_map(|l| match l {
            TraceLine::Query {
                query: Ok(Query::Address(a)),
                ..
            } => Some(*a),
            _ => None,
        });
        arch_of(lines, addrs)
    }

    /// When the trace is of another architecture than `kernel`: says which, and why it shows
    /// (the kernel's answers are then not the trace's).
    pub fn arch_mismatch(&self, kernel: &Kernel) -> Option<String> {
        let (trace, why) = self.arch()?;
        let k = kernel.arch()?;
        (trace != k).then(|| {
            format!(
                "the trace is from an {trace} kernel ({why}), {} is {k}: its answers are not this trace's",
                kernel.path().display()
            )
        })
    }
}

impl Kernel {
    /// The kernel's architecture (`x86_64`, `aarch64`): from its source (an image's or ELF's
    /// header), else from where its text lies (`_text`'s address).
    pub fn arch(&self) -> Option<String> {
        if let Some(a) = self.facts().arch.as_ref().filter(|a| *a != "unknown") {
            return Some(a.clone());
        }
        let t = self.table();
        let text = t
            .by_name("_text")
            .find(|s| s.object == klpsym_core::ObjectId::VMLINUX)?;
        text_arch(text.addr).map(str::to_string)
    }

    /// Takes the version `trace`'s own header line tells (`CPU: 0 PID: 1 Comm: x Not tainted
    /// 6.1.0-57-amd64 #1 Debian 6.1.192-3`) for the answers that depend on it, where nothing
    /// stated it and the source does not tell it whole (see [`Kernel::kernel_version`]). Says
    /// so in a note; warns when the trace is of another version than this kernel's.
    pub fn hear_trace(&mut self, trace: &Trace) -> Option<Note> {
        let (heard, line) = trace.kernel_version()?;
        let (own, source) = self.kernel_version();
        if let Some(own) = own {
            let differs = own.series() != heard.series()
                || own
                    .sublevel
                    .zip(heard.sublevel)
                    .is_some_and(|(a, b)| a != b);
            if differs {
                return Some(Note::warning(format!(
                    "the trace is from kernel {heard} (its line {line}), {} is {own} ({}): its answers are not this trace's",
                    self.path().display(),
                    source.describe()
                )));
            }
            if own.sublevel.is_some() || heard.sublevel.is_none() {
                return None;
            }
        }
        self.set_heard_version(heard, line);
        Some(Note::info(format!(
            "{}: kernel version {heard}, from the trace's line {line}",
            self.path().display()
        )))
    }

    /// The answer to every query of `trace` (as [`Kernel::answer_with`]), in order, and how
    /// the worst one ended.
    pub fn answer_trace(&self, trace: &Trace, return_addresses: bool) -> (Vec<AddrAnswer>, Ended) {
        let mut worst = Ended::Found;
        let mut out = Vec::new();
        for l in &trace.lines {
            let TraceLine::Query { input, line, query } = l else {
                continue;
            };
            let (mut r, e) = self.answer_with(input, query, return_addresses);
            r.line = *line;
            worst = worst.max(e);
            out.push(r);
        }
        (out, worst)
    }
}

/// One kernel's answers to a [`Trace`].
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct TraceAnswers {
    /// The kernel's source.
    pub kernel: String,
    /// When the trace is of another architecture than the kernel: which, and how it shows.
    pub arch_mismatch: Option<String>,
    /// What the answers took from the trace or assumed (the kernel version).
    pub notes: Vec<Note>,
    /// Every query's answer, in the trace's order.
    pub addresses: Vec<AddrAnswer>,
    /// How the worst query ended (a trace of another architecture: at best not found).
    #[serde(skip)]
    pub ended: Ended,
}

/// Answers say no when a query found nothing, could not be read, or the trace is another
/// architecture's.
impl Answer for TraceAnswers {
    fn says_no(&self) -> bool {
        self.ended != Ended::Found
    }
}

impl Kernel {
    /// Every query of `trace` answered on this kernel, as `%pS` does (return addresses with
    /// `%pB` when `return_addresses`), with file:line where the kernel has line tables and
    /// `source_lines` is asked. The trace's own header line tells the kernel version where
    /// nothing else did. A kernel whose addresses are hidden cannot answer.
    pub fn symbolize_trace(
        &mut self,
        trace: &Trace,
        return_addresses: bool,
        source_lines: bool,
    ) -> Result<TraceAnswers> {
        self.require_addresses()?;
        let mut notes: Vec<Note> = self.hear_trace(trace).into_iter().collect();
        let k = &*self;
        let (mut addresses, mut ended) = k.answer_trace(trace, return_addresses);
        notes.extend(k.version_assumed(&addresses));
        // A trace of another architecture: every answer is this kernel's, none the trace's.
        let arch_mismatch = trace.arch_mismatch(k);
        if let Some(m) = &arch_mismatch {
            notes.push(Note::warning(m.clone()));
            ended = ended.max(Ended::NotFound);
        }
        // Module frames find their debug files even where the vmlinux has no DWARF (a saved
        // kallsyms with an unstripped `.ko`): the same rule as Python's `source_lines`.
        if source_lines {
            k.add_source_lines(&mut addresses, return_addresses)?;
        }
        Ok(TraceAnswers {
            kernel: k.path().display().to_string(),
            arch_mismatch,
            notes,
            addresses,
            ended,
        })
    }
}

/// `trace` answered by every kernel, as one run ([`Kernel::symbolize_trace`] each; a kernel
/// that cannot answer, its addresses hidden, is a failure row and the others answer). A query
/// that cannot be read is marked in place: in a pasted trace it is an entry that could not be
/// decoded, an answer that says no; among arguments it is a question that was not asked, and
/// the run ends [`Outcome::Failed`]. Either way the run's notes say so.
pub fn symbolize_trace(
    kernels: Kernels,
    trace: &Trace,
    return_addresses: bool,
    source_lines: bool,
) -> Result<Run<TraceAnswers>> {
    let mut run = kernels.answer(|k| k.symbolize_trace(trace, return_addresses, source_lines))?;
    if run.results.iter().any(|r| r.ended == Ended::Unreadable) {
        if trace.from_args {
            run.notes.push(Note::error(
                "some argument could not be read (marked in place); the rest was answered",
            ));
            run.at_least(Outcome::Failed);
        } else {
            run.notes.push(Note::error(
                "some stack entries could not be decoded (marked in place); the rest was answered",
            ));
        }
    }
    Ok(run)
}
