//! What people paste: an oops, a stack trace, a list of addresses. Every line is kept in its
//! order; each stack entry in it is a query ([`parse_query`]), the rest passes through.

use std::io::BufRead;

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::symbolize::{parse_query, AddrAnswer, Ended, Query};

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
}

impl Trace {
    /// Reads `r` line by line: each stack entry a query, other lines passed through; with
    /// `strict`, every non-empty line must be a stack entry (one that is not is a query that
    /// could not be read, naming its line).
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
            match parse_query(&line) {
                Err(_) if !strict => lines.push(TraceLine::Text(line)),
                q => lines.push(TraceLine::Query {
                    query: q.map_err(|e| e.context(format!("standard input line {}", i + 1))),
                    input: line,
                    line: Some(i + 1),
                }),
            }
        }
        Ok(Trace { lines })
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
        }
    }
}

impl Kernel {
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
