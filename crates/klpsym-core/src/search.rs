//! Name search: which names exist, by glob or substring, with their counts and objects (the
//! query behind `klpsym search`).

use crate::resched::{Cancelled, Resched};
use crate::{ObjectId, ObjectKind, SymbolTable};

#[derive(Debug)]
/// How a pattern matches a name: a glob when it has `*`, `?` or `[`, else a substring.
pub enum NamePattern {
    /// A shell glob over the whole name (`*` crosses nothing special: names have no `/`),
    /// with the longest literal run of the pattern, which every match contains: a cheap
    /// substring test that turns most names away before the glob runs.
    Glob(globset::GlobMatcher, memchr::memmem::Finder<'static>),
    /// A plain substring (and its searcher).
    Substring(String, memchr::memmem::Finder<'static>),
}

impl NamePattern {
    /// Reads `pattern`; the error is the glob's own message.
    pub fn new(pattern: &str) -> Result<NamePattern, globset::Error> {
        if pattern.contains(['*', '?', '[']) {
            let g = globset::GlobBuilder::new(pattern)
                .literal_separator(false)
                .backslash_escape(true)
                .build()?;
            Ok(NamePattern::Glob(
                g.compile_matcher(),
                memchr::memmem::Finder::new(longest_literal(pattern).as_bytes()).into_owned(),
            ))
        } else {
            Ok(NamePattern::Substring(
                pattern.to_string(),
                memchr::memmem::Finder::new(pattern.as_bytes()).into_owned(),
            ))
        }
    }

    /// `glob` or `substring`.
    pub fn mode(&self) -> &'static str {
        match self {
            NamePattern::Glob(..) => "glob",
            NamePattern::Substring(..) => "substring",
        }
    }

    /// True when `name` matches.
    pub fn is_match(&self, name: &str) -> bool {
        match self {
            NamePattern::Glob(g, lit) => lit.find(name.as_bytes()).is_some() && g.is_match(name),
            NamePattern::Substring(_, f) => f.find(name.as_bytes()).is_some(),
        }
    }
}

/// The longest run of plain characters in a glob (outside `*`, `?` and `[...]`; a `\\x`
/// escape is the plain `x`).
fn longest_literal(pattern: &str) -> String {
    let (mut best, mut cur) = (String::new(), String::new());
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        let plain = match c {
            _ if in_class => {
                in_class = c != ']';
                None
            }
            '*' | '?' => None,
            '[' => {
                in_class = true;
                None
            }
            '\\' => chars.next(),
            c => Some(c),
        };
        match plain {
            Some(c) => cur.push(c),
            None => {
                if cur.len() > best.len() {
                    best = std::mem::take(&mut cur);
                }
                cur.clear();
            }
        }
    }
    if cur.len() > best.len() {
        best = cur;
    }
    best
}

/// One matching name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameMatch<'t> {
    /// The name.
    pub name: &'t str,
    /// Definitions in all objects searched.
    pub count: usize,
    /// The objects defining it, in kallsyms order, each once.
    pub objects: Vec<ObjectId>,
}

/// Every name matching `pattern` (in `object` only when given), in the order kallsyms first
/// lists them; pseudo objects (per-cpu, absolute) are not searched.
pub fn search_names<'t>(
    t: &'t SymbolTable,
    pattern: &NamePattern,
    object: Option<ObjectId>,
    rs: &mut Resched,
) -> Result<Vec<NameMatch<'t>>, Cancelled> {
    let mut seen: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
    let mut out: Vec<NameMatch<'t>> = Vec::new();
    for s in t.iter() {
        rs.tick()?;
        if object.is_some_and(|o| o != s.object)
            || t.object_info(s.object).kind == ObjectKind::Pseudo
            || !pattern.is_match(s.name)
        {
            continue;
        }
        let i = *seen.entry(s.name).or_insert_with(|| {
            out.push(NameMatch {
                name: s.name,
                count: 0,
                objects: Vec::new(),
            });
            out.len() - 1
        });
        let e = &mut out[i];
        e.count += 1;
        if !e.objects.contains(&s.object) {
            e.objects.push(s.object);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTableBuilder;

    fn table() -> SymbolTable {
        let mut b = SymbolTableBuilder::with_capacity(8, 64);
        for (a, n) in [
            (0x10, "init_once"),
            (0x20, "init_once.isra.0"),
            (0x30, "do_init"),
            (0x40, "init_once"),
        ] {
            b.push(ObjectId::VMLINUX, a, b't', n).unwrap();
        }
        let m = b.object("ext4", ObjectKind::Module);
        b.push(m, 0x100, b't', "init_once").unwrap();
        b.build()
    }

    #[test]
    fn globs_and_substrings_count_definitions_and_objects() {
        let t = table();
        let g = NamePattern::new("init_once*").unwrap();
        assert_eq!(g.mode(), "glob");
        let r = search_names(&t, &g, None, &mut Resched::none()).unwrap();
        let got: Vec<(&str, usize, usize)> = r
            .iter()
            .map(|m| (m.name, m.count, m.objects.len()))
            .collect();
        assert_eq!(got, [("init_once", 3, 2), ("init_once.isra.0", 1, 1)]);
        let s = NamePattern::new("init").unwrap();
        assert_eq!(s.mode(), "substring");
        let r = search_names(&t, &s, Some(ObjectId::VMLINUX), &mut Resched::none()).unwrap();
        let names: Vec<&str> = r.iter().map(|m| m.name).collect();
        assert_eq!(names, ["init_once", "init_once.isra.0", "do_init"]);
        assert!(NamePattern::new("[").is_err());
        assert_eq!(longest_literal("ext4_*_inode"), "_inode");
        assert_eq!(longest_literal("a[bcdefg]cd*"), "cd");
        assert_eq!(longest_literal("\\*x"), "*x");
        assert_eq!(longest_literal("*"), "");
        // The literal is a filter only: a class or `?` still decides.
        let p = NamePattern::new("in?t_on[cx]e").unwrap();
        assert!(p.is_match("init_once") && !p.is_match("init_onde"));
    }
}
