//! The kernel's parsing of klp section and symbol names, reproduced with `vsscanf` semantics.
//!
//! kernel/livepatch/core.c parses
//! - relocation sections with `sscanf(secname, ".klp.rela.%55[^.]", sec_objname)` and needs
//!   1 conversion;
//! - symbols with `sscanf(name, ".klp.sym.%55[^.].%511[^,],%lu", ...)` (`%127[^,]` before 6.1)
//!   and needs 3 conversions.
//!
//! The kernel's `vsscanf` (lib/vsprintf.c) differs from libc's in ways that matter here, and
//! this module reproduces them rather than being stricter, so that a verdict matches the kernel:
//! - `%N[^x]` needs at least one character and takes at most N; the byte after a full field is
//!   then compared with the next literal of the format, so an over-long field fails there;
//! - `%lu` skips leading white space, accepts no sign (`+1`/`-1` fail), takes decimal digits
//!   and ignores whatever follows them (`foo,1junk` parses as position 1); overflow wraps
//!   modulo 2^64 (`simple_strntoull` ignores its overflow flag);
//! - the string ending before a conversion stops the scan.
//!
//! What the kernel accepts but is suspicious is returned as a `lenient` note so a report can
//! warn without changing the verdict.

use serde::Serialize;

/// `.klp.sym.<objname>.<name>,<sympos>` as the kernel parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KlpSymbolName {
    /// The object (`vmlinux` or a module name).
    pub object: String,
    /// The symbol name (may contain dots: `cpumask_weight.constprop.0`).
    pub name: String,
    /// The position (`old_sympos` semantics).
    pub sympos: u64,
    /// Something the kernel accepts silently but that is likely a mistake.
    pub lenient: Option<String>,
}

/// The object name of a `.klp.rela.<objname>.<section>` section as the kernel parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KlpSectionName {
    /// The object the kernel compares with (at most 55 bytes: longer names are truncated).
    pub object: String,
    /// The rest of the name after the object (`.text` for `.klp.rela.vmlinux..text`).
    pub target: String,
    /// Something the kernel accepts silently but that is likely a mistake.
    pub lenient: Option<String>,
}

/// Width of the object field in both formats (MODULE_NAME_LEN - 1, strictest value).
pub const OBJNAME_WIDTH: usize = 55;

/// `%N[^stop]`: at least one byte, at most `width`, none equal to `stop` or NUL.
fn scan_set(s: &[u8], width: usize, stop: u8) -> Option<(&[u8], &[u8])> {
    let n = s
        .iter()
        .take(width)
        .take_while(|&&b| b != stop && b != 0)
        .count();
    (n > 0).then(|| s.split_at(n))
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `%lu` of the kernel's vsscanf: value, bytes consumed after white space, and what follows.
fn scan_ulong(s: &[u8]) -> Option<(u64, usize, &[u8])> {
    let skipped = s.iter().take_while(|&&b| is_space(b)).count();
    let s = &s[skipped..];
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let v = s[..digits].iter().fold(0u64, |acc, &d| {
        acc.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
    });
    Some((v, skipped, &s[digits..]))
}

/// Parses a klp symbol name like `klp_resolve_symbols()`; `None` means the kernel prints
/// `symbol %s has an incorrectly formatted name`.
///
/// `ksym_name_len` is the target's KSYM_NAME_LEN (512 since 6.1, 128 before).
pub fn parse_klp_symbol(name: &[u8], ksym_name_len: usize) -> Option<KlpSymbolName> {
    let rest = name.strip_prefix(b".klp.sym.")?;
    let (obj, rest) = scan_set(rest, OBJNAME_WIDTH, b'.')?;
    let rest = rest.strip_prefix(b".")?;
    let (sym, rest) = scan_set(rest, ksym_name_len.saturating_sub(1), b',')?;
    let rest = rest.strip_prefix(b",")?;
    let (sympos, skipped, tail) = scan_ulong(rest)?;
    let mut lenient = Vec::new();
    if skipped > 0 {
        lenient.push("white space before the position".to_string());
    }
    if !tail.is_empty() {
        lenient.push(format!(
            "'{}' after the position is ignored",
            String::from_utf8_lossy(tail)
        ));
    }
    let digits = rest.len() - skipped - tail.len();
    if digits > 1 && rest[skipped] == b'0' {
        lenient.push("leading zeros in the position".to_string());
    }
    if digits > 19 {
        lenient.push("position wraps modulo 2^64".to_string());
    }
    Some(KlpSymbolName {
        object: String::from_utf8_lossy(obj).into_owned(),
        name: String::from_utf8_lossy(sym).into_owned(),
        sympos,
        lenient: (!lenient.is_empty()).then(|| lenient.join("; ")),
    })
}

/// Parses a klp relocation section name like `klp_write_section_relocs()`; `None` means the
/// kernel prints `section %s has an incorrectly formatted name`.
pub fn parse_klp_section(name: &[u8]) -> Option<KlpSectionName> {
    let rest = name.strip_prefix(b".klp.rela.")?;
    let (obj, tail) = scan_set(rest, OBJNAME_WIDTH, b'.')?;
    let mut lenient = None;
    if !tail.is_empty() && tail[0] != b'.' {
        lenient = Some(format!(
            "object name longer than {OBJNAME_WIDTH} bytes: the kernel compares only '{}' and \
             never applies this section",
            String::from_utf8_lossy(obj)
        ));
    } else if tail.len() <= 1 {
        lenient = Some("no target section name after the object".to_string());
    }
    Some(KlpSectionName {
        object: String::from_utf8_lossy(obj).into_owned(),
        target: String::from_utf8_lossy(tail.strip_prefix(b".").unwrap_or(tail)).into_owned(),
        lenient,
    })
}

/// Formats a klp symbol name (what `convert` writes).
pub fn format_klp_symbol(object: &str, name: &str, sympos: u64) -> String {
    format!(".klp.sym.{object}.{name},{sympos}")
}

/// Formats a klp relocation section name for `target_section` (`.text` gives
/// `.klp.rela.vmlinux..text`).
pub fn format_klp_section(object: &str, target_section: &str) -> String {
    format!(".klp.rela.{object}.{target_section}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(s: &str) -> Option<(String, String, u64)> {
        parse_klp_symbol(s.as_bytes(), 512).map(|k| (k.object, k.name, k.sympos))
    }

    #[test]
    fn symbol_names_like_the_kernel() {
        assert_eq!(
            sym(".klp.sym.vmlinux.foo,0"),
            Some(("vmlinux".into(), "foo".into(), 0))
        );
        assert_eq!(
            sym(".klp.sym.vmlinux.cpumask_weight.constprop.0,2"),
            Some(("vmlinux".into(), "cpumask_weight.constprop.0".into(), 2))
        );
        // kernel vsscanf: leading white space and trailing garbage are accepted
        assert_eq!(
            sym(".klp.sym.ext4.f, 3"),
            Some(("ext4".into(), "f".into(), 3))
        );
        let k = parse_klp_symbol(b".klp.sym.ext4.f,3x", 512).unwrap();
        assert_eq!(k.sympos, 3);
        assert!(k.lenient.unwrap().contains("'x'"));
        // no sign, no missing field
        assert_eq!(sym(".klp.sym.ext4.f,-1"), None);
        assert_eq!(sym(".klp.sym.ext4.f,+1"), None);
        assert_eq!(sym(".klp.sym.ext4.f,"), None);
        assert_eq!(sym(".klp.sym.ext4.f"), None);
        assert_eq!(sym(".klp.sym.ext4,f,0"), None);
        assert_eq!(sym(".klp.sym..f,0"), None);
        assert_eq!(sym(".klp.sym.vmlinux.,0"), None);
        assert_eq!(sym("klp.sym.vmlinux.f,0"), None);
        // overflow wraps
        assert_eq!(sym(".klp.sym.v.f,18446744073709551617").unwrap().2, 1);
    }

    #[test]
    fn field_widths() {
        let obj55 = "m".repeat(55);
        let obj56 = "m".repeat(56);
        assert!(sym(&format!(".klp.sym.{obj55}.f,0")).is_some());
        assert!(sym(&format!(".klp.sym.{obj56}.f,0")).is_none());
        let n511 = "n".repeat(511);
        let n512 = "n".repeat(512);
        assert!(sym(&format!(".klp.sym.vmlinux.{n511},0")).is_some());
        assert!(sym(&format!(".klp.sym.vmlinux.{n512},0")).is_none());
        // before 6.1: %127[^,]
        let n127 = "n".repeat(127);
        let n128 = "n".repeat(128);
        assert!(parse_klp_symbol(format!(".klp.sym.vmlinux.{n127},0").as_bytes(), 128).is_some());
        assert!(parse_klp_symbol(format!(".klp.sym.vmlinux.{n128},0").as_bytes(), 128).is_none());
    }

    #[test]
    fn section_names_like_the_kernel() {
        let s = parse_klp_section(b".klp.rela.vmlinux..text").unwrap();
        assert_eq!(
            (s.object.as_str(), s.target.as_str(), s.lenient),
            ("vmlinux", ".text", None)
        );
        assert!(parse_klp_section(b".klp.rela..text").is_none());
        assert!(parse_klp_section(b".klp.rela.").is_none());
        assert!(parse_klp_section(b".rela.text").is_none());
        // accepted without a section name
        assert!(parse_klp_section(b".klp.rela.vmlinux")
            .unwrap()
            .lenient
            .is_some());
        // a 56-byte object is truncated to 55 and never matches
        let long = format!(".klp.rela.{}..text", "m".repeat(56));
        let s = parse_klp_section(long.as_bytes()).unwrap();
        assert_eq!(s.object.len(), 55);
        assert!(s.lenient.unwrap().contains("never applies"));
    }

    #[test]
    fn format_round_trips() {
        let n = format_klp_symbol("nf_tables", "nft_x.isra.0", 2);
        assert_eq!(
            sym(&n),
            Some(("nf_tables".into(), "nft_x.isra.0".into(), 2))
        );
        assert_eq!(
            format_klp_section("vmlinux", ".text"),
            ".klp.rela.vmlinux..text"
        );
    }
}
