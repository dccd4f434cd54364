//! The symbol-table model of klpsym and the kernel's lookup semantics over it.
//!
//! This crate never opens a file, never reads `/proc`, and never decompresses anything: it
//! takes symbols from a source parser (see `klpsym-sources`) and answers queries the way the
//! kernel would.
//!
//! - [`SymbolTable`] holds objects (vmlinux, modules, pseudo-objects) and their symbols in
//!   kernel order, with a name index and an address index built on first use.
//! - [`find_object_symbol`] reproduces `klp_find_object_symbol()` (kernel/livepatch/core.c): positions,
//!   verdicts and the kernel's exact messages.
//! - [`SymbolTable::symbolize`] reproduces `%pS` (`name+0xoff/0xsize [module]`).
//! - [`resched`] is the one reschedule-point mechanism every long operation goes through.

mod addr_index;
mod candidate;
mod columns;
mod format;
mod lookup;
mod name_index;
mod object;
mod pairing;
mod search;
mod stem_index;
mod storage;
mod symbolize;
mod table;
mod table_io;

pub use candidate::{
    candidate, candidates, file_line_text, hex, hex_bytes, hex_serde, serialize_problem_candidates,
    Candidate,
};
pub use format::{address_text, write_kallsyms, KallsymsWriter};
/// Reschedule points (re-exported from `klpsym-resched`, where every parser finds them
/// without depending on the model).
pub use klpsym_resched::{bulk, record, resched};
pub use klpsym_resched::{
    merge_spans, yield_now, Cancelled, ChunkedFinder, Recorder, Resched, ReschedPolicy,
    ReschedStats, EVERYWHERE, SCAN_CHUNK, STRETCH_BUCKET_EDGES_US,
};
pub use lookup::{
    find_object_symbol, resolve_in_object, LookupOutcome, LookupRequest, LookupVerdict,
};
pub use object::{normalize_module_name, ObjectId, ObjectInfo, ObjectKind};
pub use pairing::pair_definitions;
pub use search::{search_names, NameMatch, NamePattern};
pub use storage::Backing;
pub use symbolize::{SymbolizeOutcome, Symbolized};
pub use table::{
    file_match, file_matches, BuildError, FileMatch, Symbol, SymbolId, SymbolTable,
    SymbolTableBuilder, SIZE_UNKNOWN, STEM_WALKS,
};
pub use table_io::DecodeError;
