//! Declaration lines from DWARF: read from the vmlinux with debug info at hand (the kernel
//! itself, or the `-dbg` vmlinux it was paired with), whose bytes may sit in a package.

use klpsym_core::resched::Resched;

use crate::error::LoadError;
use crate::loaded::{LoadedKernel, SourceKind};
use crate::read::read_bounded;

impl LoadedKernel {
    /// The DWARF declaration line (`fs/inode.c:432`) of the functions at `addrs` in the
    /// vmlinux with debug info at hand: this kernel when it is one, else its `debug` vmlinux
    /// (the caller gives addresses there). `None` where an address is `None` or DWARF does not
    /// tell. Only the compilation units holding the functions are read.
    pub fn decl_lines_at(
        &self,
        addrs: &[Option<u64>],
        limit: u64,
        resched: &mut Resched,
    ) -> Result<Vec<Option<klpsym_elf::DeclLine>>, LoadError> {
        let none = vec![None; addrs.len()];
        let elf_kernel = if self.kind == SourceKind::VmlinuxElf {
            self
        } else {
            match self.debug.as_deref() {
                Some(d) => d,
                None => return Ok(none),
            }
        };
        if addrs.iter().all(Option::is_none) {
            return Ok(none);
        }
        let kept = elf_kernel.package.as_ref().and_then(|p| p.elf.clone());
        let bytes = match kept {
            Some(b) => b,
            None => std::sync::Arc::new(crate::package::elf_of(
                &elf_kernel.path,
                read_bounded(&elf_kernel.path, limit, resched)?,
                limit,
                resched,
            )?),
        };
        // Only known addresses are looked up.
        let wanted: Vec<u64> = addrs.iter().flatten().copied().collect();
        let mut lines = klpsym_elf::decl_lines(&bytes, &wanted, resched)
            .map_err(klpsym_core::BuildError::from)?
            .into_iter();
        Ok(addrs
            .iter()
            .map(|a| a.and_then(|_| lines.next().flatten()))
            .collect())
    }
}
