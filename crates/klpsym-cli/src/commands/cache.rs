//! `klpsym cache`: what the cache of decoded tables holds, and pruning it.

use crate::cli::CacheArgs;
use klpsym::Outcome;

use crate::output::{print_json, stdout, CliError};

pub fn run(args: &CacheArgs) -> Result<Outcome, CliError> {
    let prune = klpsym::CachePrune {
        days: args.prune,
        max_bytes: args.max_size,
    };
    let l = klpsym::cache_listing_with(args.cache_dir.clone(), &prune)?;
    if args.json {
        print_json(&l)?;
    } else {
        klpsym::render::cache_listing(&mut stdout(), &l)?;
    }
    Ok(Outcome::Ok)
}
