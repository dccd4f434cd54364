//! Symbolize a batch of addresses as the kernel's `%pS` prints them: one call for the whole
//! batch, numbers in, answers out (`name+0xoff/0xsize [module]`, or the number itself where
//! the kernel has no symbol).
//!
//! ```text
//! cargo run -p klpsym --example symbolize -- KERNEL ADDRESS...
//! grep -o 'ffffffff[0-9a-f]*' oops.txt | cargo run -p klpsym --example symbolize -- KERNEL
//! ```
use std::io::BufRead;

use klpsym::{parse_addr, Options, SymbolizeOutcome};

fn main() -> Result<(), klpsym::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, addrs @ ..] = args.as_slice() else {
        eprintln!("usage: symbolize KERNEL [ADDRESS...]  (addresses from standard input when none is given)");
        std::process::exit(2);
    };
    let kernel = klpsym::open(source, &Options::new())?;
    let mut batch: Vec<u64> = addrs.iter().filter_map(|a| parse_addr(a)).collect();
    if addrs.is_empty() {
        for line in std::io::stdin().lock().lines() {
            batch.extend(parse_addr(&line?));
        }
    }
    for (addr, outcome) in batch.iter().zip(kernel.symbolize_batch(&batch)?) {
        match outcome {
            SymbolizeOutcome::Found(s) => println!("{addr:#018x} {s}"),
            // %pS prints the number where no symbol is.
            _ => println!("{addr:#018x} {addr:#x}"),
        }
    }
    Ok(())
}
