//! The stem index: compiler-made variants of a name (`init_once.isra.0`, `foo.constprop.0`,
//! `bar.part.0`, `baz.cold`, `qux.llvm.123`) found without a walk over the whole table.
//!
//! GCC and Clang name the copies they make `NAME.SUFFIX`; a patch author asking for `NAME`
//! (which may no longer exist) needs to hear about them. Only dotted names are indexed, by
//! their stem (the part before the first dot), each stem's symbols in kernel order; a query
//! for `NAME` reads the stem's list and keeps the names starting with `NAME.`.

use std::collections::HashMap;

use crate::columns::Columns;
use crate::resched::{Cancelled, Resched};

/// The stem a name is indexed under: the part before its first dot, when the name has one
/// and does not start with it (`.L...`, `.klp...` have no stem to speak of).
pub(crate) fn stem_of(name: &[u8]) -> Option<&[u8]> {
    let dot = name.iter().position(|&b| b == b'.').filter(|&d| d > 0)?;
    Some(&name[..dot])
}

/// True when `candidate` is a variant of `name` as the index finds it: indexed under the stem
/// of `name`, and `name` followed by a dot and more.
#[inline]
pub(crate) fn is_variant(candidate: &[u8], name: &str) -> bool {
    let q = name.as_bytes();
    // The cheap tests first: a walk asks this of every symbol, and almost all fail here.
    candidate.len() > q.len()
        && candidate[q.len()] == b'.'
        && candidate.starts_with(q)
        && stem_of(candidate) == Some(&q[..q.iter().position(|&b| b == b'.').unwrap_or(q.len())])
}

#[derive(Debug, Default)]
pub(crate) struct StemIndex {
    by_stem: HashMap<Box<str>, Vec<u32>>,
}

impl StemIndex {
    pub(crate) fn build(table: Columns<'_>, resched: &mut Resched) -> Result<StemIndex, Cancelled> {
        let mut by_stem: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        for i in 0..table.syms.len() as u32 {
            resched.tick()?;
            let Some(name) = table.name(i) else { continue };
            // A leading dot (`.L...`, `.klp...`) has no stem to speak of.
            if let Some(dot) = name.find('.').filter(|&d| d > 0) {
                by_stem.entry(name[..dot].into()).or_default().push(i);
            }
        }
        Ok(StemIndex { by_stem })
    }

    /// Symbols (indices, kernel order) whose names start with `name.`.
    pub(crate) fn variants<'a>(
        &'a self,
        table: Columns<'a>,
        name: &'a str,
    ) -> impl Iterator<Item = u32> + 'a {
        let stem = &name[..name.find('.').unwrap_or(name.len())];
        self.by_stem
            .get(stem)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |&i| {
                let n = table.name_bytes(i);
                n.len() > name.len() && n.starts_with(name.as_bytes()) && n[name.len()] == b'.'
            })
    }

    pub(crate) fn free_with(self, resched: &mut Resched) -> Result<(), Cancelled> {
        for (k, v) in self.by_stem {
            drop(k);
            crate::bulk::free_with_points(v, resched)?;
        }
        Ok(())
    }
}
