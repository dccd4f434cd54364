//! The text formats: /proc/kallsyms (and files saved from it) and System.map.
//!
//! Both share one line syntax, `%px %c %s` (the kernel's `s_show()` in kernel/kallsyms.c),
//! with module and pseudo-object lines ending in `\t[%s]`. The parser keeps the file's bytes as
//! the name arena, so loading allocates nothing per symbol.

use klpsym_core::resched::{Cancelled, Resched};
use klpsym_core::{BuildError, ObjectId, ObjectKind, SymbolTable, SymbolTableBuilder};

/// Longest symbol name the kernel keeps: KSYM_NAME_LEN (512 since 6.1, 128 before) minus the
/// terminating NUL.
pub const MAX_NAME_LEN: usize = 511;

/// Which text format a buffer holds, told from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// /proc/kallsyms, or a file saved from it.
    Kallsyms,
    /// A System.map (`nm -n vmlinux` output, filtered).
    SystemMap,
    /// Debian's stub System.map that only points at the -dbg package.
    SystemMapStub,
}

/// What went wrong in a text source, with the 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// The buffer is empty.
    #[error("empty input: expected lines like `ffffffff81000000 T _text`")]
    Empty,
    /// The buffer holds binary data.
    #[error(
        "binary data (a NUL byte at offset {offset}): expected /proc/kallsyms or System.map text"
    )]
    Binary {
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// A line does not follow the syntax.
    #[error("line {line}: {what}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What was expected and what was found.
        what: String,
    },
    /// Debian ships a stub System.map.
    #[error("this System.map is a stub that holds no symbols ({0}); use the kernel image (vmlinuz) of the same package instead: klpsym reads its compressed kallsyms tables")]
    Stub(String),
    /// The table could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
}

impl From<Cancelled> for TextError {
    fn from(c: Cancelled) -> Self {
        TextError::Build(BuildError::Cancelled(c))
    }
}

/// A parsed text source.
#[derive(Debug)]
pub struct ParsedText {
    /// The table.
    pub table: SymbolTable,
    /// Which format the content was.
    pub kind: TextKind,
}

/// Tells /proc/kallsyms text from System.map text, from content alone.
///
/// Both use one syntax. A System.map is `nm -n` output: it holds no module column, and it lists
/// symbols the kernel's kallsyms never shows — undefined (`U`), debugging (`N`), weak-undefined
/// (`w`/`v`... as nm prints them), and local absolute (`a`) symbols, or the `__crc_`/`__kstrtab_`
/// families that scripts/kallsyms drops. Anything with a module column is kallsyms; a buffer
/// that is neither shows as kallsyms (the stricter reading: every line is taken as is).
pub fn detect(bytes: &[u8]) -> TextKind {
    let head = &bytes[..bytes.len().min(4096)];
    if head.len() < 200 && memchr::memmem::find(head, b"System.map is in the").is_some() {
        return TextKind::SystemMapStub;
    }
    if memchr::memchr(b'\t', bytes).is_some() {
        return TextKind::Kallsyms;
    }
    for line in bytes.split(|&b| b == b'\n') {
        let mut it = line.splitn(3, |&b| b == b' ');
        let (_, Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if let [ty] = ty {
            if system_map_only(*ty, name) {
                return TextKind::SystemMap;
            }
        }
    }
    TextKind::Kallsyms
}

/// Types and names that appear in System.map but never in /proc/kallsyms.
fn system_map_only(ty: u8, name: &[u8]) -> bool {
    matches!(ty, b'U' | b'N' | b'a' | b'w' | b'v')
        || name.starts_with(b"__crc_")
        || name.starts_with(b"__kstrtab_")
        || name.starts_with(b".L")
}

/// Parses /proc/kallsyms or System.map text. Takes the buffer: it becomes the name arena.
pub fn parse_text(bytes: Vec<u8>, resched: &mut Resched) -> Result<ParsedText, TextError> {
    if bytes.is_empty() {
        return Err(TextError::Empty);
    }
    let mut s = TextStream::with_arena(bytes);
    // NUL bytes mean a binary file given as text; checked in steps (a /proc/kallsyms is 5 MB).
    s.check_binary(resched)?;
    s.finish(resched)
}

/// Text parsed as it arrives: each [`feed`](TextStream::feed) parses the whole lines it
/// completes, so parsing overlaps reading (a /proc/kallsyms read costs the kernel's
/// formatting, one page per `read(2)`). Gives the same table and errors as [`parse_text`] on
/// the same bytes, except that a line error before a NUL byte is reported as the line error.
#[derive(Debug)]
pub struct TextStream {
    b: SymbolTableBuilder,
    addr_width: Option<u8>,
    cur: Option<((usize, usize), ObjectId)>,
    /// The first byte not yet parsed.
    start: usize,
    line_no: usize,
    saw_module: bool,
    saw_system_map: bool,
    /// Bytes checked for NUL so far.
    checked: usize,
}

/// Below this many bytes, a buffer may be Debian's System.map stub: parsing waits for more.
const STUB_MAX: usize = 200;

impl Default for TextStream {
    fn default() -> Self {
        Self::new()
    }
}

impl TextStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::with_arena(Vec::new())
    }

    fn with_arena(bytes: Vec<u8>) -> Self {
        // The bytes become the name arena as they are, and each parsed line is pushed as it is
        // read (names by offset; module names are copied only when they change). ~40 bytes a
        // line in /proc/kallsyms: reserve once.
        let lines = bytes.len() / 40 + 16;
        TextStream {
            b: SymbolTableBuilder::with_name_arena(bytes, lines),
            addr_width: None,
            cur: None,
            start: 0,
            line_no: 0,
            saw_module: false,
            saw_system_map: false,
            checked: 0,
        }
    }

    fn check_binary(&mut self, resched: &mut Resched) -> Result<(), TextError> {
        let arena = self.b.arena();
        for chunk in arena[self.checked..].chunks(256 << 10) {
            if let Some(i) = memchr::memchr(0, chunk) {
                return Err(TextError::Binary {
                    offset: self.checked + i,
                });
            }
            self.checked += chunk.len();
            resched.tick()?;
        }
        Ok(())
    }

    /// Appends `bytes` and parses the lines they complete.
    pub fn feed(&mut self, bytes: &[u8], resched: &mut Resched) -> Result<(), TextError> {
        self.b.extend_arena(bytes);
        self.check_binary(resched)?;
        let arena = self.b.arena();
        if arena.len() < STUB_MAX {
            return Ok(());
        }
        match memchr::memrchr(b'\n', &arena[self.start..]) {
            Some(i) => self.parse_until(self.start + i + 1, resched),
            None => Ok(()),
        }
    }

    /// Parses what is left (a last line without a newline too) and builds the table.
    pub fn finish(mut self, resched: &mut Resched) -> Result<ParsedText, TextError> {
        let len = self.b.arena().len();
        if len == 0 {
            return Err(TextError::Empty);
        }
        // A System.map stub is recognized from its head; the rest of `detect` is decided
        // while parsing (a tab means kallsyms with modules; System.map-only types and names
        // mean System.map), so the text is walked once.
        if len < STUB_MAX && detect(self.b.arena()) == TextKind::SystemMapStub {
            let first = self
                .b
                .arena()
                .split(|&b| b == b'\n')
                .next()
                .unwrap_or_default();
            return Err(TextError::Stub(
                String::from_utf8_lossy(first).trim().to_string(),
            ));
        }
        self.parse_until(len, resched)?;
        let kind = if !self.saw_module && self.saw_system_map {
            TextKind::SystemMap
        } else {
            TextKind::Kallsyms
        };
        self.b.set_addr_width(self.addr_width.unwrap_or(16));
        Ok(ParsedText {
            table: self.b.build_with(resched)?,
            kind,
        })
    }

    /// Parses the lines from the first unparsed byte up to `limit` (the end of a line, or of
    /// the text).
    fn parse_until(&mut self, limit: usize, resched: &mut Resched) -> Result<(), TextError> {
        while self.start < limit {
            resched.tick()?;
            self.line_no += 1;
            let line_no = self.line_no;
            let start = self.start;
            let arena = self.b.arena();
            let end = memchr::memchr(b'\n', &arena[start..limit]).map_or(limit, |i| start + i);
            let l = parse_line(arena, start, end).map_err(|what| TextError::Line {
                line: line_no,
                what,
            })?;
            let width = l.addr_digits;
            match self.addr_width {
                None => self.addr_width = Some(width),
                Some(w) if w != width => {
                    return Err(TextError::Line {
                        line: line_no,
                        what: format!(
                            "address has {width} hex digits where earlier lines have {w}"
                        ),
                    })
                }
                Some(_) => {}
            }
            self.saw_system_map =
                self.saw_system_map || system_map_only(l.kind, &arena[l.name.0..end]);
            let oid = match l.object {
                None => ObjectId::VMLINUX,
                Some(range) => {
                    self.saw_module = true;
                    match self.cur {
                        Some((r, id)) if arena[r.0..r.1] == arena[range.0..range.1] => id,
                        _ => {
                            // parse_line checked the bracket name is printable ASCII.
                            let name =
                                String::from_utf8_lossy(&arena[range.0..range.1]).into_owned();
                            let id = self.b.object(&name, ObjectKind::of_bracket_name(&name));
                            self.cur = Some((range, id));
                            id
                        }
                    }
                }
            };
            self.b
                .push_arena_name(oid, l.addr, l.kind, l.name.0, l.name.1 - l.name.0)?;
            self.start = end + 1;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Line {
    addr: u64,
    addr_digits: u8,
    kind: u8,
    name: (usize, usize),
    object: Option<(usize, usize)>,
}

fn parse_line(bytes: &[u8], start: usize, end: usize) -> Result<Line, String> {
    let line = &bytes[start..end];
    if line.is_empty() {
        return Err("empty line: expected `ADDRESS TYPE NAME`".into());
    }
    // Address: hex digits up to the first space. A table lookup per digit keeps this free of
    // unpredictable branches; the error path re-scans for a precise message.
    let mut addr: u64 = 0;
    let mut bad = 0u8;
    let mut i = 0;
    let digits_end = line.len().min(17);
    while i < digits_end && line[i] != b' ' {
        let v = HEX_VALUE[line[i] as usize];
        bad |= v;
        addr = (addr << 4) | u64::from(v & 0xf);
        i += 1;
    }
    if bad & 0x80 != 0 {
        let c = line[..i]
            .iter()
            .copied()
            .find(|&c| HEX_VALUE[c as usize] & 0x80 != 0)
            .unwrap_or(b'?');
        return Err(format!(
            "bad hex address {:?}: {:?} is not a hex digit",
            preview(&line[..line.len().min(24)]),
            c as char
        ));
    }
    if i > 16 {
        return Err(format!(
            "address {:?} is longer than 16 hex digits",
            preview(&line[..line.len().min(40)])
        ));
    }
    if i == 0 {
        return Err("missing address: expected `ADDRESS TYPE NAME`".into());
    }
    let addr_digits = i as u8;
    // " T "
    if line.len() < i + 3 || line[i] != b' ' || line[i + 2] != b' ' {
        return Err(format!(
            "missing columns in {:?}: expected `ADDRESS TYPE NAME`",
            preview(line)
        ));
    }
    let kind = line[i + 1];
    if !kind.is_ascii_graphic() {
        return Err(format!("bad type letter {:?}", kind as char));
    }
    let name_start = i + 3;
    let tab = memchr::memchr(b'\t', &line[name_start..]).map(|t| name_start + t);
    let name_end = tab.unwrap_or(line.len());
    let name = &line[name_start..name_end];
    if name.is_empty() {
        return Err("empty symbol name".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "symbol name of {} bytes is longer than the kernel allows ({MAX_NAME_LEN}, KSYM_NAME_LEN - 1)",
            name.len()
        ));
    }
    if !all_graphic(name) && !name.iter().all(|&c| name_byte(c)) {
        let c = name
            .iter()
            .copied()
            .find(|&c| !name_byte(c))
            .unwrap_or(b'?');
        return Err(format!(
            "symbol name {:?} holds a byte ({c:#04x}) that no kernel symbol has",
            preview(name)
        ));
    }
    let object = match tab {
        None => None,
        Some(t) => {
            let rest = &line[t + 1..];
            if rest.len() < 3 || rest[0] != b'[' || rest[rest.len() - 1] != b']' {
                return Err(format!(
                    "bad module column {:?}: expected `\\t[module]`",
                    preview(rest)
                ));
            }
            let m = &rest[1..rest.len() - 1];
            if m.is_empty()
                || m.iter()
                    .any(|c| !c.is_ascii_graphic() || *c == b'[' || *c == b']')
            {
                return Err(format!("bad module name {:?}", preview(m)));
            }
            Some((start + t + 2, start + t + 1 + rest.len() - 1))
        }
    };
    Ok(Line {
        addr,
        addr_digits,
        kind,
        name: (start + name_start, start + name_end),
        object,
    })
}

/// Hex digit values; 0xff marks a byte that is not a hex digit.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        t[b'A' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};

/// A byte a kernel prints in a symbol name: printable ASCII, or a control byte other than
/// tab and newline (the columns' separators). Assembler local labels carry one: gas names the
/// Nth instance of local label `L14472` `.L14472\x021`, and arm64 module tables keep them.
fn name_byte(c: u8) -> bool {
    c.is_ascii_graphic() || (c != 0 && c < 0x20 && c != b'\t' && c != b'\n' && c != b'\r')
}

/// True when every byte is printable ASCII (the common case, checked 8 bytes at a time).
fn all_graphic(s: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = s.chunks_exact(8);
    let mut acc = 0u64;
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // a byte below 0x21, or a byte of 0x7f and above
        acc |= (w.wrapping_sub(ONES * 0x21) & !w) | (w.wrapping_add(ONES) | w);
    }
    acc & HIGH == 0 && chunks.remainder().iter().all(u8::is_ascii_graphic)
}

fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
    if b.len() > 80 {
        format!("{s}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ParsedText, TextError> {
        parse_text(s.as_bytes().to_vec(), &mut Resched::none())
    }

    #[test]
    fn parses_kallsyms_with_modules() {
        let p = parse(
            "ffffffff81000000 T _text\nffffffff81000010 t init_once\nffffffffc0000000 t init_once\t[nf_tables]\nffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\n",
        )
        .unwrap();
        assert_eq!(p.kind, TextKind::Kallsyms);
        let t = &p.table;
        assert_eq!(t.len(), 4);
        let names: Vec<_> = t
            .objects()
            .iter()
            .map(|o| (o.name.as_str(), o.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("vmlinux", ObjectKind::Vmlinux),
                ("nf_tables", ObjectKind::Module),
                ("__builtin__ftrace", ObjectKind::Pseudo)
            ]
        );
        let s = t.symbol(klpsym_core::SymbolId(2));
        assert_eq!(
            (s.name, s.kind, s.addr, s.object),
            ("init_once", 't', 0xffffffffc0000000, ObjectId(1))
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, &str)] = &[
            ("ffffffff81000000 T a\nxyz T b\n", "line 2: bad hex address"),
            ("ffffffff81000000 T\n", "line 1: missing columns"),
            ("ffffffff81000000 T a\n\n", "line 2: empty line"),
            ("ffffffff81000000 T a\t[]\n", "line 1: bad module column"),
            (
                "ffffffff81000000 T a\n81000000 T b\n",
                "line 2: address has 8 hex digits",
            ),
            ("11111111111111111 T a\n", "line 1: address"),
        ];
        for (input, want) in cases {
            let err = parse(input).unwrap_err().to_string();
            assert!(err.starts_with(want), "{input:?}: {err}");
        }
        // What arm64 module tables hold (gas's local label instances) is read; bytes no kernel
        // prints in a name are not.
        let p =
            parse("ffff800080000000 T _text\nffff80007a0a1000 t .L14472\x021\t[crc7]\n").unwrap();
        assert_eq!(
            p.table.symbol(klpsym_core::SymbolId(1)).name,
            ".L14472\u{2}1"
        );
        for bad in ["a b", "a\u{7f}", "a\rb"] {
            let err = parse(&format!("ffffffff81000000 T {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("holds a byte"), "{bad:?}: {err}");
        }
        let long = format!("ffffffff81000000 T {}\n", "x".repeat(600));
        assert!(parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than the kernel allows"));
        assert_eq!(parse("").unwrap_err(), TextError::Empty);
        assert!(matches!(
            parse_text(vec![0x7f, b'E', b'L', b'F', 0, 1], &mut Resched::none()),
            Err(TextError::Binary { offset: 4 })
        ));
    }

    #[test]
    fn detects_system_map_and_stub() {
        assert_eq!(
            detect(b"0000000000000000 A a\n0000000000001000 U printk\n"),
            TextKind::SystemMap
        );
        assert_eq!(detect(b"ffffffff81000000 T _text\n"), TextKind::Kallsyms);
        let stub = b"ffffffffffffffff B The real System.map is in the linux-image-6.1.0-57-amd64-dbg package\n";
        assert_eq!(detect(stub), TextKind::SystemMapStub);
        assert!(parse(std::str::from_utf8(stub).unwrap())
            .unwrap_err()
            .to_string()
            .contains("vmlinuz"));
    }

    #[test]
    fn graphic_check_matches_the_byte_rule() {
        for b in 0u8..=255 {
            for pos in 0..11 {
                let mut v = vec![b'a'; 11];
                v[pos] = b;
                assert_eq!(
                    all_graphic(&v),
                    b.is_ascii_graphic(),
                    "byte {b:#x} at {pos}"
                );
            }
        }
    }

    #[test]
    fn hidden_addresses() {
        let p = parse("0000000000000000 T a\n0000000000000000 t b\n").unwrap();
        assert!(p.table.addresses_hidden());
    }

    #[test]
    fn interleaved_module_lines_keep_one_object_per_name() {
        let p = parse("ffffffff81000000 T a\nffffffffc0000000 t x\t[m1]\nffffffffc1000000 t y\t[m2]\nffffffffc0000010 t z\t[m1]\n").unwrap();
        assert_eq!(p.table.objects().len(), 3);
        assert_eq!(p.table.object_info(ObjectId(1)).symbol_count, 2);
    }

    /// What a parse gives, comparably: the lines back, the kind and the objects, or the error.
    fn outcome(r: Result<ParsedText, TextError>) -> Result<(Vec<String>, TextKind), String> {
        match r {
            Ok(p) => {
                let lines = p
                    .table
                    .iter()
                    .map(|s| {
                        format!(
                            "{:x} {} {} {}",
                            s.addr,
                            s.kind,
                            s.name,
                            p.table.object_info(s.object).name
                        )
                    })
                    .collect();
                Ok((lines, p.kind))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_stream_fed_in_any_pieces_parses_as_the_whole() {
        let texts = [
            "ffffffff81000000 T _text\nffffffff81000010 t init_once\nffffffffc0000000 t init_once\t[nf_tables]\nffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\n".repeat(8),
            "ffffffff81000000 T _text\nffffffff81000010 t x\nffffffff81000020 t no_newline_at_end".to_string(),
            "0000000000001000 T _text\n0000000000002000 U undefined_here\n".repeat(6),
            "ffffffff81000000 T _text\nnot a line\n".repeat(9),
            "ffffffff81000000 T _text\nffffffff8100 t short\n".repeat(9),
            "System.map is in the linux-image-6.1-dbg package\n".to_string(),
            String::new(),
        ];
        for text in &texts {
            let whole = outcome(parse_text(text.as_bytes().to_vec(), &mut Resched::none()));
            for piece in [1, 3, 7, 64, 199, 200, 4096] {
                let mut s = TextStream::new();
                let mut fed = Ok(());
                for c in text.as_bytes().chunks(piece) {
                    fed = s.feed(c, &mut Resched::none());
                    if fed.is_err() {
                        break;
                    }
                }
                let streamed = outcome(fed.and_then(|()| s.finish(&mut Resched::none())));
                assert_eq!(streamed, whole, "pieces of {piece} bytes of {text:?}");
            }
        }
    }
}
