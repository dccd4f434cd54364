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
    pub(crate) modules: LookedFor<Arc<Mutex<DebugLines>>>,
    /// Each module's definitions with their source files, from its debug file, by
    /// normalized name, once looked for (`None`: no debug file found).
    pub(crate) module_files: LookedFor<Arc<klpsym_elf::ModuleFiles>>,
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

/// What was found for each module name once looked for: `Some(None)` from [`LookedFor::get`]
/// says it was looked for and none found (never looked for again), `None` that it was not
/// looked for yet. Shared by threads; the lock is held only to read or write one entry.
pub(crate) struct LookedFor<V>(Mutex<HashMap<String, Option<V>>>);

impl<V> Default for LookedFor<V> {
    fn default() -> Self {
        LookedFor(Mutex::new(HashMap::new()))
    }
}

impl<V: Clone> LookedFor<V> {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<V>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What was found for `key`, when it was looked for.
    pub(crate) fn get(&self, key: &str) -> Option<Option<V>> {
        self.held().get(key).cloned()
    }

    /// Whether `key` was looked for.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.held().contains_key(key)
    }

    /// Keeps what was found for `key` (`None`: nothing), replacing what was kept.
    pub(crate) fn set(&self, key: String, found: Option<V>) {
        self.held().insert(key, found);
    }

    /// Marks `key` as looked for, keeping what was found for it already.
    pub(crate) fn looked(&self, key: String) {
        self.held().entry(key).or_insert(None);
    }
}
