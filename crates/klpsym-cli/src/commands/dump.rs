//! `klpsym dump`: the table back in /proc/kallsyms format.

use std::io::Write;

use klpsym::{Outcome, Queries};

use crate::cli::DumpArgs;
use crate::options::{open_kernels, print_notes};
use crate::output::{stdout, CliError};

pub fn run(args: &DumpArgs) -> Result<Outcome, CliError> {
    if args.source.json {
        return Err(
            "dump writes /proc/kallsyms text; --json does not apply (use `klpsym info --json`)"
                .into(),
        );
    }
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Few))?;
    let ([k], []) = (kernels.kernels.as_slice(), kernels.failed()) else {
        return Err("dump takes exactly one --kernel".into());
    };
    print_notes(kernels.notes());
    let object = args.object.as_deref();
    let unplaced = k.unplaced_objects(object)?;
    if !unplaced.is_empty() {
        eprintln!(
            "klpsym: warning: unplaced module(s) {}: their address column holds offsets in their sections (+0x... elsewhere), not load addresses; place them with --place-from KALLSYMS",
            unplaced.join(", ")
        );
    }
    match &args.output {
        None => {
            let mut out = stdout();
            k.write_kallsyms(object, &mut out)?;
            out.flush()?;
        }
        Some(path) => klpsym::write_atomically(path, |f| {
            k.write_kallsyms(object, f)
                .map_err(|e| std::io::Error::other(e.to_string()))
        })?,
    }
    Ok(Outcome::Ok)
}
