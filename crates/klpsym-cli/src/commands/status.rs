//! `klpsym status`: the livepatches loaded on the running system, their functions resolved
//! against the kernel's symbols (see docs/cli.md).

use klpsym::{Outcome, Queries};

use crate::cli::StatusArgs;
use crate::options::{open_kernels, print_run};
use crate::output::{print_json, print_json_list, stdout, CliError};

pub fn run(args: &StatusArgs) -> Result<Outcome, CliError> {
    let loaded = klpsym::loaded_livepatches(&args.sysfs)?;
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    // Each kernel given answers for the loaded patches (one, the running kernel, by default).
    let run = kernels.answer(|k| Ok(klpsym::status(&loaded, k)))?;
    print_run(&run.notes, &run.failed);
    if args.source.json {
        match run.results.as_slice() {
            [one] => print_json(one)?,
            all => print_json_list(all)?,
        }
    } else {
        let mut out = stdout();
        for s in &run.results {
            klpsym::render::status(&mut out, s)?;
        }
    }
    Ok(run.outcome)
}
