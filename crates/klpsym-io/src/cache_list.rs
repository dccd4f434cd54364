//! What the cache folder holds, every kind of entry together (`klpsym cache`), and pruning
//! it: the one place that knows the kernel, package-parts, module-tree and Module.symvers
//! caches, the debug sections, module debug files and stamp records; each of those knows
//! only its own files.
//!
//! An entry is live when an input it was made from is still there as it was: a kernel's or
//! a package's parts when a stamp record of its identity names an input that still has the
//! recorded stamp; a module tree's listing when every directory it read is unchanged; a
//! Module.symvers index when the file has its stamp; a module debug file when its build's
//! kernel entry is live. Pruning removes stale entries first, then the least recently used
//! (a hit marks an entry used, at most once an hour).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use klpsym_core::resched::{Cancelled, Resched};

use crate::cache::EntryInfo;
use crate::cache_dir::{Cache, SUFFIX};

/// What to remove from the cache ([`Cache::prune`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prune {
    /// Entries that are not live (their input gone or changed), of another format, and
    /// temporary files left by killed runs.
    pub stale: bool,
    /// Entries not written or used for this long.
    pub older_than: Option<Duration>,
    /// Then, stale entries first and the least recently used next, until every file of the
    /// folder takes no more than this many bytes together.
    pub max_bytes: Option<u64>,
}

/// What a listing found: the entries, and every file's bytes (stamp records included).
#[derive(Debug, Default)]
pub struct Listing {
    /// The entries, by file name.
    pub entries: Vec<EntryInfo>,
    /// All files of the folder, entries or not (stamp records, temporary files).
    pub bytes: u64,
}

/// A stamp record found in the folder.
struct RecordFile {
    path: PathBuf,
    identity: u128,
    live: bool,
    input: PathBuf,
}

impl Cache {
    /// Every entry file, with what it says about itself.
    pub fn list(&self, rs: &mut Resched) -> std::io::Result<Vec<EntryInfo>> {
        Ok(self.listing(rs)?.entries)
    }

    /// Every entry file with what it says about itself, and the size of the whole folder.
    pub fn listing(&self, rs: &mut Resched) -> std::io::Result<Listing> {
        let (mut listing, found, _) = self.scan(rs)?;
        listing.entries = found.into_iter().map(|(e, _)| e).collect();
        Ok(listing)
    }

    /// The listing (its entries apart, each with the identity a kernel or parts entry names),
    /// and the stamp records.
    #[allow(clippy::type_complexity)]
    fn scan(
        &self,
        rs: &mut Resched,
    ) -> std::io::Result<(Listing, Vec<(EntryInfo, Option<u128>)>, Vec<RecordFile>)> {
        let cancelled = |c: Cancelled| std::io::Error::new(std::io::ErrorKind::Interrupted, c);
        let mut listing = Listing::default();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((listing, vec![], vec![]))
            }
            Err(e) => return Err(e),
        };
        let mut files = Vec::new();
        for e in rd {
            rs.tick().map_err(cancelled)?;
            let e = e?;
            // Gone since the folder was read (another run pruning): not there.
            let Ok(m) = e.metadata() else { continue };
            if m.is_file() {
                listing.bytes += m.len();
                files.push((e.path(), m));
            }
        }
        // Stamp records first: they tell which kernel entries are live.
        let mut records = Vec::new();
        for (p, _) in &files {
            if !crate::stamp::is_record(&p.to_string_lossy()) {
                continue;
            }
            rs.tick_step().map_err(cancelled)?;
            if let Some(r) = std::fs::read(p).ok().and_then(|b| crate::stamp::decode(&b)) {
                records.push(RecordFile {
                    path: p.clone(),
                    identity: r.identity,
                    live: r.live(),
                    input: r.path,
                });
            } else {
                // Of another format, or damaged: its input unknown.
                records.push(RecordFile {
                    path: p.clone(),
                    identity: 0,
                    live: false,
                    input: PathBuf::new(),
                });
            }
        }
        let mut inputs: HashMap<u128, Vec<String>> = HashMap::new();
        for r in records.iter().filter(|r| r.live) {
            inputs
                .entry(r.identity)
                .or_default()
                .push(r.input.display().to_string());
        }
        let mut live_builds = HashSet::new();
        let mut debug_files = Vec::new();
        let mut found = Vec::new();
        for (p, m) in &files {
            let name = p.to_string_lossy();
            if crate::stamp::is_record(&name) {
                continue;
            }
            if name.ends_with(crate::debug_lines::DEBUG_MODULE_SUFFIX) {
                debug_files.push((p.clone(), m.clone()));
                continue;
            }
            if name.ends_with(crate::copies_index::COPIES_INDEX_SUFFIX) {
                // Where a vmlinux's DWARF defines each function, named by its build's id:
                // used whenever that build is read again.
                found.push((info(p, m.len(), "copies index", true, age(m)), None));
                continue;
            }
            let base = p
                .file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default();
            if base.starts_with(".tmp") || base.starts_with(".klpsym-") {
                // A run writing it now, or one killed while it wrote.
                let age = age(m);
                found.push((info(p, m.len(), "temporary file", age < 86_400, age), None));
                continue;
            }
            if let Some(entry) = name.strip_suffix(crate::debug_sidecar::SUFFIX) {
                // Counted with its entry when that is there.
                if !Path::new(entry).exists() {
                    let e = info(p, m.len(), "debug sections", false, age(m));
                    found.push((
                        EntryInfo {
                            debug_bytes: m.len(),
                            ..e
                        },
                        None,
                    ));
                }
                continue;
            }
            if !name.ends_with(SUFFIX) {
                continue;
            }
            rs.tick_step().map_err(cancelled)?;
            found.push(describe_entry(p, m, &inputs, &mut live_builds, rs).map_err(cancelled)?);
        }
        for (p, m) in debug_files {
            // Named `BUILDID-NAME.klpc-debug.ko`.
            let name = p
                .file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default();
            let build = name.split('-').next().unwrap_or_default().to_string();
            let live = live_builds.contains(&build);
            let e = EntryInfo {
                current: true,
                ..info(&p, m.len(), "module debug file", live, age(&m))
            };
            found.push((e, None));
        }
        found.sort_by(|a, b| a.0.file.cmp(&b.0.file));
        Ok((listing, found, records))
    }

    /// Removes what `how` says, and every stamp record whose input is gone or changed (with
    /// `stale`) or whose entries are all gone. Returns the entry files removed.
    pub fn prune(&self, how: &Prune, rs: &mut Resched) -> std::io::Result<Vec<PathBuf>> {
        self.prune_keeping(how, None, rs)
    }

    fn prune_keeping(
        &self,
        how: &Prune,
        keep: Option<&Path>,
        rs: &mut Resched,
    ) -> std::io::Result<Vec<PathBuf>> {
        let (listing, found, records) = self.scan(rs)?;
        let mut total = listing.bytes;
        let mut removed = Vec::new();
        let mut left = Vec::new();
        for (e, identity) in found {
            let old = how.older_than.is_some_and(|d| e.age_secs >= d.as_secs());
            let stale = how.stale && (!e.live || !e.current);
            if (old || stale) && keep != Some(e.file.as_path()) {
                total = total.saturating_sub(remove(&e)?);
                removed.push(e.file);
            } else {
                left.push((e, identity));
            }
        }
        if let Some(max) = how.max_bytes {
            // Stale first, then the least recently used; the one to keep never.
            left.sort_by_key(|(e, _)| (e.live && e.current, used(&e.file)));
            let mut i = 0;
            while i < left.len() && total > max {
                if keep != Some(left[i].0.file.as_path()) {
                    let (e, _) = left.remove(i);
                    total = total.saturating_sub(remove(&e)?);
                    removed.push(e.file);
                } else {
                    i += 1;
                }
            }
        }
        // Stamp records: of inputs gone or changed (with `stale`), or naming an identity no
        // kernel or parts entry has any more.
        let kept: HashSet<u128> = left.iter().filter_map(|(_, id)| *id).collect();
        for r in records {
            if (how.stale && !r.live) || !kept.contains(&r.identity) {
                gone(std::fs::remove_file(&r.path))?;
            }
        }
        Ok(removed)
    }

    /// Keeps the folder under [`Cache::max_bytes`] after `written` was written (never
    /// removing `written` itself): stale entries first, then the least recently used. Only
    /// when the folder is over the bound is more than its size read. Failing is not an
    /// error (the cache is an optimisation).
    pub(crate) fn keep_bounded(&self, written: &Path, rs: &mut Resched) {
        if self.max_bytes == u64::MAX {
            return;
        }
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let total: u64 = rd
            .filter_map(|e| e.ok()?.metadata().ok())
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len())
            .sum();
        if total <= self.max_bytes {
            return;
        }
        let how = Prune {
            max_bytes: Some(self.max_bytes),
            ..Prune::default()
        };
        let _ = self.prune_keeping(&how, Some(written), rs);
    }
}

/// Removes an entry and its debug sections; the bytes freed.
fn remove(e: &EntryInfo) -> std::io::Result<u64> {
    gone(std::fs::remove_file(&e.file))?;
    if e.kind == "kernel" {
        gone(std::fs::remove_file(crate::debug_sidecar::sidecar_of(
            &e.file,
        )))?;
    }
    Ok(e.bytes)
}

/// A file another run removed first is removed.
fn gone(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn info(file: &Path, bytes: u64, kind: &'static str, live: bool, age_secs: u64) -> EntryInfo {
    EntryInfo {
        file: file.to_path_buf(),
        bytes,
        debug_bytes: 0,
        source: None,
        source_bytes: None,
        current: false,
        live,
        inputs: Vec::new(),
        kind,
        age_secs,
    }
}

/// What the `.klpc` file at `p` is, and the identity it names when it is a kernel's or a
/// package's parts.
fn describe_entry(
    p: &Path,
    m: &std::fs::Metadata,
    inputs: &HashMap<u128, Vec<String>>,
    live_builds: &mut HashSet<String>,
    rs: &mut Resched,
) -> Result<(EntryInfo, Option<u128>), Cancelled> {
    let age = age(m);
    let Some(map) = crate::entry::map_entry(p) else {
        return Ok((info(p, m.len(), "kernel", false, age), None));
    };
    let bytes: &[u8] = (*map).as_ref();
    let mut identity = None;
    let mut with_identity = |kind, source: String, size, id: u128| {
        identity = Some(id);
        let ins = inputs.get(&id).cloned().unwrap_or_default();
        EntryInfo {
            source: Some(source),
            source_bytes: Some(size),
            current: true,
            live: !ins.is_empty(),
            inputs: ins,
            ..info(p, m.len(), kind, false, age)
        }
    };
    let e = if crate::tree_cache::is_entry(bytes) {
        match crate::tree_cache::describe(bytes, rs)? {
            Some((root, live)) => EntryInfo {
                source: Some(root.display().to_string()),
                current: true,
                inputs: if live {
                    vec![root.display().to_string()]
                } else {
                    vec![]
                },
                ..info(p, m.len(), "module tree", live, age)
            },
            None => info(p, m.len(), "module tree", false, age),
        }
    } else if crate::symvers_cache::is_entry(bytes) {
        match crate::symvers_cache::describe(bytes) {
            Some((source, size, live)) => EntryInfo {
                source: Some(source.clone()),
                source_bytes: Some(size),
                current: true,
                inputs: if live { vec![source] } else { vec![] },
                ..info(p, m.len(), "Module.symvers", live, age)
            },
            None => info(p, m.len(), "Module.symvers", false, age),
        }
    } else if crate::parts_cache::is_entry(bytes) {
        match crate::parts_cache::describe(bytes) {
            Some((source, size, id)) => with_identity("package parts", source, size, id),
            None => info(p, m.len(), "package parts", false, age),
        }
    } else {
        let debug = std::fs::metadata(crate::debug_sidecar::sidecar_of(p)).map_or(0, |m| m.len());
        match crate::cache::describe(bytes) {
            Some(d) => {
                let e = with_identity("kernel", d.source, d.source_bytes, d.identity);
                if let (true, Some(b)) = (e.live, d.build_id) {
                    live_builds.insert(b);
                }
                EntryInfo {
                    bytes: m.len() + debug,
                    debug_bytes: debug,
                    ..e
                }
            }
            None => EntryInfo {
                bytes: m.len() + debug,
                debug_bytes: debug,
                ..info(p, m.len(), "kernel", false, age)
            },
        }
    };
    Ok((e, identity))
}

/// When the file at `p` was last written or marked used (to the nanosecond: entries written
/// in one second are told apart).
fn used(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Seconds since `m`'s file was last written (or marked used).
fn age(m: &std::fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or(0, |d| d.as_secs())
}
