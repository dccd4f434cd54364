//! `klpsym check`: what the kernel would do with a livepatch module (see docs/cli.md).

use std::io::Write;
use std::sync::Arc;

use serde::Serialize;

use klpsym::{CheckRun, FleetItem, KernelCheck, KernelFailure, Patch, Queries, Resched};

use crate::cli::CheckArgs;
use crate::options::{open_kernels, print_failure, print_notes};
use crate::output::{print_json_with, stdout, CliError, Outcome};

#[derive(Debug, Serialize)]
struct CheckJson<'a> {
    patch: &'a str,
    results: &'a [KernelCheck],
    failed: &'a [KernelFailure],
}

/// One line of `--jsonl`: a kernel's result or its failure, with the patch.
#[derive(Serialize)]
struct FleetLine<'a, T: Serialize> {
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
        }
    }
}

/// How a run over kernels ends: 1 when one refuses the patch, binds another definition or
/// leaves a copy of a replaced function running the old code, or, with `--strict`, when
/// something that decides the load, or a replaced function's copies, was not checked.
#[derive(Default)]
struct Tally {
    refused: bool,
    misbinds: bool,
    partial: bool,
    incomplete: bool,
}

impl Tally {
    fn add(&mut self, r: &KernelCheck) {
        self.refused |= r.refused();
        self.misbinds |= r.binds_another();
        self.partial |= r.partial_coverage();
        self.incomplete |= r.incomplete();
    }

    fn outcome(&self, strict: bool) -> Outcome {
        if strict && self.incomplete && !self.refused {
            eprintln!("klpsym: error: --strict: not everything that decides the load, or every copy of what the patch replaces, was checked (see above)");
        }
        Outcome::all_ok(
            !(self.refused || self.misbinds || self.partial || (strict && self.incomplete)),
        )
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
    let (kernels, unopened) = open_kernels(&args.source, &opts)?;
    let refs: Vec<&klpsym::Kernel> = kernels.iter().collect();
    let mut run = klpsym::check(&patch, &refs, &args.options())?;
    run.failed.splice(0..0, unopened);
    run.failed.iter().for_each(print_failure);
    let mut rs = opts.resched();
    let mut tally = Tally::default();
    run.results.iter().for_each(|r| tally.add(r));
    render(args, &run, &mut rs)?;
    run.free(&mut rs)?;
    Ok(tally.outcome(args.strict))
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
    let mut tally = Tally::default();
    for item in fleet.check(patch, args.options()) {
        match item? {
            FleetItem::Checked(r) => {
                print_notes(&r.warnings());
                tally.add(&r);
                print_line(&FleetLine {
                    patch: &patch_name,
                    line: &r,
                })?;
            }
            FleetItem::Failed(f) => {
                print_failure(&f);
                print_line(&FleetLine {
                    patch: &patch_name,
                    line: &f,
                })?;
            }
        }
    }
    Ok(tally.outcome(args.strict))
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
