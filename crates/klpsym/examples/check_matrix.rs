//! Check a livepatch module against every kernel of a folder (images, packages, vmlinux
//! files) and print one JSON record per kernel: a kernel that cannot be read gets its own
//! record with the error, the others their verdicts; files of the folder that are not kernels
//! are passed over with a note.
//!
//! ```text
//! cargo run -p klpsym --example check_matrix -- lp.ko kernels/
//! ```
use std::sync::Arc;

use klpsym::{CheckOptions, Fleet, FleetItem, Options, Patch, Queries};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [patch, folder] = args.as_slice() else {
        eprintln!("usage: check_matrix PATCH.ko FOLDER");
        std::process::exit(2);
    };
    let opts = Options::new().queries(Queries::Names);
    let patch = Arc::new(Patch::read(patch, &opts)?);
    // One kernel at a time: memory stays that of one kernel, however many the folder holds.
    let fleet = Fleet::new(&[folder.into()], &opts.for_patch(&patch))?;
    for n in fleet.notes() {
        eprintln!("note: {}", n.text);
    }
    for item in fleet.check(patch, CheckOptions::default()) {
        let record = match item? {
            FleetItem::Checked(r) => serde_json::json!({
                "kernel": r.kernel,
                "verdict": r.verdict(),
                "problems": r.problem_summary(),
                "unchecked": r.unchecked,
            }),
            FleetItem::Failed(f) => serde_json::json!({
                "kernel": f.kernel,
                "error": f.error,
            }),
        };
        println!("{record}");
    }
    Ok(())
}
