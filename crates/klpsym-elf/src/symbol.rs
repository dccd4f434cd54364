//! The entry type shared by the vmlinux and module paths, and the table that holds entries.
//!
//! A result can hold hundreds of thousands of entries. Each owning its name as a `String` made
//! one allocation per symbol while the result was built and one `free` per symbol when it was
//! dropped (milliseconds without a reschedule point, in whatever code drops it). So entries
//! are stored as plain rows whose names live in one arena per table: building it appends to a
//! buffer, dropping it frees three buffers. [`ElfKallsym`] is a borrowed view of one row.

use std::iter::FusedIterator;

use klpsym_resched::resched::{Cancelled, Resched};

/// One line the kernel's /proc/kallsyms would show: a view of one entry of a [`KallsymTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfKallsym<'a> {
    /// Symbol name as the kernel prints it.
    pub name: &'a str,
    /// Type letter as /proc/kallsyms prints it (for modules: already upper-cased
    /// when exported, lower-cased otherwise, as `s_show()` does).
    pub kind: u8,
    /// vmlinux: the absolute link-time address (percpu symbols under
    /// ABSOLUTE_PERCPU: their small offset). Module: the offset inside `section`.
    pub addr: u64,
    /// `st_size` from the ELF symbol table.
    pub size: Option<u64>,
    /// Name of the section the symbol is defined in (`None` for absolute and
    /// undefined symbols).
    pub section: Option<&'a str>,
    /// Index of that section in the object's section header table; section names
    /// are not unique in every object, indices are.
    pub section_index: Option<u32>,
    /// The symbol is exported (EXPORT_SYMBOL*) with this very address.
    pub exported: bool,
    /// For a local symbol: its translation unit's source file (STT_FILE; a basename in kernel
    /// builds, `inode.c`), when the object has FILE entries.
    pub file: Option<&'a str>,
}

/// A byte range of a [`KallsymTable`]'s name arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// [`Row::flags`]: `size` is known.
const HAS_SIZE: u8 = 1;
/// [`Row::flags`]: `section` is a section index.
const HAS_SECTION: u8 = 2;
/// [`Row::flags`]: exported.
const EXPORTED: u8 = 4;

/// One entry without its names (48 bytes: a module's rows are freed with it, in one go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    name: Span,
    addr: u64,
    size: u64,
    section: u32,
    /// Index into `files`, or [`NO_FILE`].
    file: u32,
    kind: u8,
    flags: u8,
}

/// [`Row::file`] when the entry has no source file.
const NO_FILE: u32 = u32::MAX;

/// The entries of a result, in /proc/kallsyms order: rows plus one arena holding every name.
/// Iterate it (`for e in &table`, [`iter`](KallsymTable::iter)) or index it with
/// [`get`](KallsymTable::get); each entry comes out as an [`ElfKallsym`] borrowing the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KallsymTable {
    names: String,
    rows: Vec<Row>,
    /// Section names by section header index (for [`ElfKallsym::section`]).
    sections: Vec<Span>,
    /// Source file names (for [`ElfKallsym::file`]), each once.
    files: Vec<Span>,
}

impl KallsymTable {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Entry `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<ElfKallsym<'_>> {
        self.rows.get(i).map(|r| self.view(r))
    }

    /// The first entry.
    pub fn first(&self) -> Option<ElfKallsym<'_>> {
        self.get(0)
    }

    /// The last entry.
    pub fn last(&self) -> Option<ElfKallsym<'_>> {
        self.rows.last().map(|r| self.view(r))
    }

    /// The entries in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            table: self,
            rows: self.rows.iter(),
        }
    }

    /// Size of the name arena (every entry's name and the section names): enough room for
    /// a copy of all the names.
    pub fn name_bytes(&self) -> usize {
        self.names.len()
    }

    /// Frees the table in steps, a reschedule point between them: dropping it gives back
    /// megabytes (a vmlinux's table) in one stretch.
    pub fn free_with_points(self, resched: &mut Resched) -> Result<(), Cancelled> {
        klpsym_resched::bulk::free_with_points(self.rows, resched)?;
        klpsym_resched::bulk::free_with_points(self.sections, resched)?;
        klpsym_resched::bulk::free_with_points(self.files, resched)?;
        klpsym_resched::bulk::free_with_points(self.names.into_bytes(), resched)
    }

    fn text(&self, s: Span) -> &str {
        // Spans are made by the builder on boundaries of what it appended; `get` keeps a bug
        // there from becoming a panic.
        self.names.get(s.start..s.end).unwrap_or("<invalid name>")
    }

    fn view(&self, r: &Row) -> ElfKallsym<'_> {
        let section_index = (r.flags & HAS_SECTION != 0).then_some(r.section);
        ElfKallsym {
            name: self.text(r.name),
            kind: r.kind,
            addr: r.addr,
            size: (r.flags & HAS_SIZE != 0).then_some(r.size),
            section: section_index
                .and_then(|i| self.sections.get(i as usize))
                .map(|&s| self.text(s)),
            section_index,
            exported: r.flags & EXPORTED != 0,
            file: (r.file != NO_FILE)
                .then(|| self.files.get(r.file as usize))
                .flatten()
                .map(|&s| self.text(s)),
        }
    }
}

impl<'a> IntoIterator for &'a KallsymTable {
    type Item = ElfKallsym<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over a [`KallsymTable`]'s entries.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    table: &'a KallsymTable,
    rows: std::slice::Iter<'a, Row>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = ElfKallsym<'a>;

    fn next(&mut self) -> Option<ElfKallsym<'a>> {
        self.rows.next().map(|r| self.table.view(r))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }

    fn nth(&mut self, n: usize) -> Option<ElfKallsym<'a>> {
        self.rows.nth(n).map(|r| self.table.view(r))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.rows.next_back().map(|r| self.table.view(r))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FusedIterator for Iter<'_> {}

/// Builds a [`KallsymTable`]: section names first (they are looked up by index), then the
/// entries in order. Every call is O(length of the name it copies).
#[derive(Debug, Default)]
pub(crate) struct KallsymTableBuilder {
    table: KallsymTable,
    /// File name -> index in `table.files`.
    file_ids: std::collections::HashMap<String, u32>,
}

impl KallsymTableBuilder {
    /// Room for `rows` entries and `name_bytes` bytes of names, so that building never
    /// reallocates (a reallocation copies the whole table in one stretch).
    pub fn with_capacity(rows: usize, name_bytes: usize) -> Self {
        KallsymTableBuilder {
            table: KallsymTable {
                names: String::with_capacity(name_bytes),
                rows: Vec::with_capacity(rows),
                sections: Vec::new(),
                files: Vec::new(),
            },
            file_ids: std::collections::HashMap::new(),
        }
    }

    /// Room for `n` section names.
    pub fn reserve_sections(&mut self, n: usize) {
        self.table.sections.reserve_exact(n);
    }

    fn append(&mut self, s: &str) -> Span {
        let start = self.table.names.len();
        self.table.names.push_str(s);
        Span {
            start,
            end: self.table.names.len(),
        }
    }

    /// Appends the name of the next section header (index = number of calls before).
    pub fn push_section(&mut self, name: &str) {
        let s = self.append(name);
        self.table.sections.push(s);
    }

    /// Appends an entry; `section_index` names a section pushed before (or none: then the
    /// entry shows no section name).
    pub fn push(
        &mut self,
        name: &str,
        kind: u8,
        addr: u64,
        size: Option<u64>,
        section_index: Option<u32>,
        exported: bool,
    ) {
        let name = self.append(name);
        let flags = if size.is_some() { HAS_SIZE } else { 0 }
            | if section_index.is_some() {
                HAS_SECTION
            } else {
                0
            }
            | if exported { EXPORTED } else { 0 };
        self.table.rows.push(Row {
            name,
            addr,
            size: size.unwrap_or(0),
            section: section_index.unwrap_or(0),
            file: NO_FILE,
            kind,
            flags,
        });
    }

    /// Gives the last entry pushed its translation unit's source file.
    pub fn set_last_file(&mut self, file: &str) {
        let id = match self.file_ids.get(file) {
            Some(&id) => id,
            None => {
                let span = self.append(file);
                let id = self.table.files.len() as u32;
                self.table.files.push(span);
                self.file_ids.insert(file.to_string(), id);
                id
            }
        };
        if let Some(r) = self.table.rows.last_mut() {
            r.file = id;
        }
    }

    pub fn finish(self) -> KallsymTable {
        self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_with_their_names_and_sections() {
        let mut b = KallsymTableBuilder::with_capacity(3, 16);
        b.reserve_sections(2);
        b.push_section("");
        b.push_section(".text");
        b.push("alpha", b't', 0x10, Some(4), Some(1), false);
        b.set_last_file("inode.c");
        b.push("beta", b'A', 0x20, None, None, true);
        b.push("", b'?', 0, Some(0), Some(7), false);
        let t = b.finish();
        assert_eq!(t.len(), 3);
        assert_eq!(t.name_bytes(), 21);
        let a = t.first().unwrap();
        assert_eq!(
            a,
            ElfKallsym {
                name: "alpha",
                kind: b't',
                addr: 0x10,
                size: Some(4),
                section: Some(".text"),
                section_index: Some(1),
                exported: false,
                file: Some("inode.c"),
            }
        );
        assert_eq!(t.get(1).unwrap().name, "beta");
        assert_eq!(t.get(1).unwrap().file, None);
        assert!(t.get(1).unwrap().exported);
        // An index past the section table keeps its number but has no name.
        assert_eq!(t.last().unwrap().section, None);
        assert_eq!(t.last().unwrap().section_index, Some(7));
        assert_eq!(t.get(3), None);
        let names: Vec<&str> = t.iter().rev().map(|e| e.name).collect();
        assert_eq!(names, ["", "beta", "alpha"]);
        assert_eq!((&t).into_iter().len(), 3);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<Row>(), 48);
        t.free_with_points(&mut Resched::none()).unwrap();
    }
}
