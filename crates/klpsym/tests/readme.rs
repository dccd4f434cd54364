//! The README's library example is `examples/quickstart.rs`, character for character: the
//! program CI runs against the lab's package is the one a reader copies.

#[test]
fn the_readme_shows_the_quickstart_example_verbatim() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/quickstart.rs")).unwrap();
    let block = readme
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("README has a ```rust,no_run block");
    assert_eq!(
        block, example,
        "README's 'Use it as a library' block differs from examples/quickstart.rs"
    );
}
