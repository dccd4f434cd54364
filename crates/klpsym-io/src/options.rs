//! How a source is read: limits, the cache, what a package read includes.

/// Options for [`crate::load`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Refuse inputs larger than this many bytes (a guard against reading a wrong, huge file).
    pub max_input_size: u64,
    /// Refuse to decompress more than this many bytes (a decompression bomb is an error).
    pub max_decompressed_size: u64,
    /// CONFIG_KALLSYMS_ALL of a vmlinux ELF: `None` = detect from the image.
    pub kallsyms_all: Option<bool>,
    /// Where decoded tables are kept between runs (`None`: no cache).
    pub cache: Option<crate::Cache>,
    /// Read a package's modules and Module.symvers too (the whole package: seconds for a
    /// Debian image package), for verbs that check a patch; else only the image, its config
    /// and System.map, or a debug package's vmlinux (reading stops once they are found).
    pub package_modules: bool,
    /// With `package_modules`: keep only the modules of these names (as the kernel names
    /// them: `-` is `_`), the objects of the patch being checked; `None` keeps every module.
    /// A package kernel read with named modules is cached with them (their bytes, a few
    /// kilobytes to megabytes), so a warm check does not read the package again.
    pub package_module_names: Option<Vec<String>>,
    /// Read the export facts (CRCs, namespaces) and vmlinux's ftrace call sites kept in a
    /// cache entry: false for verbs that never consult them (a lookup, a dump), which then
    /// see none. Decoding never skips them; only reading a cached kernel does (tens of
    /// thousands of records).
    pub export_facts: bool,
    /// Read debug packages among several packages (see [`is_debug_package`]); false: pass
    /// them over unread, for verbs that need no source files.
    pub debug_packages: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_input_size: 1 << 30,
            max_decompressed_size: 1 << 30,
            kallsyms_all: None,
            package_modules: false,
            package_module_names: None,
            cache: None,
            export_facts: true,
            debug_packages: true,
        }
    }
}

/// True when a package's file name says it holds debug info only: Debian's `-dbg_` and
/// `-dbgsym_`, RPM's `-debuginfo-`. Told by the name, so a 1 GiB package can be passed over
/// without reading it.
pub fn is_debug_package(path: &std::path::Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.contains("-dbg_") || name.contains("-dbgsym_") || name.contains("-debuginfo-")
}
