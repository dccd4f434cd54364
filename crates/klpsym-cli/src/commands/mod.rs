//! One file per verb: each turns its arguments into library calls and renders the answers.

pub mod addr;
pub mod cache;
pub mod check;
pub mod convert;
pub mod drift;
pub mod dump;
pub mod info;
pub mod lookup;
pub mod search;
pub mod status;
pub mod sympos;

use klpsym::{file_line_text, Candidate};

/// The line explaining `+0x...` addresses, printed under a table that has them.
pub const UNPLACED_NOTE: &str = "+0x...: an unplaced module symbol (read from its .ko): an offset in its section, no load address; place it with --loaded NAME --place-from KALLSYMS";

/// How the FILE column shows a candidate: `fs/inode.c:432`, or the unit's file with the
/// header that declares a `static inline` copy: `fs/inode.c (include/linux/fs.h:12)`.
fn file_text(c: &Candidate) -> Option<String> {
    let f = c.file.as_deref()?;
    Some(file_line_text(f, c.decl_file.as_deref(), c.line))
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

/// Says once, on stderr, that a kernel loads no livepatch at all (lookup and sympos still
/// answer as the code would).
pub fn warn_livepatch_unsupported(kernel: &str, why: Option<&str>) {
    if let Some(why) = why {
        eprintln!("klpsym: warning: {kernel}: {why}; the answers below are what the lookup code would return");
    }
}

/// The compiler-made variants of a missing name, one per line.
pub fn print_variants(variants: &[String], indent: &str) {
    for v in variants {
        println!("{indent}note: compiler-made variant: {v} (a patch names it with its suffix)");
    }
}

#[cfg(test)]
mod tests {
    use klpsym::layers::core::file_matches;

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
