//! `klpsym dump`: the table back in /proc/kallsyms format.

use std::io::{BufWriter, Write};

use klpsym_core::resched::Resched;
use klpsym_core::{normalize_module_name, write_kallsyms, KallsymsWriter};

use crate::cli::DumpArgs;
use crate::output::{CliError, Outcome};
use crate::sources::load_all_few;

pub fn run(args: &DumpArgs) -> Result<Outcome, CliError> {
    let kernels = load_all_few(&args.source)?;
    if kernels.len() != 1 {
        return Err("dump takes exactly one --kernel".into());
    }
    if args.source.json {
        return Err(
            "dump writes /proc/kallsyms text; --json does not apply (use `klpsym info --json`)"
                .into(),
        );
    }
    let t = &kernels[0].table;
    let filter = match &args.object {
        None => None,
        Some(o) => {
            let name = normalize_module_name(o);
            Some(t.object_by_name(&name).ok_or_else(|| {
                format!("no object named '{name}' in {}", kernels[0].path.display())
            })?)
        }
    };
    let unplaced: Vec<&str> = t
        .objects()
        .iter()
        .filter(|o| o.relative && filter.is_none_or(|f| t.object_by_name(&o.name) == Some(f)))
        .map(|o| o.name.as_str())
        .collect();
    if !unplaced.is_empty() {
        eprintln!(
            "klpsym: warning: unplaced module(s) {}: their address column holds offsets in their sections (+0x... elsewhere), not load addresses; place them with --place-from KALLSYMS",
            unplaced.join(", ")
        );
    }
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        match filter {
            None => write_kallsyms(t, &mut WriteRef(out), &mut Resched::none()),
            Some(oid) => {
                let w = KallsymsWriter::new(t);
                let mut buf = Vec::with_capacity(1 << 16);
                for s in t.iter().filter(|s| s.object == oid) {
                    w.line(s.id.0, &mut buf);
                }
                out.write_all(&buf)
            }
        }
    };
    match &args.output {
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            write(&mut out)?;
            out.flush()?;
        }
        Some(path) => klpsym_loader::write_atomically(path, |f| write(f))?,
    }
    Ok(Outcome::Ok)
}

struct WriteRef<'a>(&'a mut dyn Write);

impl Write for WriteRef<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
