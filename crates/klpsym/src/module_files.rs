//! Source files for a module's definitions from the module's debug file, so that a binding on
//! a module object has an identity as one on vmlinux has.
//!
//! A module's definitions come from the kernel's table (a loaded module: kallsyms names no
//! file) or from its `.ko` (distributions strip it: no STT_FILE, no DWARF). Its debug file
//! (the `-dbg` package's, the host's `/usr/lib/debug/lib/modules/REL`, an unstripped `.ko`:
//! found as `file:line` finds it, see `lines.rs`) is the same link with everything kept:
//! its kallsyms view lists a name's definitions in the same order, each with its compilation
//! unit's path. Files are attached by rank among the name's definitions; positions never
//! change. They are attached only when the two agree: the same build id where both are
//! known, as many definitions, the same type letters, the same offsets (a `.ko`'s table) or
//! the same distances between definitions of one section (a loaded module's addresses).

use std::sync::Arc;

use klpsym_core::Candidate;
use klpsym_elf::{DebugLines, ModuleDefinition, ModuleFiles};

use crate::error::{Error, Result};
use crate::kernel::Kernel;

impl Kernel {
    /// Module `module`'s definitions with their source files, from its debug file, looked
    /// for once (see [`Kernel::find_debug_modules`]); `None` when none is at hand.
    pub(crate) fn module_files(&self, module: &str) -> Result<Option<Arc<ModuleFiles>>> {
        let key = klpsym_core::normalize_module_name(module);
        if let Some(f) = self.lines.module_files.get(&key) {
            return Ok(f);
        }
        let roots = self.vmlinux_roots()?;
        let mut rs = self.opts.resched();
        let mut made = None;
        self.find_debug_modules(&[module.to_string()], &mut |_, bytes| {
            let Some(mut lines) = DebugLines::module(bytes) else {
                return Ok(false);
            };
            lines.set_roots(&roots);
            match klpsym_elf::module_files(bytes, Some(&lines), &mut rs) {
                Ok(f) => {
                    made = Some(Arc::new(f));
                    Ok(true)
                }
                Err(klpsym_elf::ElfError::Cancelled) => Err(Error::cancelled()),
                // Not a module the loader would take: no files from it.
                Err(_) => Ok(false),
            }
        })?;
        self.lines.module_files.set(key, made.clone());
        Ok(made)
    }

    /// Gives `defs` (every definition of `name` in module `object` on this kernel, in
    /// kallsyms order) the source files its debug file tells, where they have none (or only
    /// STT_FILE's base name); `build_id` is the module's as read here, when known. `Some`
    /// says why none were given: no debug file at hand, or one that is not this build's.
    pub(crate) fn add_module_files(
        &self,
        object: &str,
        name: &str,
        defs: &mut [Candidate],
        build_id: Option<&str>,
    ) -> Result<Option<String>> {
        if defs.is_empty()
            || defs
                .iter()
                .all(|d| d.file.as_deref().is_some_and(|f| f.contains('/')))
        {
            return Ok(None);
        }
        let Some(files) = self.module_files(object)? else {
            return Ok(Some(format!(
                "no debug file of {object} at hand to tell its definitions' source files (the kernel's -dbg package, /usr/lib/debug/lib/modules/{}, or an unstripped {object}.ko gives one)",
                self.release().as_deref().unwrap_or("RELEASE")
            )));
        };
        if let (Some(here), Some(debug)) = (build_id, files.build_id.as_deref()) {
            if here != debug {
                return Ok(Some(format!(
                    "the debug file of {object} at hand is another build (build id {debug}, the module's {here})"
                )));
            }
        }
        match matched_files(defs, files.definitions(name)) {
            Ok(found) => {
                for (d, f) in defs.iter_mut().zip(found) {
                    let better = match (&d.file, &f) {
                        (None, _) => true,
                        (Some(have), Some(f)) => {
                            f.len() > have.len() && klpsym_core::file_matches(have, f)
                        }
                        (Some(_), None) => false,
                    };
                    if better {
                        d.file = f;
                    }
                }
                Ok(None)
            }
            Err(why) => Ok(Some(format!(
                "the debug file of {object} at hand does not match this kernel's: {why}"
            ))),
        }
    }
}

/// The files of `debug` (a debug file's definitions of one name) for `defs` (the same
/// name's definitions here), rank by rank, when the two lists are one build's: as many, the
/// same type letters (exported or not aside), and the same offsets for a `.ko`'s unplaced
/// symbols, else the same distances between definitions of one section. `Err` says how they
/// differ.
fn matched_files(
    defs: &[Candidate],
    debug: &[ModuleDefinition],
) -> std::result::Result<Vec<Option<String>>, String> {
    if defs.len() != debug.len() {
        return Err(format!(
            "{} definitions of the name there, {} here",
            debug.len(),
            defs.len()
        ));
    }
    for (i, (d, m)) in defs.iter().zip(debug).enumerate() {
        if !d.kind.eq_ignore_ascii_case(&m.kind) {
            return Err(format!(
                "definition {} is of type {} there, {} here",
                i + 1,
                m.kind,
                d.kind
            ));
        }
        if d.unplaced && d.address.is_some_and(|a| a != m.offset) {
            return Err(format!(
                "definition {} is at +{:#x} there, {} here",
                i + 1,
                m.offset,
                d.address_text()
            ));
        }
    }
    // A loaded module's addresses: each section was placed as a whole, so definitions of one
    // section lie as far apart here as their offsets there.
    for i in 0..defs.len() {
        for j in i + 1..defs.len() {
            let (a, b) = (&defs[i], &defs[j]);
            let (Some(x), Some(y)) = (a.address, b.address) else {
                continue;
            };
            if a.unplaced || b.unplaced || debug[i].section.is_none() {
                continue;
            }
            if debug[i].section == debug[j].section
                && y.wrapping_sub(x) != debug[j].offset.wrapping_sub(debug[i].offset)
            {
                return Err(format!(
                    "definitions {} and {} are {:#x} apart there, {:#x} here",
                    i + 1,
                    j + 1,
                    debug[j].offset.wrapping_sub(debug[i].offset),
                    y.wrapping_sub(x)
                ));
            }
        }
    }
    Ok(debug.iter().map(|m| m.file.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here(position: u64, address: u64, unplaced: bool) -> Candidate {
        Candidate {
            position,
            address: Some(address),
            kind: 't',
            size: None,
            object: "fat".into(),
            unplaced,
            file: None,
            line: None,
            decl_file: None,
            id: klpsym_core::SymbolId(0),
        }
    }

    fn there(offset: u64, file: &str) -> ModuleDefinition {
        ModuleDefinition {
            kind: 't',
            offset,
            section: Some(".text".into()),
            file: Some(file.into()),
        }
    }

    #[test]
    fn files_go_rank_by_rank_to_definitions_of_the_same_build() {
        let debug = [
            there(0x10, "fs/fat/cache.c"),
            there(0x84b0, "fs/fat/inode.c"),
        ];
        // A stripped .ko's table: offsets.
        let ko = [here(1, 0x10, true), here(2, 0x84b0, true)];
        assert_eq!(
            matched_files(&ko, &debug).unwrap(),
            [Some("fs/fat/cache.c".into()), Some("fs/fat/inode.c".into())]
        );
        // A loaded module's table: placed, as far apart as in the debug file.
        let base = 0xffff_ffff_c080_0000u64;
        let loaded = [here(1, base + 0x10, false), here(2, base + 0x84b0, false)];
        assert!(matched_files(&loaded, &debug).is_ok());
    }

    #[test]
    fn a_debug_file_of_another_build_gives_no_files() {
        let debug = [
            there(0x10, "fs/fat/cache.c"),
            there(0x84b0, "fs/fat/inode.c"),
        ];
        let fewer = [here(1, 0x10, true)];
        assert!(matched_files(&fewer, &debug)
            .unwrap_err()
            .contains("2 definitions"));
        let moved = [here(1, 0x10, true), here(2, 0x84c0, true)];
        assert!(matched_files(&moved, &debug)
            .unwrap_err()
            .contains("+0x84b0"));
        let base = 0xffff_ffff_c080_0000u64;
        let apart = [here(1, base + 0x10, false), here(2, base + 0x9000, false)];
        assert!(matched_files(&apart, &debug).unwrap_err().contains("apart"));
        let mut data = here(1, 0x10, true);
        data.kind = 'd';
        assert!(matched_files(&[data, here(2, 0x84b0, true)], &debug)
            .unwrap_err()
            .contains("type"));
    }
}
