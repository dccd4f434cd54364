//! The loader layer: the only place that opens files, reads /proc, walks module trees, and
//! tells a source's kind from its content. Parsers below it take bytes; the CLI above it takes
//! loaded kernels.

mod cache;
mod detect;
mod error;
mod exports;
mod facts;
mod kernel;
mod modules;
mod output;
mod package;
mod sparse;
mod stream;
mod symvers_cache;
mod sysfs;
mod tree_cache;

pub use cache::{content_hash, input_identity, Cache, EntryInfo};
pub use detect::{detect, Detected};
pub use error::LoadError;
pub use exports::{parse_symvers, read_symvers, Export, ExportMap, Exports};
pub use facts::{
    find_config, find_symvers, is_live, live_release, live_sig_enforce, read_btf,
    read_section_addresses, release_of, AddressVisibility, KernelConfig,
};
pub use kernel::{
    load, module_symbols_table, read_bounded, LoadOptions, LoadedKernel, SourceFacts, SourceKind,
    DEFAULT_SOURCE,
};
pub use modules::{compose, load_module_file, LoadedSpec, ModuleFile, ModuleTree, Placement};
pub use output::{write_atomically, write_atomically_with};
pub use package::{is_package, load_packages, PackageParts};
pub use symvers_cache::read_symvers_with;
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
