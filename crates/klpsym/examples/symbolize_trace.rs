//! Symbolize a pasted kernel stack trace, line by line, against a kernel (the running one by
//! default): every line passes through, stack entries get `%pS`.
//!
//! ```text
//! dmesg | cargo run -p klpsym --example symbolize_trace -- [KERNEL]
//! ```
use std::io::BufRead;

use klpsym::{parse_query, Options, Query};

fn main() -> Result<(), klpsym::Error> {
    let opts = Options::new();
    let kernel = match std::env::args().nth(1) {
        Some(source) => klpsym::open(source, &opts)?,
        None => klpsym::open_running(&opts)?,
    };
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let decoded = match parse_query(&line) {
            Ok(Query::Address(a)) => kernel.describe_address(&line, a).text,
            Ok(Query::Symbol {
                name,
                offset,
                size,
                module,
            }) => kernel
                .resolve_symbol(&name, offset, size, module.as_deref())
                .ok()
                .map(|hits| format!("{:#x}", hits[0].0)),
            Err(_) => None,
        };
        match decoded {
            Some(d) => println!("{line}  => {d}"),
            None => println!("{line}"),
        }
    }
    Ok(())
}
