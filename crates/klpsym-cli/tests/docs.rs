//! The documents agree with the tree: every count of the lab's livepatch cases that README.md,
//! docs/verification.md and lab/README.md state is the number of folders in
//! lab/livepatch/cases (the one place it is read from), so a case added or removed fails here
//! until the documents say so.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The numbers a document puts before `livepatch cases` or `livepatch modules` (a count of
/// the lab's cases), with the line they are on.
fn stated_case_counts(text: &str) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for w in words.windows(3) {
            if w[1] == "livepatch" && (w[2].starts_with("cases") || w[2].starts_with("modules")) {
                if let Ok(n) = w[0].parse::<u32>() {
                    out.push((i + 1, n));
                }
            }
        }
    }
    out
}

#[test]
fn the_documents_state_the_number_of_lab_cases_there_are() {
    let cases = std::fs::read_dir(root().join("lab/livepatch/cases"))
        .expect("lab/livepatch/cases")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().join("case.conf").is_file())
        })
        .count() as u32;
    assert!(cases > 30, "only {cases} cases in lab/livepatch/cases");
    let mut stated = 0;
    let mut wrong = Vec::new();
    for doc in [
        "README.md",
        "docs/verification.md",
        "lab/README.md",
        "lab/livepatch/README.md",
    ] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        for (line, n) in stated_case_counts(&text) {
            stated += 1;
            if n != cases {
                wrong.push(format!(
                    "{doc}:{line}: says {n} livepatch cases, the lab has {cases}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        stated >= 2,
        "README.md and docs/verification.md state the number of cases"
    );
}

#[test]
fn a_stated_count_is_found_where_it_is_written() {
    assert_eq!(
        stated_case_counts("builds and loads 40 livepatch cases with\nthe 36 livepatch modules"),
        [(1, 40), (2, 36)]
    );
    assert!(stated_case_counts("every livepatch case").is_empty());
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// One word per concept: a module read from its `.ko` and not placed is `unplaced` in code,
/// JSON, Python and docs. Its retired names (`relative`, `offline`) survive only as the JSON
/// names kept one schema version for old readers, which the serializers write beside
/// `unplaced` and docs/json.md marks deprecated; no identifier, enum variant or other JSON
/// field uses them.
#[test]
fn retired_words_for_unplaced_appear_only_as_deprecated_json_names() {
    let mut files = Vec::new();
    for dir in ["crates", "python/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 100, "only {} Rust files found", files.len());
    let mut kept = 0;
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in ["\"relative\"", "\"offline\""] {
                if code.contains(word) {
                    // Only a serde name or a serialized field, written beside `unplaced`.
                    let window: String = text
                        .lines()
                        .skip(i.saturating_sub(4))
                        .take(9)
                        .collect::<Vec<_>>()
                        .join("\n");
                    if window.contains("unplaced") && !f.ends_with("docs.rs") {
                        kept += 1;
                    } else if !f.ends_with("docs.rs") {
                        wrong.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                    }
                }
            }
            for ident in ["Offline", "offline:", "relative:"] {
                if code.contains(ident) && !f.ends_with("docs.rs") {
                    wrong.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "retired words:\n{}", wrong.join("\n"));
    assert!(
        kept >= 2,
        "the deprecated JSON names are no longer written ({kept})"
    );
    let json = std::fs::read_to_string(root().join("docs/json.md")).unwrap();
    assert!(
        json.contains("deprecated") && json.contains("\"schema\""),
        "docs/json.md says which names are deprecated and the schema version"
    );
}
