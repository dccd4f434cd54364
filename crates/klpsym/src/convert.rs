//! An ordinary livepatch module turned into one with klp relocations for the target kernel:
//! every reference to a symbol the target does not export from vmlinux becomes a
//! `.klp.sym.OBJ.NAME,POS` symbol in a `.klp.rela.OBJ.SECTION` section, with the position the
//! target needs.

use std::io::Write;
use std::path::{Path, PathBuf};

use klpsym_core::{bulk, Resched};
use klpsym_livepatch::{convert_with, ConvertError, ConvertReport, LivepatchModule, Pin};

use crate::check::Patch;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, Note};
use crate::target::{Layouts, TargetFacts, TargetOptions};

/// How to convert.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// What is known of the target beyond its symbols (the same as for `check`).
    pub target: TargetOptions,
    /// Choices of definitions for names the target defines more than once.
    pub pins: Vec<Pin>,
}

/// How a conversion ended.
#[derive(Debug)]
pub enum Converted {
    /// Written; what was converted.
    Written(ConvertReport),
    /// Refused, with every reason (ambiguous names to pin, names the target lacks...).
    Refused(Vec<String>),
}

/// The outcome of [`convert`] with what was said along the way.
#[derive(Debug)]
#[non_exhaustive]
pub struct ConvertRun {
    /// Written or refused.
    pub outcome: Converted,
    /// Notes and warnings (layouts, the target's facts, the conversion's own warnings).
    pub notes: Vec<Note>,
}

impl ConvertRun {
    /// How the run ends: written is [`crate::Outcome::Ok`], refused [`crate::Outcome::No`].
    pub fn run_outcome(&self) -> crate::Outcome {
        crate::Outcome::of(matches!(self.outcome, Converted::Written(_)))
    }
}

/// Reads pins from a file, one per line (`[OBJ:]NAME=POS` or `[OBJ:]NAME@PATH`); `#` starts
/// a comment. A line that is not UTF-8 or not a pin is an error naming it.
pub fn read_pins_file(path: &Path, limit: u64, rs: &mut Resched) -> Result<Vec<Pin>> {
    let bytes = klpsym_io::read_bounded(path, limit, rs)?;
    let mut pins = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        rs.tick()?;
        let line = std::str::from_utf8(line).map_err(|e| {
            Error::bad_input(format!("{}:{}: not UTF-8: {e}", path.display(), i + 1))
        })?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = line.split('#').next().unwrap_or("").trim();
        if !line.is_empty() {
            pins.push(
                Pin::parse(line)
                    .map_err(|e| Error::bad_input(format!("{}:{}: {e}", path.display(), i + 1)))?,
            );
        }
    }
    bulk::free_with_points(bytes, rs)?;
    Ok(pins)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Writes `bytes` in 64 KiB writes with a reschedule point between them.
fn write_in_steps(w: &mut dyn Write, bytes: &[u8], rs: &mut Resched) -> std::io::Result<()> {
    for c in bytes.chunks(64 << 10) {
        w.write_all(c)?;
        rs.tick_step()
            .map_err(|c| std::io::Error::new(std::io::ErrorKind::Interrupted, c))?;
    }
    Ok(())
}

/// Converts the module at `input` for `kernel` and writes the result to `output` (through a
/// temporary file renamed into place; `input` is never modified). The target is gathered as
/// `check` gathers it: the struct layouts of its BTF (`--btf`, the kernel's own, or the
/// fallback), the
/// configuration, the module tree and its Module.symvers. A name vmlinux exports stays an
/// ordinary relocation; a name a module exports becomes a klp relocation against that module
/// (position 0), as the kernel's klp-build does, so the patch loads whether or not the module
/// is loaded.
pub fn convert(
    input: &Path,
    output: &Path,
    kernel: &Kernel,
    copts: &ConvertOptions,
) -> Result<ConvertRun> {
    not_the_input(input, output)?;
    let opts = kernel.options();
    let mut rs = opts.resched();
    let bytes = crate::check::read_module(input, opts.max_input_size, &mut rs)?;
    let run = convert_bytes(input, &bytes, output, kernel, copts)?;
    // A module is megabytes: freed in steps too.
    bulk::free_with_points(bytes, &mut rs)?;
    Ok(run)
}

/// [`convert`] of a module already read (the [`Patch`] that shaped what was opened,
/// [`crate::Options::for_patch`]): the module is not read again.
pub fn convert_patch(
    module: &Patch,
    output: &Path,
    kernel: &Kernel,
    copts: &ConvertOptions,
) -> Result<ConvertRun> {
    not_the_input(&module.path, output)?;
    convert_bytes(&module.path, &module.bytes, output, kernel, copts)
}

fn not_the_input(input: &Path, output: &Path) -> Result<()> {
    if same_file(input, output) {
        return Err(Error::usage(
            "the output path is the input: convert never modifies its input",
        ));
    }
    Ok(())
}

fn convert_bytes(
    input: &Path,
    bytes: &[u8],
    output: &Path,
    kernel: &Kernel,
    copts: &ConvertOptions,
) -> Result<ConvertRun> {
    let opts = kernel.options();
    let mut rs = opts.resched();
    let rs = &mut rs;
    let layouts = Layouts::for_kernel(&copts.target, kernel)?;
    let mut notes = layouts.notes.clone();
    // The module's objects, and the objects pins name, may be modules that are not loaded:
    // their .ko is offered.
    let mut names: Vec<String> = copts.pins.iter().filter_map(|p| p.object.clone()).collect();
    let module = LivepatchModule::parse_with(bytes, &layouts.layouts, rs)
        .map_err(|e| Error::from(e).context(input.display()))?;
    if let Ok(p) = &module.patch {
        names.extend(p.objects.iter().map(|o| o.object_name().to_string()));
    }
    let undefined: Vec<String> = module
        .elf
        .symbols
        .iter()
        .filter(|s| s.index != 0 && s.is_undefined() && !s.name.is_empty())
        .map(|s| s.name.clone())
        .collect();
    let arch = module.arch;
    module.drop_with_points(rs)?;
    // Modules that export what the module refers to are offered too.
    let facts = {
        let first = TargetFacts::gather(kernel, &copts.target, &layouts, &names, rs)?;
        let exporters: Vec<String> = undefined
            .iter()
            .filter_map(|n| first.exporter(n))
            .filter(|m| *m != "vmlinux" && !names.iter().any(|x| x == m))
            .map(str::to_string)
            .collect();
        if exporters.is_empty() {
            first
        } else {
            names.extend(exporters);
            names.sort();
            names.dedup();
            TargetFacts::gather(kernel, &copts.target, &layouts, &names, rs)?
        }
    };
    notes.extend(facts.notes.iter().cloned());
    // What the target's configuration says about loading any livepatch at all.
    if let Some(c) = facts.config() {
        for (option, what) in [
            ("CONFIG_MODULES", "it loads no module"),
            ("CONFIG_LIVEPATCH", "it refuses every livepatch module"),
        ] {
            if !c.enabled(option) {
                notes.push(Note::warning(format!(
                    "the target's configuration ({}) has {option} not set: {what}, converted or not",
                    c.path.display()
                )));
                break;
            }
        }
    }
    let exported = |n: &str| facts.exported_by_vmlinux(n);
    // The target's architecture when known: a module for another is refused.
    let arch = facts
        .machine()
        .and_then(klpsym_livepatch::Arch::from_machine)
        .unwrap_or(arch);
    let result = facts.with_target(arch, &[], |t| {
        convert_with(bytes, t, &copts.pins, &exported, rs)
    });
    match result {
        Ok((out, report)) => {
            // The output keeps the input's mode (a module is often 0644, tempfiles are 0600).
            let mode = std::fs::metadata(input).ok().map(|m| m.permissions());
            // Compressed when the output's name says so (`-o lp.ko.xz`), as kbuild does.
            let compression = klpsym_io::ModuleCompression::for_path(output);
            klpsym_io::write_atomically_with(output, mode, |w| {
                klpsym_io::write_module(w, compression, |e| write_in_steps(e, &out, rs))
            })?;
            bulk::free_with_points(out, rs)?;
            notes.extend(report.warnings.iter().map(|w| Note::warning(w.clone())));
            Ok(ConvertRun {
                outcome: Converted::Written(report),
                notes,
            })
        }
        Err(ConvertError::Refused(problems)) => Ok(ConvertRun {
            outcome: Converted::Refused(problems),
            notes,
        }),
        Err(ConvertError::Cancelled) => Err(Error::cancelled()),
        Err(e @ ConvertError::Parse(_)) => {
            Err(Error::bad_input(format!("{}: {e}", input.display())))
        }
    }
}

/// Where [`convert`] writes by default: `IN-klp.ko` beside the input (an `.xz`/`.zst`/`.gz`
/// input's compression suffix dropped).
pub fn default_output(input: &Path) -> PathBuf {
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .trim_end_matches(".xz")
        .trim_end_matches(".zst")
        .trim_end_matches(".gz")
        .trim_end_matches(".ko");
    input.with_file_name(format!("{stem}-klp.ko"))
}
