//! The I/O layer: the only place that opens files, reads /proc and /sys, walks module trees,
//! keeps the cache, and tells a source's kind from its content. Parsers below it take bytes;
//! the library above it (`klpsym`) takes loaded kernels.
//!
//! Files from the top down: `load.rs` dispatches one source (cache, /proc reader, sparse
//! vmlinux reader, package, decoders); `package.rs` groups packages into kernels;
//! `folder.rs` tells a folder's kernel parts from what it also holds; `cache_list.rs` lists
//! and prunes every kind of cache entry; `cache.rs` (with `cache_put.rs`), `parts_cache.rs`,
//! `tree_cache.rs` and `symvers_cache.rs` keep one kind each; `debug_lines.rs` gives
//! `file:line` and declaration lines; `stamp.rs` proves inputs unchanged by their stamps
//! (`file_stamp.rs`); `decode.rs` turns bytes into a kernel; `facts.rs` finds what a module
//! loader checks against; `modules.rs` reads module trees; `debug_sidecar.rs`, `lines.rs`,
//! `cache_dir.rs` (the cache's folder), `detect.rs`, `entry.rs`, `read.rs`, `map.rs`,
//! `loaded.rs` and `error.rs` are what all of them stand on.

mod cache;
mod cache_dir;
mod cache_list;
mod cache_put;
mod config;
mod copies_index;
mod debug_lines;
mod debug_sidecar;
mod decode;
mod detect;
mod entry;
mod error;
mod facts;
mod file_stamp;
mod folder;
mod lines;
pub use lines::LineIndex;
mod load;
mod loaded;
mod map;
mod modules;
mod options;
mod output;
mod package;
mod parts_cache;
mod read;
mod sparse;
mod stamp;
mod stream;
mod symvers;
mod symvers_cache;
mod sysfs;
mod tree_cache;

pub use cache::EntryInfo;
pub use cache_dir::{Cache, DEFAULT_MAX_BYTES};
pub use cache_list::{Listing, Prune};
pub use config::{parse_config, read_config};
pub use debug_lines::{
    find_module_file, host_debug_modules_dir, module_lines_from_file, read_module_file,
};
pub use decode::module_symbols_table;
pub use detect::{detect, is_package, Detected};
pub use entry::{content_hash, input_identity, CACHE_FORMAT};
pub use error::LoadError;
pub use facts::{
    find_config, find_symvers, live_release, live_sig_enforce, read_btf, read_section_addresses,
    release_of, AddressVisibility,
};
pub use folder::{
    classify as classify_folder_file, package_name_of, scan as scan_folder, FolderEntry,
};
pub use klpsym_sources::{Export, ExportMap, Exports, KernelConfig};
pub use load::load;
pub use loaded::{
    is_live, ElfBytes, FtraceSites, LoadedKernel, PackageParts, SourceFacts, SourceKind,
    StructFact, BTF_STRUCTS, DEFAULT_SOURCE,
};
pub use modules::{
    compose, compose_with_layouts, load_module_file, Composed, LoadedSpec, ModuleFile, ModuleTree,
    Placement,
};
pub use options::{is_debug_package, LoadOptions};
pub use output::{write_atomically, write_atomically_with, write_module, ModuleCompression};
pub use package::{debug_modules_of, load_packages, package_release, PackageKernel};
pub use read::{decompressed, read_bounded};
pub use symvers::{parse_symvers, read_symvers};
pub use symvers_cache::read_symvers_cached;
pub use sysfs::{read_livepatch_sysfs, SysfsPatch, LIVEPATCH_SYSFS};

/// Makes glibc's malloc give memory back in bounded pieces, for programs that load big files
/// next to latency-sensitive work (the `klpsym` binary calls it first thing). With glibc's
/// defaults the threshold for mapping big blocks separately rises after big frees, so later
/// big blocks come from the heap and one `free` can trim tens of megabytes at once (measured:
/// 1.4 ms with no reschedule point while loading a vmlinux ELF). Fixed thresholds keep big
/// blocks mapped (klpsym frees those in steps) and heap trims small. Process-wide; call it
/// before starting threads. Does nothing on other C libraries.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn bounded_malloc() {
    // SAFETY: mallopt only changes allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 10);
    }
}

/// Restores the default action of SIGPIPE, so that writing to a closed pipe (`klpsym dump |
/// head`) ends the process quietly, as it ends nm or grep. Rust starts programs with SIGPIPE
/// ignored, which turns every such write into an error (and `println!` into a panic).
#[cfg(unix)]
#[allow(unsafe_code)]
pub fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler; called before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Nothing to do where there is no SIGPIPE.
#[cfg(not(unix))]
pub fn default_sigpipe() {}

/// See the glibc version: nothing to tune elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn bounded_malloc() {}
