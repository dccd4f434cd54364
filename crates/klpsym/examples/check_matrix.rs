//! Check a livepatch module against every kernel of a folder (images, packages, vmlinux
//! files) and print one JSON record per kernel: a kernel that cannot be read gets its own
//! record with the error, the others their verdicts.
//!
//! ```text
//! cargo run -p klpsym --example check_matrix -- lp.ko kernels/
//! ```
use klpsym::{CheckOptions, Options, Patch, Queries};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [patch, folder] = args.as_slice() else {
        eprintln!("usage: check_matrix PATCH.ko FOLDER");
        std::process::exit(2);
    };
    let mut opts = Options::new().queries(Queries::Names);
    let copts = CheckOptions::default();
    let patch = Patch::read(patch, &opts)?;
    opts.package_modules = patch.needs_modules();
    opts.package_module_names = patch.module_objects();
    for opened in klpsym::open_all(&[folder.into()], &opts)? {
        let record = match opened.kernel {
            Ok(kernel) => {
                let run = klpsym::check(&patch, &[&kernel], &copts)?;
                let r = &run.results[0];
                serde_json::json!({
                    "kernel": r.kernel,
                    "verdict": r.report.verdict.kind,
                    "problems": r.report.problems.iter().filter(|p| p.reached).map(|p| &p.kind).collect::<Vec<_>>(),
                })
            }
            Err(e) => serde_json::json!({
                "kernel": opened.source.display().to_string(),
                "error": e.to_string(),
            }),
        };
        println!("{record}");
    }
    Ok(())
}
