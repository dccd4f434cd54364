//! `klpsym check`: what the kernel would do with a livepatch module (see docs/cli.md).

use std::io::Write;
use std::sync::Arc;

use serde::Serialize;

use klpsym::{CheckRun, FleetItem, KernelCheck, KernelFailure, Outcome, Patch, Queries, Resched};

use crate::cli::CheckArgs;
use crate::options::{open_kernels, print_failure, print_notes, print_run};
use crate::output::{print_json_with, stdout, CliError};

#[derive(Debug, Serialize)]
struct CheckJson<'a> {
    patch: &'a str,
    results: &'a [KernelCheck],
    failed: &'a [KernelFailure],
}

/// One line of `--jsonl`: a kernel's result or its failure, with the patch.
#[derive(Serialize)]
struct FleetLine<'a, T: Serialize> {
    schema: u32,
    patch: &'a str,
    #[serde(flatten)]
    line: &'a T,
}

impl CheckArgs {
    fn options(&self) -> klpsym::CheckOptions {
        klpsym::CheckOptions {
            target: self.target.options(),
            section_bases: self.section_bases.clone(),
            sections_from: self.sections_from.clone(),
            explain: self.explain,
            hold_warn_ms: self.hold_warn_ms,
            visit_ns: self.visit_ns,
            built_for: self.built_for.clone(),
            force: self.force,
            coverage: !self.no_coverage,
            strict: self.strict,
        }
    }
}

pub fn run(args: &CheckArgs) -> Result<Outcome, CliError> {
    let opts = args.source.options(Queries::Names);
    let patch = Patch::read(&args.patch, &opts)?;
    // Opened for this patch: a package's modules of its objects are read with the kernel.
    let opts = opts.for_patch(&patch);
    if args.jsonl || args.shard.is_some() {
        return run_fleet(args, Arc::new(patch), &opts);
    }
    let kernels = open_kernels(&args.source, &opts)?;
    let run = klpsym::check_kernels(&patch, kernels, &args.options())?;
    print_run(&run.notes, &run.failed);
    let mut rs = opts.resched();
    render(args, &run, &mut rs)?;
    strict_note(args, run.results.iter().any(KernelCheck::incomplete));
    let outcome = run.outcome;
    run.free(&mut rs)?;
    Ok(outcome)
}

/// The reports (each kernel's warnings on stderr), then the matrix of several; or the JSON.
fn render(args: &CheckArgs, run: &CheckRun, rs: &mut Resched) -> Result<(), CliError> {
    if args.source.json {
        run.results.iter().for_each(|r| print_notes(&r.notes));
        let doc = CheckJson {
            patch: &run.patch,
            results: &run.results,
            failed: &run.failed,
        };
        return print_json_with(&doc, rs);
    }
    let mut out = stdout();
    for r in &run.results {
        klpsym::render::check_report(&mut out, r, args.explain, run.placed, rs)?;
        out.flush()?;
        print_notes(&r.warnings());
    }
    if run.results.len() + run.failed.len() > 1 {
        klpsym::render::matrix(&mut out, run, rs)?;
    }
    Ok(())
}

/// `check --jsonl` / `--shard`: the kernels one at a time (`--jobs N`: N at a time), each
/// line printed when its kernel is checked.
fn run_fleet(
    args: &CheckArgs,
    patch: Arc<Patch>,
    opts: &klpsym::Options,
) -> Result<Outcome, CliError> {
    let shard: klpsym::Shard = match &args.shard {
        Some(s) => s.parse()?,
        None => klpsym::Shard::ALL,
    };
    if args.source.kernels.is_empty() {
        return Err(klpsym::Error::usage(
            "--jsonl and --shard check the kernels given with --kernel (files, folders); none was given",
        )
        .into());
    }
    let fleet = klpsym::Fleet::new(&args.source.kernels, opts)?
        .shard(shard)
        .jobs(args.jobs);
    print_notes(fleet.notes());
    let patch_name = args.patch.display().to_string();
    let mut outcome = Outcome::Ok;
    let mut incomplete = false;
    for item in fleet.check(patch, args.options()) {
        let item = item?;
        outcome = outcome.and(item.outcome(args.strict));
        match item {
            FleetItem::Checked(r) => {
                print_notes(&r.warnings());
                incomplete |= r.incomplete();
                print_line(&FleetLine {
                    schema: klpsym::render::JSON_SCHEMA,
                    patch: &patch_name,
                    line: &r,
                })?;
            }
            FleetItem::Failed(f) => {
                print_failure(&f);
                print_line(&FleetLine {
                    schema: klpsym::render::JSON_SCHEMA,
                    patch: &patch_name,
                    line: &f,
                })?;
            }
        }
    }
    strict_note(args, incomplete);
    Ok(outcome)
}

/// With --strict, says why a run whose kernels left something open ends with exit 1.
fn strict_note(args: &CheckArgs, incomplete: bool) {
    if args.strict && incomplete {
        eprintln!("klpsym: error: --strict: not everything that decides the load, or every copy of what the patch replaces, was checked (see above)");
    }
}

/// One JSON line, written whole.
fn print_line<T: Serialize>(v: &T) -> Result<(), CliError> {
    let mut line = serde_json::to_vec(v)?;
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&line)?;
    out.flush()?;
    Ok(())
}
