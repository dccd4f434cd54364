//! `klpsym info`: what a source holds.

use klpsym::{Outcome, Queries};

use crate::cli::InfoArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, print_json_list, stdout, CliError};

pub fn run(args: &InfoArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let run = kernels.answer(|k| Ok(k.info()))?;
    print_run(&run.notes, &run.failed);
    let infos = &run.results;
    if args.source.json {
        if infos.len() == 1 {
            print_json(&infos[0])?;
        } else {
            print_json_list(infos)?;
        }
        return Ok(run.outcome);
    }
    let mut out = stdout();
    for i in infos {
        klpsym::render::info(&mut out, i, args.objects)?;
    }
    Ok(run.outcome)
}
