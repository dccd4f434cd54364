//! Source files of a module's definitions, from its debug file (the `-dbg` package's
//! `usr/lib/debug/lib/modules/REL/…/x.ko`, the host's `/usr/lib/debug`, an unstripped `.ko`):
//! the module's kallsyms view ([`crate::module_kallsyms`]: the loader's rules over the same
//! `.symtab`, so a name's definitions come in the kallsyms order the kernel counts positions
//! in), each with the path of the compilation unit that holds it (DWARF: `fs/fat/inode.c`),
//! else the STT_FILE entry before it (`inode.c`, locals only).
//!
//! Distributions strip their modules (Debian keeps no STT_FILE and no DWARF in a package's
//! `.ko`): a table read from such a `.ko`, or a loaded module's kallsyms, names no file. The
//! debug file is the same link with everything kept; its definitions are matched to a
//! table's by rank among the name's definitions, the caller checking that both agree (see
//! [`ModuleFiles::definitions`]).

use klpsym_resched::resched::Resched;

use crate::error::ElfError;
use crate::module::{module_kallsyms_with, ModuleOptions};
use crate::source_lines::DebugLines;

/// One definition of a module's kallsyms view, with its source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleDefinition {
    /// The type letter as kallsyms prints it.
    pub kind: char,
    /// The offset in its section (`st_value`).
    pub offset: u64,
    /// Its section's name, when it has one.
    pub section: Option<String>,
    /// The source file: the compilation unit's path relative to the source tree (DWARF),
    /// else the STT_FILE entry before it; `None` when neither tells.
    pub file: Option<String>,
}

/// A module's definitions with their source files, by name in kallsyms order.
#[derive(Debug, Default)]
pub struct ModuleFiles {
    by_name: std::collections::HashMap<String, Vec<ModuleDefinition>>,
    /// The GNU build id of the debug file (the stripped `.ko` of the same link has the same).
    pub build_id: Option<String>,
    /// Definitions whose file came from DWARF.
    pub from_dwarf: usize,
    /// Definitions whose file came from STT_FILE alone.
    pub from_symtab: usize,
}

impl ModuleFiles {
    /// Every definition of `name`, in kallsyms order (the `old_sympos` order); empty when the
    /// module does not define it.
    pub fn definitions(&self, name: &str) -> &[ModuleDefinition] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }
}

/// The definitions of the module whose debug file is `data`, with their source files: the
/// compilation units' paths from `lines` (the same file's [`DebugLines::module`], its paths
/// made relative by its roots) where it places them, else STT_FILE. A reschedule point per
/// symbol and per unit.
pub fn module_files(
    data: &[u8],
    lines: Option<&DebugLines>,
    resched: &mut Resched,
) -> Result<ModuleFiles, ElfError> {
    let m = module_kallsyms_with(data, ModuleOptions::default(), resched)?;
    let units = match lines {
        Some(l) => l.unit_paths(resched)?,
        None => None,
    };
    let mut out = ModuleFiles {
        build_id: m.build_id.clone(),
        ..ModuleFiles::default()
    };
    for e in m.entries.iter() {
        resched.tick()?;
        let dwarf = lines
            .zip(units.as_ref())
            .and_then(|(l, u)| u.path_of(l.place(e.section?, e.addr)?));
        let file = match (dwarf, e.file) {
            (Some(p), _) => {
                out.from_dwarf += 1;
                Some(p.to_string())
            }
            (None, Some(f)) => {
                out.from_symtab += 1;
                Some(f.to_string())
            }
            (None, None) => None,
        };
        out.by_name
            .entry(e.name.to_string())
            .or_default()
            .push(ModuleDefinition {
                kind: char::from(e.kind),
                offset: e.addr,
                section: e.section.map(str::to_string),
                file,
            });
    }
    m.free_with_points(resched)?;
    Ok(out)
}
