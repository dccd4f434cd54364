//! `klpsym cache`: what the cache of decoded tables holds, and pruning it.

use crate::cli::CacheArgs;
use crate::output::{print_json, stdout, CliError, Outcome};

pub fn run(args: &CacheArgs) -> Result<Outcome, CliError> {
    let l = klpsym::cache_listing(args.cache_dir.clone(), args.prune)?;
    if args.json {
        print_json(&l)?;
    } else {
        klpsym::render::cache_listing(&mut stdout(), &l)?;
    }
    Ok(Outcome::Ok)
}
