//! `file:line` and the inline chain of an answered address, as `addr2line -f -i -p` prints
//! them (what `scripts/faddr2line` and `scripts/decode_stacktrace.sh` show), from the
//! kernel's DWARF:
//!
//! - vmlinux addresses: the vmlinux with debug info at hand (the kernel itself, the `-dbg`
//!   package or `--debug-vmlinux` it was opened with; the cache keeps a package's debug
//!   sections, so a warm run does not read the package again);
//! - module addresses: the module's debug file: its own `.ko` when that carries DWARF (a
//!   kernel built here), the host's `/usr/lib/debug/lib/modules/$release`, or the kernel's
//!   `-dbg` package (read once for every module a trace names; the files are kept in the
//!   cache under the vmlinux's build id).
//!
//! A return address (`%pB`, `--return-addresses`) is looked up one byte back, in the call,
//! as decode_stacktrace.sh does since 7.1 (not at offset 0).
//!
//! A frame of a module the table cannot place (`name+0xoff/0xsize [module]` pasted from an
//! oops) is answered from the module's debug file alone: its place, without an address.

use std::sync::{Arc, Mutex};

use klpsym_elf::DebugLines;
pub use klpsym_elf::SourceFrame;

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::symbolize::{AddrAnswer, Ended, NoSymbol};

impl Kernel {
    /// Gives every found answer of `answers` its `file:line` and inline chain
    /// ([`AddrAnswer::source`]) where this kernel's DWARF tells them; `return_addresses` as
    /// the answers were made. Modules' debug files are found once for all the modules named.
    pub fn add_source_lines(
        &self,
        answers: &mut [AddrAnswer],
        return_addresses: bool,
    ) -> Result<()> {
        // Found, or a module's frame decoded without a placement.
        let placed = |a: &AddrAnswer| a.found || a.reason == Some(NoSymbol::ModuleNotPlaced);
        let mut modules: Vec<String> = answers
            .iter()
            .filter(|a| placed(a))
            .filter_map(|a| a.module.clone())
            .collect();
        modules.sort();
        modules.dedup();
        self.prepare_module_lines(&modules)?;
        for a in answers.iter_mut().filter(|a| placed(a)) {
            a.source = self.source_lines(a, return_addresses)?;
        }
        Ok(())
    }

    /// The inline chain (innermost first) of the place `a` answered; empty where no DWARF
    /// is at hand or it does not tell.
    pub fn source_lines(&self, a: &AddrAnswer, return_address: bool) -> Result<Vec<SourceFrame>> {
        let (Some(name), Some(offset)) = (&a.symbol, a.offset) else {
            return Ok(Vec::new());
        };
        let back = u64::from(return_address && offset > 0);
        match &a.module {
            None => {
                let Some(addr) = a.address else {
                    return Ok(Vec::new());
                };
                let Some(lines) = self.vmlinux_lines()? else {
                    return Ok(Vec::new());
                };
                let probe = addr.wrapping_sub(self.link_delta()).wrapping_sub(back);
                let lines = lines.lock().unwrap_or_else(|p| p.into_inner());
                Ok(lines.frames_named(probe, Some(name)))
            }
            Some(m) => {
                let Some(lines) = self.module_lines(m)? else {
                    return Ok(Vec::new());
                };
                let lines = lines.lock().unwrap_or_else(|p| p.into_inner());
                Ok(lines
                    .place_symbol(name, offset - back, None)
                    .map(|(at, _)| lines.frames_named(at, Some(name)))
                    .unwrap_or_default())
            }
        }
    }

    /// Whether a vmlinux with DWARF is at hand (without reading a package again).
    pub fn has_line_tables(&self) -> bool {
        let k = &self.inner;
        let d = if k.kind == klpsym_io::SourceKind::VmlinuxElf {
            Some(k)
        } else {
            k.debug.as_deref()
        };
        d.is_some_and(|d| d.elf.is_some() || d.cached.is_some() || d.lines.is_some())
    }

    pub(crate) fn vmlinux_lines(&self) -> Result<Option<&Mutex<DebugLines>>> {
        if let Some(l) = self.lines.vmlinux.get() {
            return Ok(l.as_ref());
        }
        let mut rs = self.opts.resched();
        let read = self
            .inner
            .vmlinux_lines(self.opts.load_options().max_decompressed_size, &mut rs)
            .map_err(Error::from)?;
        Ok(self
            .lines
            .vmlinux
            .get_or_init(|| read.map(Mutex::new))
            .as_ref())
    }

    /// How far this table's vmlinux addresses are from the debug vmlinux's (a KASLR-shifted
    /// /proc/kallsyms against its build's vmlinux): by `_text`.
    pub(crate) fn link_delta(&self) -> u64 {
        let Some(d) = self.inner.debug.as_deref() else {
            return 0;
        };
        let text = |t: &klpsym_core::SymbolTable| t.by_name("_text").next().map(|s| s.addr);
        match (text(&self.inner.table), text(&d.table)) {
            (Some(a), Some(b)) => a.wrapping_sub(b),
            _ => 0,
        }
    }

    pub(crate) fn module_lines(&self, module: &str) -> Result<Option<Arc<Mutex<DebugLines>>>> {
        let key = klpsym_core::normalize_module_name(module);
        if let Some(l) = self.lines.modules.get(&key) {
            return Ok(l);
        }
        self.prepare_module_lines(&[module.to_string()])?;
        Ok(self.lines.modules.get(&key).flatten())
    }

    /// Finds the debug files of `modules` not looked for yet (see
    /// [`Kernel::find_debug_modules`]) and keeps their line tables.
    fn prepare_module_lines(&self, modules: &[String]) -> Result<()> {
        let held = |m: &String| {
            self.lines
                .modules
                .contains(&klpsym_core::normalize_module_name(m))
        };
        let todo: Vec<String> = modules.iter().filter(|m| !held(m)).cloned().collect();
        if todo.is_empty() {
            return Ok(());
        }
        let roots = self.vmlinux_roots()?;
        self.find_debug_modules(&todo, &mut |name, bytes| {
            let Some(mut l) = DebugLines::module(bytes) else {
                return Ok(false);
            };
            l.set_roots(&roots);
            self.set_module_lines(&klpsym_core::normalize_module_name(name), Some(l));
            Ok(true)
        })?;
        // Looked for: not looked for again.
        for m in &todo {
            self.lines
                .modules
                .looked(klpsym_core::normalize_module_name(m));
        }
        Ok(())
    }

    /// The source tree prefixes of the vmlinux's DWARF, which a module's paths are made
    /// relative by (a module has no `init/main.c` to tell them); none without it.
    pub(crate) fn vmlinux_roots(&self) -> Result<Vec<String>> {
        Ok(self
            .vmlinux_lines()?
            .and_then(|l| l.lock().ok().map(|l| l.roots().to_vec()))
            .unwrap_or_default())
    }

    /// Finds the debug files of `modules`: in the module tree (its own `.ko`, unstripped),
    /// the host's debug folder (`/usr/lib/debug/lib/modules/REL`), the cache (kept under the
    /// vmlinux's build id), then the kernel's debug package (one pass for all the modules
    /// still missing), and hands each one's bytes to `take` (the module's name as asked,
    /// the bytes), which says whether it is a debug file (with DWARF) or the search goes on.
    /// A module none is found for is not handed.
    pub(crate) fn find_debug_modules(
        &self,
        modules: &[String],
        take: &mut dyn FnMut(&str, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let limit = self.opts.load_options().max_decompressed_size;
        let mut rs = self.opts.resched();
        let mut missing = Vec::new();
        for m in modules {
            let mut found = false;
            // Its own .ko, when a folder's and unstripped.
            let own = self.module_tree()?.and_then(|t| match t.file(m) {
                Some(klpsym_io::ModuleFile::Path(p)) => Some(p.clone()),
                _ => None,
            });
            if let Some(path) = own {
                found = take(m, &klpsym_io::read_module_file(&path, limit, &mut rs)?)?;
            }
            if !found {
                if let Some(path) = self
                    .release()
                    .and_then(|r| klpsym_io::host_debug_modules_dir(&r))
                    .and_then(|dir| klpsym_io::find_module_file(&dir, m))
                {
                    found = take(m, &klpsym_io::read_module_file(&path, limit, &mut rs)?)?;
                }
            }
            if !found {
                if let Some(bytes) = self.cached_debug_module(m) {
                    found = take(m, &bytes)?;
                }
            }
            if !found {
                missing.push(m.clone());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let packages: Vec<std::path::PathBuf> = self
            .inner
            .package
            .iter()
            .flat_map(|p| p.packages.iter())
            .filter(|p| klpsym_io::is_debug_package(p))
            .cloned()
            .collect();
        for p in &packages {
            let read = klpsym_io::debug_modules_of(p, &missing, &self.opts.load_options(), &mut rs)
                .map_err(Error::from)?;
            for (name, _, bytes) in read {
                self.keep_debug_module(&name, &bytes);
                take(&name, &bytes)?;
            }
        }
        Ok(())
    }

    fn set_module_lines(&self, key: &str, l: Option<DebugLines>) {
        self.lines
            .modules
            .set(key.to_string(), l.map(|l| Arc::new(Mutex::new(l))));
    }

    /// Where the cache keeps module `name`'s debug file of this build: named by the vmlinux's
    /// build id (one build's modules are one build's), `None` without a cache or build id.
    fn debug_module_cache_path(&self, name: &str) -> Option<std::path::PathBuf> {
        let cache = self.opts.load_options().cache?;
        let id = self.debug_build_id()?;
        Some(cache.debug_module_path(&id, &klpsym_core::normalize_module_name(name)))
    }

    /// The GNU build id of this kernel's vmlinux with DWARF (its debug vmlinux's, else its
    /// own): what the cache names one build's debug files by.
    pub(crate) fn debug_build_id(&self) -> Option<String> {
        self.inner
            .debug
            .as_deref()
            .and_then(|d| d.facts.build_id.clone())
            .or_else(|| self.inner.facts.build_id.clone())
    }

    fn cached_debug_module(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.debug_module_cache_path(name)?).ok()
    }

    fn keep_debug_module(&self, name: &str, bytes: &[u8]) {
        if let Some(path) = self.debug_module_cache_path(name) {
            // The cache is an optimisation: a failure to keep is not an error.
            let _ = klpsym_io::write_atomically(&path, |w| w.write_all(bytes));
        }
    }

    /// The answer to `name+0xoff/0xsize [module]` of a module the table cannot place (`why`
    /// it could not be resolved): where the module's debug file (its own `.ko` among the
    /// modules, the host's, the kernel's `-dbg` package) defines `name`, the frame is
    /// answered without an address ([`NoSymbol::ModuleNotPlaced`]; its place by
    /// [`Kernel::add_source_lines`]); else `why` is the error.
    pub(crate) fn module_frame(
        &self,
        input: &str,
        name: &str,
        offset: u64,
        size: Option<u64>,
        module: Option<&str>,
        why: Error,
    ) -> (AddrAnswer, Ended) {
        let Some(m) = module.map(klpsym_core::normalize_module_name) else {
            return (AddrAnswer::failed(input, why.to_string()), Ended::NotFound);
        };
        // Placed and yet without the name: the kernel's answer, not a frame to decode.
        let t = &self.inner.table;
        if t.object_by_name(&m)
            .is_some_and(|o| !t.object_info(o).unplaced)
        {
            return (AddrAnswer::failed(input, why.to_string()), Ended::NotFound);
        }
        let defined = match self.module_lines(&m) {
            Ok(Some(l)) => l
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .place_symbol(name, offset, None)
                .is_some(),
            _ => false,
        };
        if !defined {
            return (
                AddrAnswer::failed(
                    input,
                    format!("{why}; no debug file of {m} defining {name} was found to decode the frame from"),
                ),
                Ended::NotFound,
            );
        }
        let mut a = AddrAnswer::failed(input, String::new());
        a.error = None;
        a.symbol = Some(name.to_string());
        a.offset = Some(offset);
        a.size = size;
        a.module = Some(m.clone());
        a.reason = Some(NoSymbol::ModuleNotPlaced);
        a.explanation = Some(format!(
            "{why}: no address without a placement (loaded modules placed by a kallsyms); the frame is decoded from {m}'s debug file"
        ));
        (a, Ended::Found)
    }
}
