//! A user's file read in place: mapped read-only, never copied, and guarded against the
//! file being cut short under the map.
//!
//! A vmlinux with debug info is 400-630 MB, of which a load reads the symbol table and, once,
//! the DWARF (a third); file:line reads a few compilation units. Mapping it touches only those
//! pages, from the page cache, with no copy and no reschedule-free stretch (a copy to a
//! private file, as before, wrote 633 MB in 64 MiB steps of 17-160 ms each).
//!
//! What the map cannot prevent is another program changing the file while it is mapped:
//! - **Bytes rewritten in place** are seen by the map. Every reader of these bytes checks
//!   every bound it reads (they take any bytes: the fuzz targets hold them to it), so the
//!   worst is a wrong table; a load checks the input's stamp (`stamp.rs`) before and after
//!   it reads, and a change is an error ("changed while it was read"), never an entry.
//! - **A file cut short** (`cp` over it, a shell redirection) makes the kernel raise SIGBUS
//!   on a read of a page past the new end, which would end the process. So the first map
//!   installs a SIGBUS handler (once per process; the previous action kept): a fault inside a
//!   guarded map replaces the page with a page of zeros (`mmap(MAP_FIXED)`, async-signal
//!   safe) and marks the map damaged, and the read goes on over zeros; a load whose map was
//!   damaged is an error as above. A fault anywhere else goes to the previous action, or
//!   ends the process as it would have. With every slot of the guard table taken (32 maps
//!   at once), a map is refused and the caller copies the file instead.
//!
//! This file, `entry.rs`'s maps and klpsym-image's allocator are klpsym-io's unsafe code;
//! ARCHITECTURE.md lists them.

use std::ffi::c_void;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// How many guarded maps can be alive at once.
const SLOTS: usize = 32;

/// One guarded range: `[start, end)` (`start` 0: free) and whether a fault hit it.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    damaged: AtomicBool,
    taken: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    damaged: AtomicBool::new(false),
    taken: AtomicBool::new(false),
};

static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];
/// The page size, read when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action before ours (read by the handler: set before it is installed).
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// The previous action, as plain values the handler can read.
struct Previous {
    handler: libc::sighandler_t,
    flags: libc::c_int,
}

/// A user's file mapped read-only in place, guarded against SIGBUS (see the module's
/// documentation).
pub(crate) struct InPlace {
    map: memmap2::Mmap,
    slot: usize,
}

impl std::fmt::Debug for InPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "InPlace({} bytes, damaged: {})",
            self.map.len(),
            self.damaged()
        )
    }
}

impl AsRef<[u8]> for InPlace {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl InPlace {
    /// True when a read fell past the file's end (the file was cut short while mapped):
    /// what was read there was zeros, not the file.
    pub(crate) fn damaged(&self) -> bool {
        GUARDED[self.slot].damaged.load(Ordering::Acquire)
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        let s = &GUARDED[self.slot];
        s.start.store(0, Ordering::Release);
        s.end.store(0, Ordering::Release);
        s.damaged.store(false, Ordering::Release);
        s.taken.store(false, Ordering::Release);
    }
}

/// The file `f` mapped read-only in place and guarded; `Ok(None)` when no guard slot is
/// free or the handler cannot be installed (the caller copies the file instead). An empty
/// file cannot be mapped: an error.
pub(crate) fn map_in_place(f: &File, path: &Path) -> std::io::Result<Option<InPlace>> {
    if !install() {
        return Ok(None);
    }
    let Some(slot) = (0..SLOTS).find(|&i| {
        GUARDED[i]
            .taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }) else {
        return Ok(None);
    };
    // SAFETY: a read-only map of a file other programs may change: every reader bounds-checks
    // what it reads, a cut made under the map reads as zeros (the guard below, registered
    // before any reference to the map is handed out), and the caller checks the map's
    // damage and the file's stamp before trusting what it read.
    #[allow(unsafe_code)]
    let map = match unsafe { memmap2::Mmap::map(f) } {
        Ok(m) => m,
        Err(e) => {
            GUARDED[slot].taken.store(false, Ordering::Release);
            return Err(std::io::Error::new(
                e.kind(),
                format!("{}: cannot be mapped: {e}", path.display()),
            ));
        }
    };
    let start = map.as_ptr() as usize;
    let s = &GUARDED[slot];
    s.damaged.store(false, Ordering::Release);
    s.end.store(start + map.len(), Ordering::Release);
    s.start.store(start, Ordering::Release);
    Ok(Some(InPlace { map, slot }))
}

/// Installs the SIGBUS handler once; false when the system refused it.
fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: sigaction(2) with a handler that only reads atomics, calls mmap(2) and
        // sigaction(2) (async-signal safe) and chains to the action it replaced.
        #[allow(unsafe_code)]
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Release);
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            let _ = PREVIOUS.set(Previous {
                handler: old.sa_sigaction,
                flags: old.sa_flags,
            });
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) == 0
        }
    })
}

/// The SIGBUS handler: a fault inside a guarded map gets a page of zeros and marks the map;
/// any other goes to the previous action.
#[allow(unsafe_code)]
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for a handler installed with SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in &GUARDED {
        let start = s.start.load(Ordering::Acquire);
        if start != 0 && start <= addr && addr < s.end.load(Ordering::Acquire) {
            let page = PAGE.load(Ordering::Acquire);
            let at = addr & !(page - 1);
            // SAFETY: replaces one page of a map this process owns and keeps alive (the
            // fault came from reading it) with zeros; the map's own unmapping later
            // removes it with the rest.
            let r = unsafe {
                libc::mmap(
                    at as *mut c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if r != libc::MAP_FAILED {
                s.damaged.store(true, Ordering::Release);
                return;
            }
        }
    }
    // Not ours: what the previous action would have done.
    match PREVIOUS.get() {
        Some(p) if p.handler != libc::SIG_DFL && p.handler != libc::SIG_IGN => {
            // SAFETY: the previous handler, called as it was installed to be called.
            unsafe {
                if p.flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                        std::mem::transmute(p.handler);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.handler);
                    f(sig);
                }
            }
        }
        _ => {
            // The default action: restored, and the faulting read runs again and ends the
            // process as it would have without this handler.
            // SAFETY: sigaction(2) installing SIG_DFL.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file cut short under its map reads as zeros past the cut, and the map says so;
    /// one left whole does not.
    #[test]
    fn a_file_cut_short_under_its_map_reads_zeros_and_is_marked() {
        assert!(install());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let page = PAGE.load(Ordering::Acquire);
        let bytes: Vec<u8> = (0..page * 8).map(|i| (i % 251) as u8 + 1).collect();
        std::fs::write(&p, &bytes).unwrap();
        let f = File::open(&p).unwrap();
        let m = map_in_place(&f, &p).unwrap().expect("a guard slot");
        let whole: &[u8] = m.as_ref();
        assert_eq!(whole[page * 7 + 5], bytes[page * 7 + 5]);
        assert!(!m.damaged());
        // Cut to two pages and a half while mapped.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len((page * 5 / 2) as u64)
            .unwrap();
        let read = |at: usize| std::hint::black_box(m.as_ref()[at]);
        assert_eq!(read(page + 3), bytes[page + 3], "before the cut: the file");
        assert_eq!(read(page * 6 + 9), 0, "past the cut: zeros, not a SIGBUS");
        assert!(m.damaged());
        let other = map_in_place(&f, &p).unwrap().expect("a slot");
        assert!(!other.damaged(), "another map is not marked");
        let slots = [m.slot, other.slot];
        assert_ne!(slots[0], slots[1]);
        drop(m);
        drop(other);
        for s in slots {
            assert!(
                !GUARDED[s].taken.load(Ordering::Acquire),
                "slot {s} given back"
            );
            assert_eq!(GUARDED[s].start.load(Ordering::Acquire), 0);
        }
    }
}
