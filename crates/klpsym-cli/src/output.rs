//! Shared output helpers: errors, JSON printing.

/// A user-facing error (exit 2).
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Prints an error as the one JSON document of a `--json` run, on stdout:
/// `{"error": {"kind", "message"}}`.
pub fn print_error_json(e: &CliError) {
    let kind = match e.downcast_ref::<klpsym::Error>().map(klpsym::Error::kind) {
        Some(klpsym::ErrorKind::NotFound) => "not_found",
        Some(klpsym::ErrorKind::BadInput) => "bad_input",
        Some(klpsym::ErrorKind::TooLarge) => "too_large",
        Some(klpsym::ErrorKind::Io) => "io",
        Some(klpsym::ErrorKind::Usage) => "usage",
        Some(klpsym::ErrorKind::Cancelled) => "cancelled",
        _ => "other",
    };
    let mut text = message(e);
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(&format!(": {t}"));
        }
        src = s.source();
    }
    let doc = serde_json::json!({"error": {"kind": kind, "message": text}});
    println!("{doc}");
}

/// The argument a library input comes from, and how the error names it: in front (`--modules:
/// ...`), or after it for a limit (`(raise it with --max-input-size)`).
fn flag_of(e: &CliError) -> (Option<&'static str>, Option<&'static str>) {
    use klpsym::Input as I;
    let Some(input) = e
        .downcast_ref::<klpsym::Error>()
        .and_then(klpsym::Error::input)
    else {
        return (None, None);
    };
    match input {
        I::InputLimit => (None, Some("--max-input-size")),
        I::DecompressedLimit => (None, Some("--max-decompressed-size")),
        I::ModuleTree => (Some("--modules"), None),
        I::LoadedModules => (Some("--loaded"), None),
        I::Placement => (Some("--place-from"), None),
        I::DebugVmlinux => (Some("--debug-vmlinux"), None),
        I::BuiltFor => (Some("--built-for"), None),
        I::Btf => (Some("--btf"), None),
        I::KernelVersion => (Some("--kernel-version"), None),
        I::KernelConfig => (Some("--kernel-config"), None),
        I::Symvers => (Some("--symvers"), None),
        I::SectionBase => (Some("--section-base"), None),
        I::SectionsFolder => (Some("--sections-from"), None),
        I::Patch => (Some("PATCH"), None),
        _ => (None, None),
    }
}

/// An error's message as the command says it: the argument it is about named.
fn message(e: &CliError) -> String {
    let text = e.to_string();
    match flag_of(e) {
        (Some(flag), _) => format!("{flag}: {text}"),
        (None, Some(limit)) => format!("{text} (raise it with {limit})"),
        (None, None) => text,
    }
}

/// Prints an error and its causes to stderr.
pub fn print_error(e: &CliError) {
    let mut msg = format!("klpsym: error: {}", message(e));
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(&format!(": {text}"));
        }
        src = s.source();
    }
    eprintln!("{msg}");
}

/// Standard output, locked and buffered (flushed when dropped).
pub fn stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock())
}

/// Prints a JSON value followed by a newline.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    print_json_with(v, &mut klpsym::Resched::none())
}

/// [`print_json`] with reschedule points (a big report is much work to serialize).
pub fn print_json_with<T: serde::Serialize>(
    v: &T,
    resched: &mut klpsym::Resched,
) -> Result<(), CliError> {
    klpsym::render::json(&mut stdout(), v, resched)?;
    Ok(())
}
