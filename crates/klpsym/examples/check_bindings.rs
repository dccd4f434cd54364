//! Check a livepatch module against a kernel, with the bindings proven against the kernel it
//! was built for: each replaced function and klp relocation symbol, the definition it binds
//! (its source file and copy in it), and whether it is the one the patch was built for.
//!
//! ```text
//! cargo run -p klpsym --example check_bindings -- lp.ko TARGET BUILT-FOR
//! ```
//! TARGET and BUILT-FOR are kernels as the command takes them (an image with its `-dbg`
//! package in a folder, a vmlinux with debug info): source files give definitions identities.
use klpsym::{AsBuilt, CheckOptions, KernelSet, Options, Patch, PatchVerdictKind};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [patch, target, built_for] = args.as_slice() else {
        eprintln!("usage: check_bindings PATCH.ko TARGET BUILT-FOR");
        std::process::exit(2);
    };
    let opts = Options::new();
    let patch = Patch::read(patch, &opts)?;
    // Opened for this patch (a package's modules of its objects with the kernel); a kernel
    // that cannot be opened or checked is a failure row of the run.
    let kernels = KernelSet::open(&[target.into()], &opts.for_patch(&patch))?.into_kernels()?;
    let copts = CheckOptions {
        built_for: Some(built_for.into()),
        ..CheckOptions::default()
    };
    let run = klpsym::check_kernels(&patch, kernels, &copts)?;
    for r in &run.results {
        println!("{}: {:?}", r.kernel, r.verdict());
        for b in &r.bindings {
            let what = match &b.as_built {
                Some(AsBuilt::Same) => "as built".to_string(),
                Some(AsBuilt::Moved {
                    built_for,
                    intended_position,
                }) => {
                    format!("ANOTHER DEFINITION: built for {built_for}, position {intended_position} here")
                }
                Some(AsBuilt::Gone { built_for }) => {
                    format!("ANOTHER DEFINITION: {built_for} is not here")
                }
                Some(AsBuilt::Unproven { why }) => format!("not proven: {why}"),
                Some(AsBuilt::Assumed { why }) => format!("assumed, not proven: {why}"),
                // A comparison this program does not know yet: the library's words for it.
                Some(other) => other.detail(),
                None => "not compared".to_string(),
            };
            let identity = b
                .identity
                .as_ref()
                .map_or("?".to_string(), ToString::to_string);
            println!(
                "  {}:{},{} -> {identity}: {what}",
                b.object, b.name, b.sympos
            );
        }
        for u in &r.unchecked {
            println!("  not checked: {u}");
        }
        if r.verdict() == PatchVerdictKind::BindsAnotherDefinition {
            println!("  the patch loads and patches other code than it was built for");
        }
    }
    for f in &run.failed {
        println!("{}: not checked ({:?}): {}", f.kernel, f.kind, f.error);
    }
    // How the run ends, as the library decides it for every front end (0, 1, 2).
    std::process::exit(run.outcome.exit_code().into())
}
