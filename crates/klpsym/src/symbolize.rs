//! Addresses to symbols as the kernel's `%pS` prints them, and back: `name+0xoff[/0xsize]
//! [module]` to the address it stands for. Reads what people paste.

use serde::Serialize;

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{normalize_module_name, ObjectId, SymbolizeOutcome, SIZE_UNKNOWN};

use klpsym_core::hex_serde;

use crate::error::{Error, ErrorKind, Result};
use crate::kernel::{Kernel, Note};
use crate::module_size::ModuleLookup;
use crate::stack_entry::{claimed_symbol, Query};

/// Why an address has no symbol (`%pS` then prints the number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoSymbol {
    /// Below the table's first symbol.
    BeforeFirstSymbol,
    /// Past the end of the symbol just below it (`nearest`).
    OutsideSymbol,
    /// A vmlinux address outside `[_stext, _end)` (`is_ksym_addr()`), though kallsyms lists
    /// symbols there.
    OutsideKernel,
    /// The source hides addresses (all zero).
    AddressesHidden,
    /// A `name+0xoff/0xsize [module]` of a module no kallsyms placed (the kernel's table does
    /// not list it, or lists it unplaced, from its `.ko`): no address, but the frame is the
    /// module's own place, decoded from its debug file by name and offset as
    /// decode_stacktrace.sh does ([`AddrAnswer::source`]). A bare address in such a module
    /// needs the placement.
    ModuleNotPlaced,
}

/// The answer to one query: `%pS` of an address, or the address `name+0xoff` stands for.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct AddrAnswer {
    /// The argument or input line, as given.
    pub input: String,
    /// Its line on standard input (the caller sets it; `None` for an argument).
    pub line: Option<usize>,
    /// Why the input could not be read or resolved (then the other fields are empty).
    pub error: Option<String>,
    /// The address (for `name+0xoff` input: the address it stands for).
    #[serde(serialize_with = "hex_serde::addr_opt")]
    pub address: Option<u64>,
    /// For `name+0xoff` input: every address it stands for (one per definition matched), in
    /// kernel order. JSON: the addresses alone.
    #[serde(serialize_with = "resolved_addresses")]
    pub addresses: Vec<Resolved>,
    /// true when the address is inside a symbol.
    pub found: bool,
    /// What %pS prints: `name+0xoff/0xsize [module]`, or, where no symbol is, the number
    /// (`0xffffffffc0001000`). `None` for an input that could not be read or hidden addresses.
    pub text: Option<String>,
    /// The symbol's name.
    pub symbol: Option<String>,
    /// The offset into it.
    #[serde(serialize_with = "hex_serde::num_opt")]
    pub offset: Option<u64>,
    /// Its size, when known.
    #[serde(serialize_with = "hex_serde::num_opt")]
    pub size: Option<u64>,
    /// Module or pseudo-object; `None` for vmlinux.
    pub module: Option<String>,
    /// Why not found.
    pub reason: Option<NoSymbol>,
    /// For [`NoSymbol::OutsideSymbol`] and [`NoSymbol::OutsideKernel`]: the symbol just below
    /// the address.
    pub nearest: Option<String>,
    /// Why no symbol, in words (not what the kernel prints: `--explain` shows it).
    pub explanation: Option<String>,
    /// For a stack line giving both `[<address>]` and `name+0xoff/0xsize [module]` that do not
    /// agree: the `name+0xoff...` the line gives (the address is what was answered).
    pub line_says: Option<String>,
    /// For `name+0xoff/0xsize` input whose size no definition of the name has here: the size
    /// the input gives (each address answered is the name's here, [`Resolved::size`] its size).
    #[serde(serialize_with = "hex_serde::num_opt")]
    pub line_size: Option<u64>,
    /// The place's `file:line` and inline chain, innermost first, when asked for
    /// ([`Kernel::add_source_lines`]) and the kernel's DWARF tells them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<klpsym_elf::SourceFrame>,
}

impl AddrAnswer {
    pub(crate) fn failed(input: &str, error: String) -> AddrAnswer {
        AddrAnswer {
            input: input.to_string(),
            line: None,
            error: Some(error),
            address: None,
            addresses: Vec::new(),
            found: false,
            text: None,
            symbol: None,
            offset: None,
            size: None,
            module: None,
            reason: None,
            nearest: None,
            explanation: None,
            line_says: None,
            line_size: None,
            source: Vec::new(),
        }
    }

    /// Whether this answer names what `claimed` names (its size and module only where the
    /// claim gives them).
    fn agrees_with(&self, claimed: &Query) -> bool {
        let Query::Symbol {
            name,
            offset,
            size,
            module,
        } = claimed
        else {
            return true;
        };
        self.symbol.as_deref() == Some(name.as_str())
            && self.offset == Some(*offset)
            && size.is_none_or(|s| self.size == Some(s))
            && (module.is_none() || self.module == *module)
    }
}

/// One address `name+0xoff` stands for: [`Kernel::resolve_symbol`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The name.
    pub name: String,
    /// The address.
    pub address: u64,
    /// The object defining the name (`vmlinux` or a module).
    pub object: String,
    /// This definition's size, when known (it differs from the size asked when no
    /// definition has that size: see [`Kernel::resolve_symbol`]).
    pub size: Option<u64>,
}

fn resolved_addresses<S: serde::Serializer>(
    v: &[Resolved],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|r| klpsym_core::hex(r.address)))
}

/// How one query ended (ordered from best to worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Ended {
    /// Answered.
    Found,
    /// Read, but the kernel has no symbol there (or no such symbol).
    NotFound,
    /// The input could not be read.
    Unreadable,
}

impl Kernel {
    /// `%pS` of `addr`: the symbol it lies in with the offset and size, or why none.
    ///
    /// A vmlinux address is looked up only inside the kernel's own range, as `is_ksym_addr()`
    /// bounds it with CONFIG_KALLSYMS_ALL: from `_stext` to `_end`, `_end` excluded since
    /// 5.16 ("kallsyms: Fix address-checks for kernel related range"; the lab's 5.10 prints
    /// `_end+0x0/...`, its 6.1 the bare number). Outside it the kernel prints the number
    /// ([`SymbolizeOutcome::OutsideKernel`]), though kallsyms lists symbols past `_end`.
    pub fn symbolize(&self, addr: u64) -> SymbolizeOutcome<'_> {
        self.symbolize_by(addr, self.module_lookup())
    }

    /// [`Kernel::symbolize`] with module symbols bounded by `lookup`.
    fn symbolize_by(&self, addr: u64, lookup: ModuleLookup) -> SymbolizeOutcome<'_> {
        if let Some(o) = self.symbolize_in_module(addr, lookup) {
            return o;
        }
        let o = self.past_placed_module(self.inner.table.symbolize(addr));
        let o = self.listed_module_size(o, addr, lookup);
        if let SymbolizeOutcome::Found(s) = &o {
            if s.module.is_none() && s.symbol.object == ObjectId::VMLINUX {
                if let Some((start, end)) = self.ksym_range() {
                    if addr < start || addr >= end {
                        return SymbolizeOutcome::OutsideKernel { nearest: s.symbol };
                    }
                }
            }
        }
        o
    }

    /// `%pS` of many addresses at once, in the order given: the batch path (the table's
    /// address index walked once over the sorted batch), with reschedule points, then the
    /// same bounds as [`Kernel::symbolize`].
    pub fn symbolize_batch(&self, addrs: &[u64]) -> Result<Vec<SymbolizeOutcome<'_>>> {
        let mut out = Vec::new();
        let mut rs = self.opts.resched();
        self.inner
            .table
            .symbolize_batch_with(addrs, &mut out, &mut rs)?;
        let lookup = self.module_lookup();
        if !self.inner.module_layouts.is_empty() {
            for (o, &a) in out.iter_mut().zip(addrs) {
                rs.tick()?;
                *o = match self.symbolize_in_module(a, lookup) {
                    Some(m) => m,
                    None => self.past_placed_module(*o),
                };
            }
        }
        for (o, &a) in out.iter_mut().zip(addrs) {
            rs.tick()?;
            *o = self.listed_module_size(*o, a, lookup);
        }
        if let Some((start, end)) = self.ksym_range() {
            for (o, &a) in out.iter_mut().zip(addrs) {
                if let SymbolizeOutcome::Found(s) = o {
                    if s.module.is_none()
                        && s.symbol.object == ObjectId::VMLINUX
                        && (a < start || a >= end)
                    {
                        *o = SymbolizeOutcome::OutsideKernel { nearest: s.symbol };
                    }
                }
            }
        }
        Ok(out)
    }

    /// `%pB` of `addr`, a return address as stack traces hold them (`sprint_backtrace()`):
    /// the symbol of `addr - 1`, with the offset plus one, so that a call ending a function
    /// is still named by its caller; when there is none, the number itself.
    pub fn symbolize_return(&self, addr: u64) -> SymbolizeOutcome<'_> {
        match self.symbolize(addr.wrapping_sub(1)) {
            SymbolizeOutcome::Found(mut s) => {
                s.offset += 1;
                SymbolizeOutcome::Found(s)
            }
            o => o,
        }
    }

    /// The table's answer `o` for an address in no placed module's memory
    /// ([`Kernel::symbolize_in_module`] said `None`): a symbol of a module whose layout is
    /// known does not reach there (the kernel's `__module_address()` finds no module and
    /// `%pS` prints the number), so it is `Outside` that symbol.
    fn past_placed_module<'a>(&'a self, o: SymbolizeOutcome<'a>) -> SymbolizeOutcome<'a> {
        match o {
            SymbolizeOutcome::Found(s)
                if s.module
                    .is_some_and(|m| self.inner.module_layouts.iter().any(|(n, _)| n == m)) =>
            {
                SymbolizeOutcome::Outside {
                    nearest: s.symbol,
                    size: s.size,
                }
            }
            o => o,
        }
    }

    /// `%pS` of an address in (or past) a module placed from its `.ko`, whose layout is known:
    /// `find_kallsyms_symbol()`'s answer (kernel/module/kallsyms.c; kernel/module.c in
    /// 5.10). The best symbol is the highest of the module's at or below the address (the
    /// first of equal ones in the module's order; empty names and mapping symbols passed
    /// over); its size runs to the next higher symbol, at most to the end of the module's
    /// text — also for a data symbol, whose size then wraps around as the kernel's unsigned
    /// arithmetic does (`__this_module+0x0/0xfffffffffffff000` on 6.1). `None` when the
    /// address is in no such module (the table answers as before).
    ///
    /// Where the kernel selects the address's own memory region first
    /// ([`ModuleLookup::ByRegion`]), the best symbol is one in that region and its size
    /// runs at most to the region's end; an address in no region it scans (without
    /// CONFIG_KALLSYMS_ALL, any but the text) or below the region's first symbol prints as
    /// the number.
    fn symbolize_in_module(&self, addr: u64, lookup: ModuleLookup) -> Option<SymbolizeOutcome<'_>> {
        let k = &self.inner;
        let Some(i) = k.module_layouts.iter().position(|(_, l)| l.contains(addr)) else {
            return self.symbolize_in_freed_init(addr);
        };
        let layout = &k.module_layouts[i].1;
        let t = &k.table;
        let syms = &self.module_symbols()[i];
        // The lowest value a best symbol may have, and the bound of its size.
        let (floor, end) = match lookup {
            ModuleLookup::ToTextEnd => (0, layout.text_end?),
            ModuleLookup::ByRegion { text_only } => match layout.region_of(addr, text_only) {
                Some(r) => r,
                None => return Some(SymbolizeOutcome::BeforeFirst),
            },
        };
        // The best: the highest at or below the address, the first of equal ones.
        let upto = syms.partition_point(|&(a, _)| a <= addr);
        let Some(&(best_addr, _)) = upto
            .checked_sub(1)
            .map(|u| &syms[u])
            .filter(|&&(a, _)| a >= floor)
        else {
            // No symbol at or below: the kernel prints the number.
            return Some(SymbolizeOutcome::BeforeFirst);
        };
        let first = syms.partition_point(|&(a, _)| a < best_addr);
        let best = t.symbol(syms[first].1);
        let mut next = end;
        if let Some(&(a, _)) = syms.get(upto) {
            next = next.min(a);
        }
        Some(SymbolizeOutcome::Found(klpsym_core::Symbolized {
            symbol: best,
            offset: addr - best.addr,
            size: next.wrapping_sub(best.addr),
            module: Some(t.object_info(best.object).name.as_str()),
        }))
    }

    /// `%pS` of an address in a placed livepatch module's init text once the loader has
    /// freed it: the name ftrace kept for a function there with an ftrace call site
    /// ([`klpsym_elf::ModuleLayout::traced_init`]: `ftrace_mod_address_lookup()`), its
    /// offset, and the size kallsyms gave it while the init text was live (the next symbol
    /// of the module above it, at most the init text's end: `find_kallsyms_symbol()` then).
    /// `None` elsewhere (the kernel finds no module there and prints the number).
    fn symbolize_in_freed_init(&self, addr: u64) -> Option<SymbolizeOutcome<'_>> {
        let k = &self.inner;
        let (i, (base, end)) = k
            .module_layouts
            .iter()
            .enumerate()
            .find_map(|(i, (_, l))| {
                l.init_text
                    .filter(|&(b, e)| b <= addr && addr < e && !l.traced_init.is_empty())
                    .map(|r| (i, r))
            })?;
        let layout = &k.module_layouts[i].1;
        let syms = &self.module_symbols()[i];
        let upto = syms.partition_point(|&(a, _)| a <= addr);
        let &(best_addr, _) = upto.checked_sub(1).map(|u| &syms[u])?;
        if best_addr < base || layout.traced_init.binary_search(&best_addr).is_err() {
            return None;
        }
        let first = syms.partition_point(|&(a, _)| a < best_addr);
        let t = &k.table;
        let best = t.symbol(syms[first].1);
        let next = syms.get(upto).map_or(end, |&(a, _)| a.min(end));
        let size = next.wrapping_sub(best.addr);
        // ftrace answers within the function only: [start, start + size).
        (addr - best.addr < size).then(|| {
            SymbolizeOutcome::Found(klpsym_core::Symbolized {
                symbol: best,
                offset: addr - best.addr,
                size,
                module: Some(t.object_info(best.object).name.as_str()),
            })
        })
    }

    /// How this kernel bounds a module symbol, by its version and stable sublevel
    /// ([`Kernel::kernel_version`]) and whether kallsyms holds data symbols
    /// (CONFIG_KALLSYMS_ALL). Unknown version: the newer rule (said by
    /// [`Kernel::version_assumed`]).
    pub(crate) fn module_lookup(&self) -> ModuleLookup {
        *self
            .module_lookup
            .get_or_init(|| match self.kernel_version().0 {
                // Nothing known: today's rule, with data symbols.
                None => ModuleLookup::ByRegion { text_only: false },
                Some(v) if !ModuleLookup::by_region(v.series(), v.sublevel) => {
                    ModuleLookup::ToTextEnd
                }
                Some(_) => self.by_region_lookup(),
            })
    }

    /// [`ModuleLookup::ByRegion`] for this kernel's CONFIG_KALLSYMS_ALL.
    fn by_region_lookup(&self) -> ModuleLookup {
        let mut rs = self.opts.resched();
        // A stop asked during the walk must not decide the cached answer: the walk is
        // finished without points then (as the stem index's first build is).
        let all = crate::target::knows_exports(&self.inner.table, &mut rs)
            .or_else(|Cancelled| {
                crate::target::knows_exports(&self.inner.table, &mut Resched::none())
            })
            .expect("no cancellation without a flag");
        ModuleLookup::ByRegion { text_only: !all }
    }

    /// Why the size of a module symbol is assumed: the kernel's version (or, in a series
    /// that took the change in a stable release, its sublevel) is not known. `None` when
    /// the version decides.
    pub(crate) fn module_rule_assumed(&self) -> Option<String> {
        let (v, _) = self.kernel_version();
        let (why, rule) = match v {
            None => (
                "the kernel version is not known (no banner in this source)".to_string(),
                "the newer rule",
            ),
            Some(v) if v.sublevel.is_none() && ModuleLookup::depends_on_sublevel(v.series()) => (
                format!(
                    "the stable sublevel of {v} is not known, and {v}.y took the change in a stable release"
                ),
                "the series' first release's (older) rule",
            ),
            Some(_) => return None,
        };
        Some(format!(
            "the size of a module symbol depends on the kernel version (\"module/kallsyms: fix nextval for data symbol lookup\": 6.12.117+, 6.18.50+, 7.2.4+ and 7.3+ end it with the symbol's own memory region, older kernels with the module's text, so that a data symbol's size wraps): {why}; {rule} was assumed — state the kernel version with its stable sublevel"
        ))
    }

    /// What `answers` assumed because this kernel's version is not known, as a warning naming
    /// the fact and the option that states it ([`crate::Options::kernel_version`]): said only
    /// where an answer would read otherwise under the other rule (a module symbol's size).
    /// `None` when the version decides or no answer depends on it.
    pub fn version_assumed(&self, answers: &[AddrAnswer]) -> Option<Note> {
        let why = self.module_rule_assumed()?;
        let now = self.module_lookup();
        let other = match now {
            ModuleLookup::ToTextEnd => self.by_region_lookup(),
            ModuleLookup::ByRegion { .. } => ModuleLookup::ToTextEnd,
        };
        let depends = answers
            .iter()
            .filter(|a| a.module.is_some())
            .filter_map(|a| a.address)
            .any(|addr| {
                [addr, addr.wrapping_sub(1)]
                    .iter()
                    .any(|&x| self.symbolize_by(x, now) != self.symbolize_by(x, other))
            });
        depends.then(|| {
            Note::warning(format!("{}: {why}", self.path().display()))
                .about(crate::error::Input::KernelVersion)
        })
    }

    /// The table's answer `o` for `addr` by `lookup`'s rule when the symbol is of a module a
    /// kallsyms lists without a layout (see `module_size.rs`): the old rule bounds every
    /// size by the end of the module's text; the newer one bounds a text symbol's by it (an
    /// address past it is outside), and leaves the rest to the next symbol.
    fn listed_module_size<'a>(
        &'a self,
        o: SymbolizeOutcome<'a>,
        addr: u64,
        lookup: ModuleLookup,
    ) -> SymbolizeOutcome<'a> {
        let (symbol, module) = match o {
            SymbolizeOutcome::Found(s) if s.module.is_some() => (s.symbol, s.module),
            SymbolizeOutcome::Outside { nearest, .. } if nearest.object != ObjectId::VMLINUX => {
                (nearest, None)
            }
            o => return o,
        };
        let listed = self.listed_modules.get_or_init(|| {
            let placed: Vec<&str> = self
                .inner
                .module_layouts
                .iter()
                .map(|(n, _)| n.as_str())
                .collect();
            let series = self.series();
            let mut rs = self.opts.resched();
            crate::module_size::ListedModules::new(&self.inner.table, &placed, series, &mut rs)
                .or_else(|Cancelled| {
                    crate::module_size::ListedModules::new(
                        &self.inner.table,
                        &placed,
                        series,
                        &mut Resched::none(),
                    )
                })
                .expect("no cancellation without a flag")
        });
        let size = match lookup {
            ModuleLookup::ToTextEnd => listed.old_rule_size(symbol.object, symbol.addr, addr),
            ModuleLookup::ByRegion { .. } => {
                match listed.text_rule(symbol.object, symbol.addr, addr) {
                    Some(crate::module_size::InText::Size(s)) => Some(s),
                    Some(crate::module_size::InText::Past(size)) => {
                        return SymbolizeOutcome::Outside {
                            nearest: symbol,
                            size,
                        }
                    }
                    None => None,
                }
            }
        };
        let Some(size) = size else {
            return o;
        };
        let t = &self.inner.table;
        let info = t.object_info(symbol.object);
        if info.kind != klpsym_core::ObjectKind::Module {
            return o;
        }
        SymbolizeOutcome::Found(klpsym_core::Symbolized {
            symbol,
            offset: addr - symbol.addr,
            size,
            module: module.or(Some(info.name.as_str())),
        })
    }

    /// For each module of [`klpsym_io::LoadedKernel::module_layouts`], its symbols as
    /// `find_kallsyms_symbol()` scans them (empty names, undefined and mapping symbols left
    /// out), sorted
    /// by address, equal ones in the module's order; made once.
    fn module_symbols(&self) -> &[Vec<(u64, klpsym_core::SymbolId)>] {
        self.module_syms.get_or_init(|| {
            let t = &self.inner.table;
            let version = self.series().unwrap_or((99, 0));
            self.inner
                .module_layouts
                .iter()
                .map(|(name, _)| {
                    let Some(oid) = t.object_by_name(name) else {
                        return Vec::new();
                    };
                    let mut v: Vec<(u64, klpsym_core::SymbolId)> = t
                        .iter()
                        .filter(|s| s.object == oid)
                        // A livepatch module keeps its undefined symbols in its symbol
                        // table (resolved to their definitions' addresses), which
                        // find_kallsyms_symbol() passes over (SHN_UNDEF).
                        .filter(|s| {
                            !s.name.is_empty()
                                && !matches!(s.kind as u8, b'u' | b'U')
                                && !klpsym_elf::is_mapping_symbol(s.name, version)
                        })
                        .map(|s| (s.addr, s.id))
                        .collect();
                    v.sort_by_key(|&(a, _)| a);
                    v
                })
                .collect()
        })
    }

    /// `[_stext, _end)` (`_end` included before 5.16), when vmlinux's table names both.
    fn ksym_range(&self) -> Option<(u64, u64)> {
        *self.ksym_range.get_or_init(|| {
            let t = &self.inner.table;
            let at = |name: &str| {
                t.by_name(name)
                    .find(|s| s.object == ObjectId::VMLINUX)
                    .map(|s| s.addr)
            };
            let (start, end) = (at("_stext")?, at("_end")?);
            let version = self.series();
            // Unknown version: today's rule.
            let inclusive = version.is_some_and(|v| v < (5, 16));
            Some((
                start,
                if inclusive {
                    end.saturating_add(1)
                } else {
                    end
                },
            ))
        })
    }

    /// The addresses `name+offset` stands for: every definition of `name` (in `module` when
    /// given; vmlinux's when none), narrowed to those of the given size when the size is
    /// known and some definition has it. When none has it (a trace of another build), every
    /// definition is still answered, each with its own [`Resolved::size`]: the caller says the
    /// difference. Each with its object's name.
    pub fn resolve_symbol(
        &self,
        name: &str,
        offset: u64,
        size: Option<u64>,
        module: Option<&str>,
    ) -> Result<Vec<Resolved>> {
        let t = &self.inner.table;
        let object = match module {
            Some(m) => Some(t.object_by_name(&normalize_module_name(m)).ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("module '{m}' is not in {}", self.path().display()),
                )
            })?),
            None => None,
        };
        let mut out = Vec::new();
        let mut other_size = Vec::new();
        for s in t.by_name(name) {
            if object.is_some_and(|o| o != s.object) {
                continue;
            }
            if object.is_none() && s.object != ObjectId::VMLINUX {
                continue;
            }
            if t.object_info(s.object).unplaced {
                return Err(Error::bad_input(format!(
                    "{name} is in {}, an unplaced module (read from its .ko): it has no load address until placed by a kallsyms that lists it",
                    t.object_info(s.object).name
                )));
            }
            let known = t.size(s.id);
            let r = Resolved {
                name: name.to_string(),
                address: s.addr.wrapping_add(offset),
                object: t.object_info(s.object).name.clone(),
                size: (known != SIZE_UNKNOWN).then_some(known),
            };
            match size {
                Some(sz) if known != SIZE_UNKNOWN && known != sz => other_size.push(r),
                _ => out.push(r),
            }
        }
        if out.is_empty() {
            out = other_size;
        }
        if out.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                match module {
                    Some(m) => format!("no symbol {name} in [{m}]"),
                    None => {
                        format!("no symbol {name} in vmlinux (for a module symbol add [module])")
                    }
                },
            ));
        }
        Ok(out)
    }

    /// The answer to `addr` as JSON carries it.
    pub fn describe_address(&self, input: &str, addr: u64) -> AddrAnswer {
        self.describe(input, addr, false)
    }

    /// [`Kernel::describe_address`] of a return address, as `%pB` prints it.
    pub fn describe_return_address(&self, input: &str, addr: u64) -> AddrAnswer {
        self.describe(input, addr, true)
    }

    fn describe(&self, input: &str, addr: u64, return_address: bool) -> AddrAnswer {
        let mut r = AddrAnswer {
            error: None,
            address: Some(addr),
            ..AddrAnswer::failed(input, String::new())
        };
        let outcome = if return_address {
            self.symbolize_return(addr)
        } else {
            self.symbolize(addr)
        };
        let t = self.table();
        // What %pS prints where no symbol is: the number (`0x%lx`, `__sprint_symbol()`).
        let number = format!("{addr:#x}");
        match outcome {
            SymbolizeOutcome::Found(s) => {
                r.found = true;
                r.text = Some(s.to_string());
                r.symbol = Some(s.symbol.name.to_string());
                r.offset = Some(s.offset);
                r.size = (s.size != SIZE_UNKNOWN).then_some(s.size);
                r.module = s.module.map(str::to_string);
            }
            SymbolizeOutcome::BeforeFirst => {
                r.reason = Some(NoSymbol::BeforeFirstSymbol);
                r.text = Some(number);
                r.explanation = Some("below the first symbol".to_string());
            }
            SymbolizeOutcome::Outside { nearest, size } => {
                let obj = &t.object_info(nearest.object).name;
                r.reason = Some(NoSymbol::OutsideSymbol);
                r.nearest = Some(nearest.name.to_string());
                r.size = (size != SIZE_UNKNOWN).then_some(size);
                r.text = Some(number);
                r.explanation = Some(if size == SIZE_UNKNOWN {
                    format!(
                        "outside every symbol: past {} [{obj}], the last symbol there, whose size is unknown",
                        nearest.name
                    )
                } else {
                    format!(
                        "outside every symbol: past the end of {} [{obj}] at {:#x}",
                        nearest.name,
                        nearest.addr.wrapping_add(size)
                    )
                });
            }
            SymbolizeOutcome::AddressesHidden => r.reason = Some(NoSymbol::AddressesHidden),
            SymbolizeOutcome::OutsideKernel { nearest } => {
                r.reason = Some(NoSymbol::OutsideKernel);
                r.nearest = Some(nearest.name.to_string());
                r.text = Some(number);
                r.explanation = Some(format!(
                    "not a kernel address: outside vmlinux's _stext.._end, past {}",
                    nearest.name
                ));
            }
        }
        r
    }

    /// Answers one parsed query (or reports why it could not be read).
    pub fn answer(&self, input: &str, q: &Result<Query>) -> (AddrAnswer, Ended) {
        self.answer_with(input, q, false)
    }

    /// [`Kernel::answer`], addresses read as return addresses (`%pB`) when `return_address`.
    pub fn answer_with(
        &self,
        input: &str,
        q: &Result<Query>,
        return_address: bool,
    ) -> (AddrAnswer, Ended) {
        match q {
            Err(e) => (AddrAnswer::failed(input, e.to_string()), Ended::Unreadable),
            Ok(Query::Address(a)) => {
                let mut r = self.describe(input, *a, return_address);
                if let Some(claimed) = claimed_symbol(input) {
                    if !r.agrees_with(&claimed) {
                        r.line_says = Some(claimed.to_string());
                    }
                }
                let e = if r.found {
                    Ended::Found
                } else {
                    Ended::NotFound
                };
                (r, e)
            }
            Ok(Query::Symbol {
                name,
                offset,
                size,
                module,
            }) => match self.resolve_symbol(name, *offset, *size, module.as_deref()) {
                Err(e) if e.kind() != ErrorKind::Cancelled && module.is_some() => {
                    self.module_frame(input, name, *offset, *size, module.as_deref(), e)
                }
                Err(e) => (AddrAnswer::failed(input, e.to_string()), Ended::NotFound),
                Ok(hits) => {
                    let mut r = self.describe_address(input, hits[0].address);
                    // No definition of the size the line gives: answered, the difference said
                    // (a trace of another build), and not a clean answer.
                    let differs =
                        size.filter(|sz| hits.iter().all(|h| h.size.is_some_and(|x| x != *sz)));
                    r.line_size = differs;
                    r.addresses = hits;
                    let ended = if differs.is_some() {
                        Ended::NotFound
                    } else {
                        Ended::Found
                    };
                    (r, ended)
                }
            },
        }
    }
}
