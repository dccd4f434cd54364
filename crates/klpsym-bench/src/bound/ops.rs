//! The operations the gate runs: every loader on real inputs, the index builds, queries,
//! the copies index, a large patch checked and converted.

use std::path::{Path, PathBuf};

use klpsym_core::resched::Resched;
use klpsym_core::{find_object_symbol, write_kallsyms, LookupRequest, SymbolTable};
use klpsym_io::{load, LoadOptions};

use crate::job::Job;

use super::*;

/// A folder holding links to `files`, removed when dropped.
struct LinkFolder(PathBuf);

impl LinkFolder {
    fn new(files: &[&Path]) -> Result<LinkFolder, BoxError> {
        let dir = tempfile::Builder::new()
            .prefix("klpsym-bench-folder.")
            .tempdir()?
            .keep();
        for f in files {
            let name = f.file_name().ok_or("a package path without a file name")?;
            std::os::unix::fs::symlink(std::fs::canonicalize(f)?, dir.join(name))?;
        }
        Ok(LinkFolder(dir))
    }
}

impl Drop for LinkFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// /proc/kallsyms (or the file given) when it can be read, or why not.
fn readable(p: &Path) -> Result<(), String> {
    let mut head = [0u8; 64];
    std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .map_err(|e| format!("{}: {e}", p.display()))
        .and_then(|n| {
            if n == 0 {
                Err(format!("{}: empty", p.display()))
            } else {
                Ok(())
            }
        })
}

pub(super) fn operations(x: &mut Gate, args: &BoundArgs) -> Result<(), BoxError> {
    let none = || Ok(());
    let kernel = args.kernel.clone();
    x.measure(
        &format!("load {}", file_name(&kernel)),
        Driver::Given,
        none,
        |(), r| Ok(load(&kernel, &LoadOptions::default(), r)?),
    )?;
    let live = match (&args.live, args.no_live) {
        (_, true) => None,
        (Some(p), false) => {
            readable(p)?;
            Some(p.clone())
        }
        (None, false) => {
            let p = PathBuf::from("/proc/kallsyms");
            match readable(&p) {
                Ok(()) if p != kernel => Some(p),
                Ok(()) => None,
                Err(e) => {
                    println!("not judged: the live kallsyms ({e})");
                    None
                }
            }
        }
    };
    if let Some(p) = live {
        x.measure(
            &format!("load {} (live)", p.display()),
            Driver::Given,
            none,
            |(), r| Ok(load(&p, &LoadOptions::default(), r)?),
        )?;
    }
    x.measure(
        "build name + address indexes",
        Driver::Given,
        || loaded(&kernel),
        |t, r| {
            t.build_indexes(r)?;
            Ok(t)
        },
    )?;
    queries(x, &kernel)?;
    loaders(x, args)
}

/// The operations over one table: dump, symbolize, resolve, check and convert a large patch.
fn queries(x: &mut Gate, kernel: &Path) -> Result<(), BoxError> {
    let none = || Ok(());
    let t = loaded(kernel)?;
    t.build_indexes(&mut Resched::none())?;
    x.measure(
        "dump (/proc/kallsyms format)",
        Driver::Given,
        none,
        |(), r| Ok(write_kallsyms(&t, &mut std::io::sink(), r)?),
    )?;
    let starts: Vec<u64> = t.iter().map(|s| s.addr).collect();
    x.measure(
        &format!("symbolize {} addresses one by one", starts.len()),
        Driver::Given,
        none,
        |(), r| {
            let mut found = 0usize;
            for &a in &starts {
                r.tick()?;
                found += matches!(t.symbolize(a), klpsym_core::SymbolizeOutcome::Found(_)) as usize;
            }
            Ok(found)
        },
    )?;
    let random = random_addresses(&starts, 500_000);
    x.measure(
        "symbolize a batch of 500,000 addresses",
        Driver::Given,
        none,
        |(), r| {
            let mut out = Vec::new();
            t.symbolize_batch_with(&random, &mut out, r)?;
            let n = out.len();
            // 24 MB of results: the caller frees them in steps too.
            klpsym_core::bulk::free_with_points(out, r)?;
            Ok(n)
        },
    )?;
    let job = Job::generate(&t, 20_000);
    x.measure(
        "resolve a 20,000-lookup patch",
        Driver::Given,
        none,
        |(), r| Ok(resolve_job(&t, &job, r)?),
    )?;
    // A large generated patch against this table: 20,000 klp relocations and 1,000 replaced
    // functions over names that are unique in it; and the same references as an ordinary
    // module for convert.
    let names = unique_function_names(&t, 5_000);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let patch = klpsym_testkit::patches::large_patch(&names, 20_000, 1_000);
    let module = klpsym_testkit::patches::large_module(&names, 20_000);
    let target = klpsym_livepatch::Target::new(
        &t,
        klpsym_livepatch::KernelRules::for_version(6, 1),
        klpsym_livepatch::Arch::X86_64,
    );
    x.measure(
        "check a 20,000-relocation patch",
        Driver::Given,
        none,
        |(), r| {
            let layouts = klpsym_livepatch::StructLayouts::fallback(6, 1);
            let m = klpsym_livepatch::LivepatchModule::parse_with(&patch, &layouts, r)?;
            let report = klpsym_livepatch::check_with(&m, &target, r)?;
            let verdict = format!("{:?}", report.verdict.kind);
            report.drop_with_points(r)?;
            m.drop_with_points(r)?;
            Ok(verdict)
        },
    )?;
    x.measure(
        "convert a 20,000-relocation module",
        Driver::Given,
        none,
        |(), r| {
            // klp_enable_patch is exported (and absent from kernels without livepatch).
            let exported = |n: &str| n == "klp_enable_patch";
            let (out, report) =
                klpsym_livepatch::convert_with(&module, &target, &[], &exported, r)?;
            let n = out.len();
            report.drop_with_points(r)?;
            klpsym_core::bulk::free_with_points(out, r)?;
            Ok(n)
        },
    )
}

/// The loaders of a kernel's files: image, vmlinux (stripped and with debug info), packages,
/// module tree, and a folder of packages opened as the library opens one.
fn loaders(x: &mut Gate, args: &BoundArgs) -> Result<(), BoxError> {
    let none = || Ok(());
    let files = [
        ("image", &args.image),
        ("stripped vmlinux", &args.vmlinux),
        ("debug vmlinux", &args.debug_vmlinux),
        ("image package", &args.image_deb),
    ];
    for (what, path) in files {
        let Some(p) = path.clone() else { continue };
        // Freed in steps (a -dbg vmlinux's table is tens of megabytes): part of the run.
        x.measure(
            &format!("load {what} {}", file_name(&p)),
            Driver::Given,
            none,
            |(), r| {
                let k = load(&p, &LoadOptions::default(), r)?;
                let n = k.table.len();
                k.free_with(r)?;
                Ok(n)
            },
        )?;
    }
    if let Some(elf) = args.debug_vmlinux.clone() {
        copies(x, &elf)?;
    }
    if let Some(dir) = args.modules.clone() {
        x.measure(
            &format!("scan the module tree {}", file_name(&dir)),
            Driver::Given,
            none,
            |(), r| {
                let tree = klpsym_io::ModuleTree::scan_with(&dir, r)?;
                let n = tree.len();
                tree.free_with(r)?;
                Ok(n)
            },
        )?;
        let tree = klpsym_io::ModuleTree::scan(&dir)?;
        let files: Vec<&Path> = tree.files().map(klpsym_io::ModuleFile::label).collect();
        x.measure(
            &format!("load {} modules", files.len()),
            Driver::Given,
            none,
            |(), r| {
                let mut symbols = 0usize;
                for f in &files {
                    let k = load(f, &LoadOptions::default(), r)?;
                    symbols += k.table.len();
                    k.free_with(r)?;
                }
                Ok(symbols)
            },
        )?;
    }
    let packages: Vec<&Path> = [&args.image_deb, &args.dbg_deb]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    if !packages.is_empty() {
        let folder = LinkFolder::new(&packages)?;
        let mut opts = klpsym::Options::new().cache(klpsym::CacheDir::Off);
        opts.interval = args.interval;
        opts.recorder = Some(x.recorder.clone());
        if args.policy_yield {
            opts = opts.yield_cpu(true);
        }
        if let Some(m) = &args.modules {
            opts = opts.modules(m);
        }
        let folder_path = folder.0.clone();
        x.measure(
            &format!(
                "open a folder of {} package{}{}",
                packages.len(),
                if packages.len() == 1 { "" } else { "s" },
                if args.modules.is_some() {
                    " and the module tree"
                } else {
                    ""
                }
            ),
            Driver::Own,
            none,
            |(), _| {
                let opened = klpsym::open_all(std::slice::from_ref(&folder_path), &opts)?;
                let mut symbols = 0;
                for o in opened {
                    symbols += o.kernel?.table().len();
                }
                Ok(symbols)
            },
        )?;
    }
    Ok(())
}

/// Up to `n` names of function symbols that occur once in `t` (deterministic).
fn unique_function_names(t: &SymbolTable, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for s in t.iter() {
        if out.len() >= n {
            break;
        }
        if matches!(s.kind, 't' | 'T') && s.addr != 0 && t.by_name(s.name).count() == 1 {
            out.push(s.name.to_string());
        }
    }
    out
}

/// Resolves every lookup of `job` as klpsym does (a tick per lookup); the number found.
pub(crate) fn resolve_job(
    t: &SymbolTable,
    job: &Job,
    r: &mut Resched,
) -> Result<usize, klpsym_core::Cancelled> {
    let mut found = 0usize;
    for (name, sympos) in &job.lookups {
        r.tick()?;
        let o = find_object_symbol(
            t,
            &LookupRequest {
                name,
                object: None,
                sympos: *sympos,
            },
        );
        found += o.address.is_some() as usize;
    }
    Ok(found)
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `n` addresses spread over the table's range (deterministic), most inside symbols.
pub(crate) fn random_addresses(starts: &[u64], n: usize) -> Vec<u64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let nonzero: Vec<u64> = starts.iter().copied().filter(|&a| a != 0).collect();
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let base = nonzero[(x % nonzero.len() as u64) as usize];
            base + (x >> 40) % 64
        })
        .collect()
}

/// The DWARF walks of a vmlinux with debug info: every copy of a spread of its static
/// functions (what a check's coverage reads), and the index of all of it (one walk of every
/// unit, what `copies NAME` needs once).
fn copies(x: &mut Gate, elf: &Path) -> Result<(), BoxError> {
    let bytes = std::fs::read(elf)?;
    let t = klpsym_elf::vmlinux_kallsyms(&bytes, None)?;
    let statics: Vec<u64> = t
        .entries
        .iter()
        .filter(|e| e.kind == b't')
        .map(|e| e.addr)
        .step_by(997)
        .take(40)
        .collect();
    drop(t);
    let shared: klpsym_elf::Shared = std::sync::Arc::new(bytes);
    let lines = klpsym_elf::DebugLines::vmlinux(shared).ok_or("the vmlinux has no DWARF")?;
    x.measure(
        &format!("DWARF copies of {} functions", statics.len()),
        Driver::Given,
        || Ok(()),
        |(), r| {
            let mut copies = 0usize;
            for &a in &statics {
                copies += lines.copies_at(a, None, r)?.map_or(0, |f| f.copies.len());
            }
            Ok(copies)
        },
    )?;
    x.measure(
        "DWARF copies index (every unit)",
        Driver::Given,
        || Ok(()),
        |(), r| Ok(lines.copies_index(r)?.free_with_points(r)?),
    )?;
    Ok(())
}
