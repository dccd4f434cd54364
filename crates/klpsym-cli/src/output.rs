//! Shared output helpers: errors, JSON printing.

/// A user-facing error (exit 2).
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// Prints an error as the one JSON document of a `--json` run, on stdout:
/// `{"error": {"kind", "message"}}`.
pub fn print_error_json(e: &CliError) {
    let kind = e
        .downcast_ref::<klpsym::Error>()
        .and_then(|e| serde_json::to_value(e.kind()).ok())
        .unwrap_or_else(|| "other".into());
    let mut text = message(e);
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(&format!(": {t}"));
        }
        src = s.source();
    }
    let error = serde_json::json!({"kind": kind, "message": text});
    let doc = serde_json::json!({ "error": error });
    let doc = klpsym::render::Versioned::new(&doc);
    println!("{}", serde_json::to_string(&doc).unwrap_or_default());
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

/// Prints a JSON document (an object, the schema version its first field) and a newline.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    print_json_with(v, &mut klpsym::Resched::none())
}

/// [`print_json`] with reschedule points (a big report is much work to serialize).
pub fn print_json_with<T: serde::Serialize>(
    v: &T,
    resched: &mut klpsym::Resched,
) -> Result<(), CliError> {
    klpsym::render::json_document(&mut stdout(), v, resched)?;
    Ok(())
}

/// Prints a list of JSON documents (each kernel's, when several were given): each element
/// carries the schema version.
pub fn print_json_list<T: serde::Serialize>(v: &[T]) -> Result<(), CliError> {
    let list: Vec<klpsym::render::Versioned<'_, T>> =
        v.iter().map(klpsym::render::Versioned::new).collect();
    klpsym::render::json(&mut stdout(), &list, &mut klpsym::Resched::none())?;
    Ok(())
}
