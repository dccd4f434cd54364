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
