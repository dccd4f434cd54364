//! The line tables a [`crate::Kernel`] has read so far (`file:line`, the copies index): held
//! by the kernel, filled and read by `lines.rs` and `copies.rs`. A data type of its own, so
//! that the kernel holds it without depending on the files that answer with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use klpsym_elf::DebugLines;

/// The line tables read so far.
#[derive(Default)]
pub(crate) struct LinesCache {
    /// The vmlinux's, read once (`None`: no vmlinux with DWARF at hand).
    pub(crate) vmlinux: OnceLock<Option<Mutex<DebugLines>>>,
    /// Each module's, by normalized name, once looked for (`None`: no debug file found).
    pub(crate) modules: Mutex<HashMap<String, Option<Arc<Mutex<DebugLines>>>>>,
    /// Each module's definitions with their source files, from its debug file, by
    /// normalized name, once looked for (`None`: no debug file found).
    pub(crate) module_files: Mutex<HashMap<String, Option<Arc<klpsym_elf::ModuleFiles>>>>,
    /// The vmlinux DWARF's copies index (see `crate::copies`), read or made once.
    pub(crate) copies_index: OnceLock<Option<klpsym_elf::CopiesIndex>>,
}

impl std::fmt::Debug for LinesCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinesCache")
            .field("vmlinux", &self.vmlinux.get().map(Option::is_some))
            .finish()
    }
}
