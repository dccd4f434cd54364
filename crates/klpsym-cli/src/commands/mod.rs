//! One file per verb.

pub mod addr;
pub mod cache;
pub mod check;
pub mod convert;
pub mod dump;
pub mod info;
pub mod lookup;
pub mod search;
pub mod status;
pub mod sympos;

use serde::Serialize;

use klpsym_core::{SymbolId, SymbolTable, SIZE_UNKNOWN};

use klpsym_loader::{LoadedKernel, SourceKind};

use crate::cli::SourceArgs;
use crate::output::{hex, CliError};

/// One definition of a name, as JSON and the tables print it.
#[derive(Debug, Serialize)]
pub struct Candidate {
    /// 1-based position in the object's kallsyms order (old_sympos).
    pub position: usize,
    /// Address, `0x`-prefixed hex; null when the source hides addresses.
    pub address: Option<String>,
    /// Type letter.
    #[serde(rename = "type")]
    pub kind: String,
    /// Size in bytes, `0x`-prefixed hex; null when unknown.
    pub size: Option<String>,
    /// The object.
    pub object: String,
    /// True when `address` is an offset in the symbol's section (a module read from its
    /// `.ko`, not placed): no load address yet. Printed as `+0x150`.
    pub unplaced: bool,
    /// The same as `unplaced` (its first name; kept for readers of older output).
    pub relative: bool,
    /// The source file of its translation unit (STT_FILE: `inode.c`), when the source has
    /// FILE entries (a vmlinux with .symtab, a module); null otherwise.
    pub file: Option<String>,
    /// The declaration line in `decl_file`, from DWARF (a vmlinux with debug info given as
    /// --kernel or --debug-vmlinux); null otherwise.
    pub line: Option<u64>,
    /// The file holding that line: `file` itself, or a header for a `static inline` copy.
    pub decl_file: Option<String>,
    /// The symbol, for what is added afterwards (lines).
    #[serde(skip)]
    pub id: SymbolId,
    /// The address as the human output prints it (`0x...`, `+0x...`, `(hidden)`).
    #[serde(skip)]
    pub text: String,
}

/// The line explaining `+0x...` addresses, printed under a table that has them.
pub const UNPLACED_NOTE: &str = "+0x...: an unplaced module symbol (read from its .ko): an offset in its section, no load address; place it with --loaded NAME --place-from KALLSYMS";

/// Describes `ids` (one object's matches in kernel order) as candidates.
pub fn candidates(table: &SymbolTable, ids: &[SymbolId]) -> Vec<Candidate> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            let s = table.symbol(id);
            let relative = table.object_info(s.object).relative;
            let size = if table.addresses_hidden() || relative {
                SIZE_UNKNOWN
            } else {
                table.size(id)
            };
            Candidate {
                position: i + 1,
                address: (!table.addresses_hidden()).then(|| hex(s.addr)),
                kind: s.kind.to_string(),
                size: (size != SIZE_UNKNOWN).then(|| format!("{size:#x}")),
                object: table.object_info(s.object).name.clone(),
                unplaced: relative,
                relative,
                file: table.file(id).map(str::to_string),
                line: None,
                decl_file: None,
                id,
                text: klpsym_core::address_text(table, id),
            }
        })
        .collect()
}

/// Adds DWARF declaration lines to vmlinux candidates that have a source file, when `k` is a
/// vmlinux with debug info or has one attached (`--debug-vmlinux`). Reads that vmlinux again:
/// only the compilation units holding the candidates are decoded.
pub fn add_lines(
    k: &LoadedKernel,
    cands: &mut [Candidate],
    args: &SourceArgs,
) -> Result<(), CliError> {
    let wanted: Vec<usize> = (0..cands.len())
        .filter(|&i| cands[i].file.is_some() && cands[i].object == "vmlinux")
        .collect();
    if wanted.is_empty() || (k.kind != SourceKind::VmlinuxElf && k.debug.is_none()) {
        return Ok(());
    }
    let ids: Vec<SymbolId> = wanted.iter().map(|&i| cands[i].id).collect();
    let mut rs = crate::sources::resched(args);
    let lines = k.decl_lines(&ids, args.max_input_size, &mut rs)?;
    for (i, l) in wanted.into_iter().zip(lines) {
        if let Some(l) = l {
            cands[i].line = Some(l.line);
            cands[i].decl_file = Some(l.file);
        }
    }
    Ok(())
}

/// `--file` needs a source that knows files: says what to give instead when `k` does not.
pub fn require_files(k: &LoadedKernel) -> Result<(), CliError> {
    if k.table.has_files() {
        return Ok(());
    }
    Err(format!(
        "--file: {} has no source files (FILE entries); give a vmlinux with .symtab (the -dbg package's) or a module",
        k.path.display()
    )
    .into())
}

/// How the FILE column shows a candidate: `fs/inode.c:432`, or the unit's file with the
/// header that declares a `static inline` copy: `fs/inode.c (include/linux/fs.h:12)`.
fn file_text(c: &Candidate) -> Option<String> {
    let f = c.file.as_deref()?;
    Some(file_line_text(f, c.decl_file.as_deref(), c.line))
}

/// `fs/inode.c:432`, `fs/inode.c (include/linux/fs.h:12)`, or the file alone.
pub fn file_line_text(file: &str, decl_file: Option<&str>, line: Option<u64>) -> String {
    match (decl_file, line) {
        (Some(d), Some(l)) if klpsym_core::file_matches(d, file) => format!("{d}:{l}"),
        (Some(d), Some(l)) => format!("{file} ({d}:{l})"),
        _ => file.to_string(),
    }
}

/// Prints candidates as an aligned table (with a FILE column when any has a file).
pub fn print_candidates(cands: &[Candidate], indent: &str) {
    let files = cands.iter().any(|c| c.file.is_some());
    println!(
        "{indent}{:>4}  {:<18}  TYPE  {:<10}  {:<10}{}",
        "POS",
        "ADDRESS",
        "SIZE",
        "OBJECT",
        if files { "  FILE" } else { "" }
    );
    for c in cands {
        println!(
            "{indent}{:>4}  {:<18}  {:<4}  {:<10}  {:<10}{}",
            c.position,
            c.text,
            c.kind,
            c.size.as_deref().unwrap_or("?"),
            c.object,
            match (file_text(c), files) {
                (Some(f), _) => format!("  {f}"),
                (None, true) => "  ?".to_string(),
                (None, false) => String::new(),
            }
        );
    }
    if cands.iter().any(|c| c.unplaced) {
        println!("{indent}{UNPLACED_NOTE}");
    }
}

pub use klpsym_core::file_matches;

#[cfg(test)]
mod tests {
    use super::file_matches;

    #[test]
    fn files_match_on_a_path_suffix() {
        assert!(file_matches("inode.c", "fs/inode.c"));
        assert!(file_matches("inode.c", "inode.c"));
        assert!(file_matches("fs/inode.c", "inode.c"));
        assert!(!file_matches("inode.c", "fs/xinode.c"));
        assert!(!file_matches("dinode.c", "inode.c"));
        assert!(!file_matches("inode.c", ""));
    }
}
