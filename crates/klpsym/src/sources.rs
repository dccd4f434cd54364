//! A user's sources as the kernels they name: folders expanded into their kernel parts (in
//! name order), each file a folder passes over noted, each source that yields nothing a
//! failure of its own. Shared by opening ([`crate::open_all`]) and the fleet.

use std::path::PathBuf;

use klpsym_io::FolderEntry;

use crate::error::{Error, ErrorKind};
use crate::kernel::Note;

/// Sources with their folders expanded: [`expand_dirs`].
pub(crate) struct Expanded {
    /// Each source, in order, or the source that yields nothing with why.
    pub(crate) sources: Vec<std::result::Result<PathBuf, (PathBuf, Error)>>,
    /// The files of folders passed over, each with why.
    pub(crate) notes: Vec<Note>,
}

/// Every source with a folder replaced by its kernel parts (in name order), and a note for
/// each file of a folder passed over. A source named directly is always kept: reading it
/// says what is wrong with it. A folder that holds no kernel part (empty, or nothing but
/// files passed over), a folder that cannot be listed and a link in a folder that leads
/// nowhere are each a failure of their own, in their place: the other sources still answer.
pub(crate) fn expand_dirs(paths: &[PathBuf]) -> Expanded {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(Ok(p.clone()));
            continue;
        }
        let files = match klpsym_io::scan_folder(p) {
            Ok(f) => f,
            Err(e) => {
                out.push(Err((p.clone(), Error::from(e).context(p.display()))));
                continue;
            }
        };
        let mut found = false;
        for (f, what) in files {
            match what {
                FolderEntry::PassedOver(why) => {
                    notes.push(Note::info(format!("passed over {}: {why}", f.display())))
                }
                FolderEntry::Unreadable(why) => {
                    let e = Error::new(ErrorKind::Io, format!("{}: {why}", f.display()));
                    out.push(Err((f, e)));
                }
                FolderEntry::Package | FolderEntry::Source => {
                    found = true;
                    out.push(Ok(f));
                }
            }
        }
        if !found {
            let e = Error::new(
                ErrorKind::NotFound,
                format!(
                    "{}: the folder holds no kernel source files (symbol tables, images, vmlinux files, modules or kernel packages)",
                    p.display()
                ),
            );
            out.push(Err((p.clone(), e)));
        }
    }
    Expanded {
        sources: out,
        notes,
    }
}
