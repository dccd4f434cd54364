//! `klpsym info`: what a source holds.

use klpsym::Queries;

use crate::cli::InfoArgs;
use crate::options::{open_kernels, print_failure};
use crate::output::{print_json, stdout, CliError, Outcome};

pub fn run(args: &InfoArgs) -> Result<Outcome, CliError> {
    let (kernels, failed) = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    failed.iter().for_each(print_failure);
    let infos: Vec<klpsym::KernelInfo> = kernels.iter().map(klpsym::Kernel::info).collect();
    if args.source.json {
        if infos.len() == 1 {
            print_json(&infos[0])?;
        } else {
            print_json(&infos)?;
        }
        return Ok(Outcome::Ok);
    }
    let mut out = stdout();
    for i in &infos {
        klpsym::render::info(&mut out, i, args.objects)?;
    }
    Ok(Outcome::Ok)
}
