//! Stack entries as kernels print them, read from what people paste: an oops, a `dmesg`, a
//! journal. Each form comes from the kernel's printing code, per architecture and version:
//!
//! - x86: `printk_stack_address()` (arch/x86/kernel/dumpstack.c) prints `"%s %s%pB\n"` with
//!   `"? "` for an entry the unwinder does not trust (4.15 to 5.13), `%pBb` since 5.14 (the
//!   module's build id after its name: `[dummy 89ab...]`); before 4.15 `printk_address()`
//!   printed `" [<%p>] %s%pS\n"` (the address in brackets first). `show_iret_regs()` and
//!   `show_ip()` print `"RIP: %04x:%pS\n"` (the code segment, then the place; for a user-mode
//!   frame, segment 0033 or 0023, a user address); 32-bit kernels `"EIP: %pS\n"`; before 4.15
//!   `__show_regs()` printed `"RIP: %04lx:[<%016lx>] "` then the entry. `__warn()`
//!   (kernel/panic.c) prints `"WARNING: CPU: %d PID: %d at %pS\n"`.
//! - arm64: `dump_backtrace_entry()` (arch/arm64/kernel/stacktrace.c, traps.c before 5.x)
//!   prints `"%s %pS\n"` (`%pSb` since 5.14) under `"Call trace:\n"`; since 6.13 it adds where
//!   the unwinder took the entry from, `" (P)"`, `" (L)"`, `" (T)"`, `" (C)"`, `" (U)"`, with
//!   `F` (ftrace graph) and `K` (kretprobe) flags: `" (PF)"`. `__show_regs()`
//!   (arch/arm64/kernel/process.c) prints `"pc : %pS\n"` and `"lr : %pS\n"` for a kernel-mode
//!   frame, `"pc : %016llx\n"` (no `0x`, no symbol) for a user-mode one.
//! - Everywhere `%pS`/`%pB` print `name+0xoff/0xsize [module]`, or the number (`0x%lx`,
//!   `__sprint_symbol()`) where no symbol is. Before the entry a line may carry the log's
//!   own prefix: a level (`<4>`), a syslog or journal header ending in `kernel: `, printk's
//!   time stamp (`[   12.345678]`) and caller id (`[    T1]`, `[  C0]`).
//!
//! A line that is one of these forms is a stack entry; one shaped as an entry that cannot be
//! read (`[<zz>]`, `? foo+0xzz/0x10`) is one that could not be decoded, and is marked so; any
//! other line is passed through.

use crate::error::{Error, Result};

/// Parses `ffffffff81000000`, `0xffffffff81000000` (and upper case).
pub fn parse_addr(s: &str) -> Option<u64> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if t.is_empty() || t.len() > 16 {
        return None;
    }
    u64::from_str_radix(t, 16).ok()
}

/// What one argument or stack entry asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// Symbolize this address.
    Address(u64),
    /// The other direction: `name+0xoff[/0xsize] [module]` to an address.
    Symbol {
        /// The symbol name.
        name: String,
        /// The offset into it.
        offset: u64,
        /// Its size when given (`/0xsize`), which tells same-named definitions apart.
        size: Option<u64>,
        /// Its module when given (`[module]`).
        module: Option<String>,
    },
}

impl std::fmt::Display for Query {
    /// As the kernel prints it: the address as `%lx` digits; `name+0xoff[/0xsize] [module]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Query::Address(a) => write!(f, "{a:x}"),
            Query::Symbol {
                name,
                offset,
                size,
                module,
            } => {
                write!(f, "{name}+{offset:#x}")?;
                if let Some(s) = size {
                    write!(f, "/{s:#x}")?;
                }
                if let Some(m) = module {
                    write!(f, " [{m}]")?;
                }
                Ok(())
            }
        }
    }
}

/// What a line is: a stack entry, one shaped as an entry that cannot be read, or another
/// line of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A stack entry and what it asks.
    Entry(Query),
    /// Shaped as a stack entry (its marker is there) but not readable: why.
    Undecodable(String),
    /// Not a stack entry.
    Other,
}

/// Parses what people paste: an argument (a hex address, `name+0xoff[/0xsize] [module]`) or
/// a line of a kernel log holding a stack entry in any of the forms the kernels print (see
/// the module docs). A line that holds none is an error saying so.
pub fn parse_query(line: &str) -> Result<Query> {
    match parse_line(line) {
        Line::Entry(q) => Ok(q),
        Line::Undecodable(why) => Err(Error::bad_input(why)),
        Line::Other => Err(Error::bad_input(format!(
            "{:?} is neither a hex address, a kernel stack entry nor name+0xOFFSET",
            line.trim()
        ))),
    }
}

/// What the line `line` is (see [`Line`]).
pub(crate) fn parse_line(line: &str) -> Line {
    let t = strip_log_prefix(line.trim());
    // The unwinder's doubt (x86): the entry follows.
    let (doubt, t) = match t.strip_prefix("? ") {
        Some(rest) => (true, rest.trim_start()),
        None => (false, t),
    };
    if let Some(rest) = t.strip_prefix("[<") {
        return bracketed(t, rest);
    }
    if let Some(v) = register_value(t) {
        return match v {
            Some(v) => value(t, v),
            // A user-mode frame: not a kernel address.
            None => Line::Other,
        };
    }
    // `__warn()`: `at %pS`, or `at FILE:LINE %pS` (the place of the WARN, not a stack
    // entry: a line that does not read as one passes through).
    if let Some((_, at)) = t
        .strip_prefix("WARNING: CPU: ")
        .and_then(|w| w.split_once(" at "))
    {
        let at = match at.split_once(' ') {
            Some((file_line, rest)) if file_line.contains(':') && !file_line.contains('+') => rest,
            _ => at,
        };
        return match value(t, at) {
            Line::Undecodable(_) => Line::Other,
            l => l,
        };
    }
    // A lone address (`%pB` of no symbol prints the number), or `name+0xoff...`.
    if let Some(a) = single_address(t) {
        return Line::Entry(Query::Address(a));
    }
    match symbol_entry(t) {
        Some(Ok(q)) => Line::Entry(q),
        Some(Err(why)) => Line::Undecodable(why),
        None if doubt => Line::Undecodable(format!(
            "{t:?}: after the unwinder's '? ', neither an address nor name+0xOFFSET/0xSIZE"
        )),
        None => Line::Other,
    }
}

/// The log's own prefix: a level (`<4>`), a syslog or journal header (`... kernel: `),
/// printk's time stamp (`[   12.345678]`) and caller id (`[    T1]`, `[  C0]`), in any
/// number.
fn strip_log_prefix(mut t: &str) -> &str {
    if let Some(rest) = t.strip_prefix('<') {
        if let Some((level, after)) = rest.split_once('>') {
            if !level.is_empty() && level.len() <= 3 && level.bytes().all(|b| b.is_ascii_digit()) {
                t = after;
            }
        }
    }
    if let Some((_, after)) = t.split_once(" kernel: ") {
        t = after;
    }
    loop {
        let s = t.trim_start();
        let Some(inner) = s.strip_prefix('[').and_then(|r| r.split_once(']')) else {
            return s;
        };
        let (field, after) = inner;
        let f = field.trim();
        let stamp = f
            .split_once('.')
            .is_some_and(|(a, b)| is_digits(a) && is_digits(b));
        let caller = f.strip_prefix(['T', 'C']).is_some_and(is_digits);
        if !(stamp || caller) {
            return s;
        }
        t = after;
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The value of a register line that names a place: x86 `RIP: SSSS:`, `EIP: `, the old
/// `RIP  [<...>]`, arm64 `pc : ` and `lr : `. `Some(None)` for a user-mode frame (its place
/// is not a kernel address); `None` when `t` is no such line.
fn register_value(t: &str) -> Option<Option<&str>> {
    if let Some(rest) = t.strip_prefix("RIP: ") {
        // `%04x:` the code segment; its requested privilege level 3 is user mode.
        let (seg, v) = rest.split_once(':')?;
        let seg = u16::from_str_radix(seg.trim(), 16).ok()?;
        return Some((seg & 3 != 3).then_some(v.trim()));
    }
    if let Some(rest) = t.strip_prefix("RIP ") {
        // 2.6 to 4.14's summary line: `RIP  [<ffffffff8100abcd>] name+0x17/0x30`.
        let rest = rest.trim_start();
        return rest.starts_with("[<").then_some(Some(rest));
    }
    if let Some(v) = t.strip_prefix("EIP: ") {
        return Some(Some(v.trim()));
    }
    for reg in ["pc : ", "lr : "] {
        if let Some(v) = t.strip_prefix(reg) {
            let v = v.trim();
            // `%016llx` without 0x: a user-mode frame's register, not a place in the kernel.
            let user = v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit());
            return Some((!user).then_some(v));
        }
    }
    None
}

/// A register line's value: `[<address>] ...`, an address, or `name+0xoff/0xsize [module]`.
fn value(line: &str, v: &str) -> Line {
    if let Some(rest) = v.strip_prefix("[<") {
        return bracketed(line, rest);
    }
    if let Some(a) = single_address(v) {
        return Line::Entry(Query::Address(a));
    }
    match symbol_entry(v) {
        Some(Ok(q)) => Line::Entry(q),
        Some(Err(why)) => Line::Undecodable(why),
        None => Line::Undecodable(format!(
            "{line:?}: the place is neither an address nor name+0xOFFSET/0xSIZE"
        )),
    }
}

/// `[<address>]` (what follows, `name+0xoff/0xsize`, is what the kernel said of it: see
/// [`claimed_symbol`]).
fn bracketed(line: &str, rest: &str) -> Line {
    let Some((inner, _)) = rest.split_once(">]") else {
        return Line::Undecodable(format!("{line:?}: '[<' without its '>]'"));
    };
    match parse_addr(inner) {
        Some(a) => Line::Entry(Query::Address(a)),
        None => Line::Undecodable(format!("[<{inner}>] is not a hex address")),
    }
}

/// `t` as one address alone: `0x...`, or bare hex digits.
fn single_address(t: &str) -> Option<u64> {
    let t = t.trim();
    (!t.is_empty() && !t.contains(char::is_whitespace))
        .then(|| parse_addr(t))
        .flatten()
}

/// `t` as `%pS` prints a symbol: `name+0xoff[/0xsize]`, then optionally the module in
/// brackets (`[dummy]`, `[dummy 89ab...]` with its build id since 5.14) and arm64's unwind
/// source (`(P)`, `(LF)`...). `None` when `t` is not shaped so; `Err` when it is and a number
/// cannot be read.
fn symbol_entry(t: &str) -> Option<std::result::Result<Query, String>> {
    let t = t.trim();
    let (word, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
    let (name, off_size) = word.rsplit_once('+')?;
    if name.is_empty() || name.contains(['[', ']', '(', ')', '<', '>']) {
        return None;
    }
    let mut rest = rest.trim();
    let mut module = None;
    if let Some(r) = rest.strip_prefix('[') {
        let (inner, after) = r.split_once(']')?;
        let mut f = inner.split_whitespace();
        let m = f.next()?;
        let build_id = f.next();
        if f.next().is_some() || build_id.is_some_and(|b| !b.bytes().all(|c| c.is_ascii_hexdigit()))
        {
            return None;
        }
        module = Some(m.to_string());
        rest = after.trim();
    }
    if let Some(r) = rest.strip_prefix('(') {
        let (flags, after) = r.split_once(')')?;
        if flags.is_empty() || !flags.bytes().all(|c| b"PLTCUFK".contains(&c)) {
            return None;
        }
        rest = after.trim();
    }
    if !rest.is_empty() {
        return None;
    }
    let (off, size) = match off_size.split_once('/') {
        Some((o, s)) => (o, Some(s)),
        None => (off_size, None),
    };
    let hexnum = |x: &str| -> Option<u64> {
        let x = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X"))?;
        u64::from_str_radix(x, 16).ok()
    };
    let Some(offset) = hexnum(off) else {
        return Some(Err(format!("{t:?}: offset '{off}' is not 0x-prefixed hex")));
    };
    let size = match size {
        Some(sz) => match hexnum(sz) {
            Some(v) => Some(v),
            None => return Some(Err(format!("{t:?}: size '{sz}' is not 0x-prefixed hex"))),
        },
        None => None,
    };
    Some(Ok(Query::Symbol {
        name: name.to_string(),
        offset,
        size,
        module,
    }))
}

/// The `name+0xoff/0xsize [module]` a stack line gives after its `[<address>]`, if it gives
/// one.
pub(crate) fn claimed_symbol(line: &str) -> Option<Query> {
    let (_, rest) = line.split_once(">]")?;
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("? ").unwrap_or(rest);
    // The old RIP line gives the address twice: `[<a>]  [<a>] name+...`.
    let rest = match rest.strip_prefix("[<").and_then(|r| r.split_once(">]")) {
        Some((_, after)) => after,
        None => rest,
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("? ").unwrap_or(rest);
    match symbol_entry(rest) {
        Some(Ok(q)) => Some(q),
        _ => None,
    }
}

/// The architecture a kernel log is from, told by the lines only one architecture prints
/// (x86_64: `RIP: `, `Call Trace:`, `EFLAGS: `, `<TASK>`; arm64: `pc : `, `lr : `,
/// `Call trace:`, `pstate: `), else by the kernel text addresses of its stack entries
/// (x86_64's upper 2 GiB, `ffffffff80000000` up; arm64's `ffff8000...`). With its evidence.
pub(crate) fn arch_of<'a>(
    lines: impl Iterator<Item = &'a str>,
    addrs: impl Iterator<Item = u64>,
) -> Option<(&'static str, String)> {
    const X86: [&str; 5] = ["RIP: ", "Call Trace:", "EFLAGS: ", "<TASK>", "RAX: "];
    const ARM64: [&str; 5] = ["pc : ", "lr : ", "Call trace:", "pstate: ", "x29: "];
    let (mut x86, mut arm) = (Vec::new(), Vec::new());
    for l in lines {
        let t = strip_log_prefix(l.trim());
        for m in X86 {
            if t.starts_with(m) && !x86.contains(&m) {
                x86.push(m);
            }
        }
        for m in ARM64 {
            if t.starts_with(m) && !arm.contains(&m) {
                arm.push(m);
            }
        }
    }
    let said = |v: &[&str]| {
        v.iter()
            .map(|m| format!("'{}'", m.trim_end()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (x86.is_empty(), arm.is_empty()) {
        (false, true) => return Some(("x86_64", format!("its lines {}", said(&x86)))),
        (true, false) => return Some(("aarch64", format!("its lines {}", said(&arm)))),
        (false, false) => return None,
        (true, true) => {}
    }
    let (mut x86, mut arm, mut other) = (0usize, 0usize, 0usize);
    for a in addrs {
        match text_arch(a) {
            Some("x86_64") => x86 += 1,
            Some(_) => arm += 1,
            None => other += 1,
        }
    }
    match (x86, arm) {
        (n, 0) if n > 0 && other == 0 => Some((
            "x86_64",
            format!("its {n} address(es), all at or above ffffffff80000000"),
        )),
        (0, n) if n > 0 && other == 0 => Some((
            "aarch64",
            format!("its {n} address(es), all in ffff8000..."),
        )),
        _ => None,
    }
}

/// The architecture whose kernel text (image and modules) lies at `a`: x86_64's upper 2 GiB,
/// arm64's start of the kernel half with 48-bit addresses.
pub(crate) fn text_arch(a: u64) -> Option<&'static str> {
    if a >= 0xffff_ffff_8000_0000 {
        Some("x86_64")
    } else if (0xffff_8000_0000_0000..0xffff_8002_0000_0000).contains(&a) {
        Some("aarch64")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, offset: u64, size: Option<u64>, module: Option<&str>) -> Line {
        Line::Entry(Query::Symbol {
            name: name.into(),
            offset,
            size,
            module: module.map(str::to_string),
        })
    }

    fn addr(a: u64) -> Line {
        Line::Entry(Query::Address(a))
    }

    /// Regression (#45): `? 0xaddr`, `RIP: 0010:0xaddr` and time-stamped bare addresses
    /// were passed through undecoded; every form each architecture and version prints is an
    /// entry.
    #[test]
    fn every_form_the_kernels_print_is_an_entry() {
        let cases: &[(&str, Line)] = &[
            // x86, 4.15+ (%pB), with and without the unwinder's doubt and time stamps.
            (
                " ? schedule+0x10/0xa0 [dummy]",
                sym("schedule", 0x10, Some(0xa0), Some("dummy")),
            ),
            (
                "  schedule+0x10/0xa0",
                sym("schedule", 0x10, Some(0xa0), None),
            ),
            (
                "[   12.345678]  ? schedule+0x10/0xa0",
                sym("schedule", 0x10, Some(0xa0), None),
            ),
            (
                "[   12.345678][    T1]  do_one_initcall+0x41/0x200",
                sym("do_one_initcall", 0x41, Some(0x200), None),
            ),
            (
                "<4>[    0.5] ? 0xffffffffc0001000",
                addr(0xffffffffc0001000),
            ),
            (" ? 0xffffffff810364ca", addr(0xffffffff810364ca)),
            ("[ 7.000001] ffffffff810364ca", addr(0xffffffff810364ca)),
            (
                "Jan 01 00:00:00 host kernel:  ? schedule+0x10/0xa0",
                sym("schedule", 0x10, Some(0xa0), None),
            ),
            // 5.14+ %pBb: the module's build id.
            (
                " dummy_xmit+0x5/0x20 [dummy 0123456789abcdef0123456789abcdef01234567]",
                sym("dummy_xmit", 5, Some(0x20), Some("dummy")),
            ),
            // Before 4.15: the address in brackets.
            (
                " [<ffffffff81234567>] ? schedule+0x10/0xa0",
                addr(0xffffffff81234567),
            ),
            // RIP: %04x:%pS, with and without a symbol; the old bracketed form; i386.
            (
                "RIP: 0010:cmdline_proc_show+0x5/0x30",
                sym("cmdline_proc_show", 5, Some(0x30), None),
            ),
            ("RIP: 0010:0xffffffff814105b2", addr(0xffffffff814105b2)),
            ("RIP: 0010:ffffffff814105b2", addr(0xffffffff814105b2)),
            (
                "[  3.1] RIP: 0010:cmdline_proc_show+0x5/0x30 [klp_x]",
                sym("cmdline_proc_show", 5, Some(0x30), Some("klp_x")),
            ),
            (
                "RIP: 0010:[<ffffffff8100abcd>]  [<ffffffff8100abcd>] foo+0x17/0x30",
                addr(0xffffffff8100abcd),
            ),
            (
                "RIP  [<ffffffff8100abcd>] foo+0x17/0x30",
                addr(0xffffffff8100abcd),
            ),
            ("EIP: foo+0x17/0x30", sym("foo", 0x17, Some(0x30), None)),
            (
                "WARNING: CPU: 0 PID: 1 at fs/proc/cmdline.c:9 cmdline_proc_show+0x5/0x30",
                sym("cmdline_proc_show", 5, Some(0x30), None),
            ),
            (
                "WARNING: CPU: 0 PID: 1 at cmdline_proc_show+0x5/0x30 [klp_x]",
                sym("cmdline_proc_show", 5, Some(0x30), Some("klp_x")),
            ),
            // arm64: Call trace entries (%pS, %pSb, 6.13+'s unwind source), pc and lr.
            (" el0_svc+0x38/0xd0", sym("el0_svc", 0x38, Some(0xd0), None)),
            (
                " show_stack+0x20/0x38 (C)",
                sym("show_stack", 0x20, Some(0x38), None),
            ),
            (
                "[    1.0]  dummy_xmit+0x5/0x20 [dummy 89ab] (PF)",
                sym("dummy_xmit", 5, Some(0x20), Some("dummy")),
            ),
            (
                "pc : cmdline_proc_show+0x1c/0x40",
                sym("cmdline_proc_show", 0x1c, Some(0x40), None),
            ),
            (
                "lr : seq_read_iter+0x104/0x4c0",
                sym("seq_read_iter", 0x104, Some(0x4c0), None),
            ),
            ("pc : 0xffff800080012345", addr(0xffff800080012345)),
            // Arguments.
            (
                "init_once.isra.0+0x4",
                sym("init_once.isra.0", 4, None, None),
            ),
            ("0xffff", addr(0xffff)),
        ];
        for (line, want) in cases {
            assert_eq!(&parse_line(line), want, "{line:?}");
        }
    }

    #[test]
    fn other_lines_pass_and_damaged_entries_are_marked() {
        for other in [
            "Call Trace:",
            " <TASK>",
            "RSP: 0018:ffffc90000013e78 EFLAGS: 00010246",
            "RAX: 0000000000000000 RBX: ffff888003a4e000 RCX: 0000000000000000",
            "Code: 48 89 e5 <0f> 0b",
            "CPU: 0 PID: 1 Comm: sh Not tainted 6.12.118+deb13-amd64 #1 Debian 6.12.118-1",
            "Modules linked in: dummy(O) klp_x(OK)",
            "Workqueue: events foo_work_fn [dummy]",
            "BUG: unable to handle page fault for address: ffffffffc0001000",
            "sp : ffff80008000bd50",
            "x29: ffff80008000bd50 x28: ffff0000c1a3e000 x27: 0000000000000000",
            "pstate: 60400005 (nZCv daif +PAN -UAO -TCO -DIT -SSBS BTYPE=--)",
            "hello world",
            // User-mode frames: not kernel places.
            "RIP: 0033:0x7f1d2c3b4a5e",
            "pc : 0000aaaab1234567",
        ] {
            assert_eq!(parse_line(other), Line::Other, "{other:?}");
        }
        for bad in [
            " [<ffffffffzz1234>] foo+0x1/0x2",
            " ? foo+0xzz/0x10",
            " ? what is this",
            "RIP: 0010:garbage here",
            "schedule+16",
        ] {
            assert!(
                matches!(parse_line(bad), Line::Undecodable(_)),
                "{bad:?}: {:?}",
                parse_line(bad)
            );
        }
        let e = parse_query("hello world").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::BadInput);
    }

    #[test]
    fn the_name_a_bracketed_line_gives_is_read() {
        assert_eq!(
            claimed_symbol(" [<ffffffff81234567>] ? schedule+0x10/0xa0 [dummy]"),
            Some(Query::Symbol {
                name: "schedule".into(),
                offset: 0x10,
                size: Some(0xa0),
                module: Some("dummy".into())
            })
        );
        assert!(claimed_symbol(
            "RIP: 0010:[<ffffffff8100abcd>]  [<ffffffff8100abcd>] foo+0x17/0x30"
        )
        .is_some());
        assert_eq!(claimed_symbol(" [<ffffffff81234567>]"), None);
    }

    #[test]
    fn the_architecture_of_a_log() {
        let x86 = [
            "BUG: kernel NULL pointer dereference",
            "RIP: 0010:foo+0x1/0x2",
            "Call Trace:",
        ];
        assert_eq!(
            arch_of(x86.into_iter(), std::iter::empty()).unwrap().0,
            "x86_64"
        );
        let arm = ["pc : foo+0x1/0x2", "lr : bar+0x3/0x4", "Call trace:"];
        assert_eq!(
            arch_of(arm.into_iter(), std::iter::empty()).unwrap().0,
            "aarch64"
        );
        assert_eq!(
            arch_of(std::iter::empty(), [0xffffffff81000000u64].into_iter())
                .unwrap()
                .0,
            "x86_64"
        );
        assert_eq!(
            arch_of(std::iter::empty(), [0xffff800080012345u64].into_iter())
                .unwrap()
                .0,
            "aarch64"
        );
        assert_eq!(arch_of(std::iter::empty(), [0x1234u64].into_iter()), None);
        assert_eq!(
            arch_of(
                ["RIP: 0010:x+0x1/0x2", "pc : y+0x1/0x2"].into_iter(),
                std::iter::empty()
            ),
            None
        );
    }

    #[test]
    fn parses_hex_forms() {
        assert_eq!(parse_addr("0xffffffff81000000"), Some(0xffffffff81000000));
        assert_eq!(parse_addr(" FFFF "), Some(0xffff));
        assert_eq!(parse_addr("xyz"), None);
        assert_eq!(parse_addr("0x"), None);
        assert_eq!(parse_addr("11111111111111111"), None);
    }
}
