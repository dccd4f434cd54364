//! `klp_module_coming()`: an object whose module was not loaded when the patch was enabled
//! is initialized when that module loads; a failure makes the kernel refuse the module.

use std::collections::HashSet;

use super::Ctx;
use crate::names::parse_klp_section;
use crate::report::*;
use klpsym_core::resched::Cancelled;

impl Ctx<'_, '_, '_, '_> {
    pub(super) fn modules_coming(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        let Ok(patch) = &m.patch else { return Ok(()) };
        for i in std::mem::take(&mut self.deferred) {
            self.r.tick()?;
            let o = &patch.objects[i];
            let oname = o.object_name().to_string();
            if !self.t.unplaced_modules.contains_key(&oname) {
                continue;
            }
            let stage = Stage::ModuleComing {
                module: oname.clone(),
            };
            let before = self.problems.len();
            self.object_loaded(i, o, &stage, Some(&oname))?;
            // Initialized: klp_patch_object() of its functions, when nothing failed before.
            if !self.problems[before..]
                .iter()
                .any(|p| p.stage == stage && p.reached)
            {
                self.coming_functions(i, &oname)?;
                continue;
            }
            // The kernel adds two lines after the first failure of this module.
            let mut first = None;
            for (k, p) in self.problems[before..].iter().enumerate() {
                self.r.tick()?;
                if p.stage == stage && p.reached {
                    first = Some(k);
                    break;
                }
            }
            if let Some(k) = first {
                let p = &mut self.problems[before + k];
                let ret = -p.errno;
                p.log.push(format!(
                    "livepatch: failed to initialize patch '{}' for module '{oname}' ({ret})",
                    self.m.name
                ));
                p.log.push(format!(
                    "livepatch: patch '{}' failed for module '{oname}', refusing to load module '{oname}'",
                    self.m.name
                ));
            }
        }
        Ok(())
    }

    /// Sections for an object the patch does not list are never applied by the kernel.
    pub(super) fn orphan_sections(&mut self) -> Result<(), Cancelled> {
        let m = self.m;
        let Ok(patch) = &m.patch else { return Ok(()) };
        let mut listed: HashSet<&str> = HashSet::new();
        for o in &patch.objects {
            self.r.tick()?;
            listed.insert(o.object_name());
        }
        for sec in &m.klp_sections {
            self.r.tick()?;
            if let Some(p) = parse_klp_section(sec.name.as_bytes()) {
                if p.object != "vmlinux" && !listed.contains(p.object.as_str()) {
                    self.warn(format!(
                        "section {}: the patch has no klp_object '{}', so the kernel never applies it",
                        sec.name, p.object
                    ));
                }
            }
        }
        Ok(())
    }
}
