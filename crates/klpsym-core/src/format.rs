//! Writing a table back in /proc/kallsyms format (`%px %c %s\n`, module lines
//! `%px %c %s\t[%s]\n`), fast: one reused buffer, no per-line allocation.

use std::io::{self, Write};

use crate::object::ObjectKind;
use crate::resched::Resched;
use crate::table::SymbolTable;

/// How an address reads in klpsym's human output and docs: `0xffffffff81000000` for a load
/// address, `+0x150` for a symbol of a module read from its `.ko` and not placed (an offset
/// in its section: such a symbol has no load address yet), `(hidden)` when the source hides
/// addresses. JSON carries the same as `address` plus `"unplaced": true`.
pub fn address_text(table: &SymbolTable, id: crate::table::SymbolId) -> String {
    let s = table.symbol(id);
    if table.addresses_hidden() {
        "(hidden)".to_string()
    } else if table.object_info(s.object).unplaced {
        format!("+{:#x}", s.addr)
    } else {
        format!("{:#018x}", s.addr)
    }
}

/// Writes lines in /proc/kallsyms format into a buffered sink.
#[derive(Debug)]
pub struct KallsymsWriter<'t> {
    table: &'t SymbolTable,
}

impl<'t> KallsymsWriter<'t> {
    /// A writer over `table`.
    pub fn new(table: &'t SymbolTable) -> Self {
        KallsymsWriter { table }
    }

    /// Appends the line of symbol `i` to `buf`.
    pub fn line(&self, i: u32, buf: &mut Vec<u8>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let t = self.table;
        let r = &t.syms[i as usize];
        let width = usize::from(t.addr_width());
        for shift in (0..width).rev() {
            buf.push(HEX[((r.addr >> (shift * 4)) & 0xf) as usize]);
        }
        buf.push(b' ');
        buf.push(r.kind);
        buf.push(b' ');
        buf.extend_from_slice(t.name_bytes(i));
        let info = &t.objects[r.object as usize];
        if info.kind != ObjectKind::Vmlinux {
            buf.extend_from_slice(b"\t[");
            buf.extend_from_slice(info.name.as_bytes());
            buf.push(b']');
        }
        buf.push(b'\n');
    }
}

/// Writes the whole table to `out` in /proc/kallsyms format, reaching reschedule points.
pub fn write_kallsyms<W: Write>(
    table: &SymbolTable,
    out: &mut W,
    resched: &mut Resched,
) -> io::Result<()> {
    let w = KallsymsWriter::new(table);
    let mut buf = Vec::with_capacity(1 << 16);
    for i in 0..table.len() as u32 {
        resched
            .tick()
            .map_err(|c| io::Error::new(io::ErrorKind::Interrupted, c))?;
        w.line(i, &mut buf);
        if buf.len() >= (1 << 16) - 1024 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectId, SymbolTableBuilder};

    #[test]
    fn writes_kernel_format() {
        let mut b = SymbolTableBuilder::new();
        b.push(ObjectId::VMLINUX, 0xffffffff81000000, b'T', "_text")
            .unwrap();
        let m = b.object("__builtin__ftrace", ObjectKind::Pseudo);
        b.push(m, 0xffffffffc0201000, b't', "ftrace_trampoline")
            .unwrap();
        let t = b.build();
        let mut out = Vec::new();
        write_kallsyms(&t, &mut out, &mut Resched::none()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ffffffff81000000 T _text\nffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\n"
        );
    }
}
