// Open a kernel package, look a static function up by position, symbolize an address in it,
// and check a livepatch module against the kernel, with the `klpsym` crate alone:
//   cargo run -p klpsym --example quickstart -- linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb lp.ko [NAME]
use klpsym::{CheckOptions, LookupQuery, LookupVerdict, Options, Patch};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [package, patch, rest @ ..] = args.as_slice() else {
        eprintln!("usage: quickstart PACKAGE.deb PATCH.ko [NAME]");
        std::process::exit(2);
    };
    let name = rest.first().map_or("init_once", String::as_str);
    let opts = Options::new();

    // A Debian kernel package, read in place: its image's kallsyms, config and Module.symvers.
    let kernel = klpsym::open(package, &opts)?;
    println!("kernel: {}", kernel.release().unwrap_or_default());

    // Every definition of NAME with the position a patch's old_sympos names it by.
    let defs = kernel.sympos(name, None, None)?;
    for c in &defs.candidates {
        println!(
            "definition {} of {name}: {} in {}",
            c.position,
            c.address_text(),
            c.object
        );
    }

    // What klp_find_object_symbol(NAME, POS) answers: the last definition here.
    let pos = defs.candidates.len() as u64;
    let answer = kernel.lookup(&LookupQuery::new(name).sympos(pos))?;
    match (answer.verdict, answer.address) {
        (LookupVerdict::Found, Some(addr)) => {
            println!("lookup {name},{pos}: {}", klpsym::hex(addr));
            // %pS of an address 4 bytes into it.
            let pretty = kernel
                .describe_address("", addr + 4)
                .text
                .unwrap_or_default();
            println!("symbolize {:#x}: {pretty}", addr + 4);
        }
        _ => println!(
            "lookup {name},{pos}: {}",
            answer.message.unwrap_or_default()
        ),
    }

    // What the kernel will do with the livepatch module.
    let patch = Patch::read(patch, &opts)?;
    let run = klpsym::check(&patch, &[&kernel], &CheckOptions::default())?;
    for r in &run.results {
        println!("check: {:?}", r.verdict());
        for line in r
            .report
            .problems
            .iter()
            .filter(|p| p.reached)
            .flat_map(|p| &p.log)
        {
            println!("  kernel: {line}");
        }
    }
    for f in &run.failed {
        println!("check: not checked on {}: {}", f.kernel, f.error);
    }
    Ok(())
}
