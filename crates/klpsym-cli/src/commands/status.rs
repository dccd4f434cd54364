//! `klpsym status`: the livepatches loaded on the running system, their functions resolved
//! against the kernel's symbols (see crates/klpsym-livepatch/CLI.md).

use klpsym::Queries;

use crate::cli::StatusArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

pub fn run(args: &StatusArgs) -> Result<Outcome, CliError> {
    let loaded = klpsym::loaded_livepatches(&args.sysfs)?;
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let s = klpsym::status(&loaded, &kernels[0]);
    let ok = s.all_resolved();
    if args.source.json {
        print_json(&s)?;
        return Ok(Outcome::all_ok(ok));
    }
    if s.patches.is_empty() {
        println!("no livepatch loaded");
    }
    for p in &s.patches {
        let b = |v: Option<bool>| v.map_or("?", |x| if x { "1" } else { "0" });
        println!(
            "{}  enabled={} transition={}",
            p.name,
            b(p.enabled),
            b(p.transition)
        );
        for o in &p.objects {
            for f in &o.funcs {
                let what = if !o.loaded {
                    "module not loaded".to_string()
                } else {
                    match (&f.address, &f.message) {
                        (Some(a), _) => a.clone(),
                        (None, Some(m)) => format!("livepatch: {m}"),
                        (None, None) => "(address hidden)".to_string(),
                    }
                };
                let entry = format!("{},{}", f.name, f.sympos);
                println!("  {:<10} {entry:<32} -> {what}", o.name);
            }
        }
    }
    Ok(Outcome::all_ok(ok))
}
