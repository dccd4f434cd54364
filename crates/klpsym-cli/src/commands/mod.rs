//! One file per verb: each turns its arguments into library calls, renders the answers
//! (`klpsym::render`) and says how the run ends.

pub mod addr;
pub mod cache;
pub mod check;
pub mod completions;
pub mod convert;
pub mod copies;
pub mod drift;
pub mod dump;
pub mod info;
pub mod lookup;
pub mod search;
pub mod status;
pub mod sympos;

/// Says once, on stderr, that a kernel loads no livepatch at all (lookup and sympos still
/// answer as the code would).
pub fn warn_livepatch_unsupported(kernel: &str, why: Option<&str>) {
    if let Some(why) = why {
        eprintln!("klpsym: warning: {kernel}: {why}; the answers below are what the lookup code would return");
    }
}
