//! `klpsym info`: what a source holds.

use klpsym::{ObjectKind, Queries};

use crate::cli::InfoArgs;
use crate::options::open_kernels;
use crate::output::{print_json, CliError, Outcome};

pub fn run(args: &InfoArgs) -> Result<Outcome, CliError> {
    let kernels = open_kernels(&args.source, &args.source.options(Queries::Many))?;
    let infos: Vec<klpsym::KernelInfo> = kernels.iter().map(klpsym::Kernel::info).collect();
    if args.source.json {
        if infos.len() == 1 {
            print_json(&infos[0])?;
        } else {
            print_json(&infos)?;
        }
        return Ok(Outcome::Ok);
    }
    for i in &infos {
        println!("source:          {}", i.kernel);
        println!("kind:            {}", i.kind);
        if let Some(f) = &i.format {
            println!("format:          {f}");
        }
        if let Some(v) = &i.version {
            println!("version:         {v}");
        }
        if let Some(b) = &i.banner {
            println!("banner:          {b}");
        }
        if let Some(v) = &i.vermagic {
            println!("vermagic:        {}", v.trim_end());
        }
        if let Some(b) = &i.build_id {
            println!("build id:        {b}");
        }
        if let Some(a) = &i.arch {
            println!("arch:            {a}");
        }
        println!("size:            {} bytes", i.bytes);
        println!(
            "symbols:         {} ({} distinct names)",
            i.symbols, i.distinct_names
        );
        println!(
            "addresses:       {}",
            if i.addresses_hidden {
                "hidden (all zero; see the warning above)".to_string()
            } else {
                format!(
                    "{} .. {}",
                    i.lowest_address.as_deref().unwrap_or("-"),
                    i.highest_address.as_deref().unwrap_or("-")
                )
            }
        );
        let mods = i
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Module)
            .count();
        let pseudo: Vec<&str> = i
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Pseudo)
            .map(|o| o.name.as_str())
            .collect();
        println!(
            "objects:         vmlinux ({} symbols), {mods} module(s){}",
            i.objects[0].symbols,
            if pseudo.is_empty() {
                String::new()
            } else {
                format!(", pseudo: {}", pseudo.join(" "))
            }
        );
        for (k, v) in &i.facts {
            println!("{:<16} {v}", format!("{k}:"));
        }
        for n in &i.notes {
            println!("note:            {n}");
        }
        if args.objects {
            for o in &i.objects {
                println!(
                    "  {:<24} {:>7} symbols{}",
                    o.name,
                    o.symbols,
                    if o.relative {
                        " (unplaced: +0x... offsets in their sections)"
                    } else {
                        ""
                    }
                );
            }
        }
        println!(
            "time:            read {:.1} ms, parse/decode {:.1} ms, indexes {:.1} ms{}",
            i.read_ms,
            i.parse_ms,
            i.index_ms,
            if i.cache_entry.is_some() {
                " (table from the cache)"
            } else {
                ""
            }
        );
    }
    Ok(Outcome::Ok)
}
