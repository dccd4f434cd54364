//! Definitions and positions: every definition of a name with the position a patch's
//! `old_sympos` names it by and, given the kernel's `-dbg` package (or a vmlinux with debug
//! info), its source file and line; then the kernel's own verdict for the definition in one
//! file.
//!
//! ```text
//! cargo run -p klpsym --example definitions -- init_once fs/inode.c IMAGE.deb IMAGE-dbg.deb
//! ```
use klpsym::{KernelSet, LookupQuery, LookupVerdict, Options};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, file, sources @ ..] = args.as_slice() else {
        eprintln!("usage: definitions NAME FILE SOURCE...  (an image with its -dbg package, a vmlinux, a folder)");
        std::process::exit(2);
    };
    let sources: Vec<std::path::PathBuf> = sources.iter().map(Into::into).collect();
    // The packages of one release given together form one kernel: the image's positions,
    // the -dbg package's source files (joined by build id).
    let (kernels, failed, _) = KernelSet::open(&sources, &Options::new())?.into_parts();
    for f in &failed {
        eprintln!("{}: {}", f.kernel, f.error);
    }
    for kernel in &kernels {
        println!(
            "== {} ({})",
            kernel.path().display(),
            kernel.release().unwrap_or_default()
        );
        for c in kernel.sympos(name, None, None)?.candidates {
            println!(
                "{:>3}  {:<18}  {:<10}  {}",
                c.position,
                c.address_text(),
                c.object,
                c.file_text().unwrap_or_else(|| "?".into())
            );
        }
        // The definition in FILE: its position, and what the kernel resolves there.
        match kernel.lookup(&LookupQuery::new(name).file(file)) {
            Ok(a) if a.verdict == LookupVerdict::Found => println!(
                "{name} in {file}: position {} at {}",
                a.position.unwrap_or(0),
                a.address.map_or("(hidden)".into(), klpsym::hex)
            ),
            Ok(a) => println!(
                "{name} in {file}: {}",
                a.file_note.or(a.message).unwrap_or_default()
            ),
            // This kernel names no source files (an image without its -dbg package).
            Err(e) => println!("{name} in {file}: {e}"),
        }
    }
    Ok(())
}
