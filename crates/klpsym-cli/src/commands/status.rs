//! `klpsym status`: the livepatches loaded on the running system, their functions resolved
//! against the kernel's symbols (see docs/cli.md).

use klpsym::Queries;

use crate::cli::StatusArgs;
use crate::options::{open_kernels, print_failure};
use crate::output::{print_json, stdout, CliError, Outcome};

pub fn run(args: &StatusArgs) -> Result<Outcome, CliError> {
    let loaded = klpsym::loaded_livepatches(&args.sysfs)?;
    let (kernels, failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    failed.iter().for_each(print_failure);
    let [k, ..] = kernels.as_slice() else {
        return Err("status: no kernel could be opened".into());
    };
    let s = klpsym::status(&loaded, k);
    let ok = s.all_resolved();
    if args.source.json {
        print_json(&s)?;
    } else {
        klpsym::render::status(&mut stdout(), &s)?;
    }
    Ok(Outcome::all_ok(ok))
}
