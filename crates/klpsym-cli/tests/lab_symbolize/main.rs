//! `klpsym addr` held to the kernel's own `%pS` and `%pB`: the lab's `symbolize` case
//! (lab/livepatch/cases/symbolize) prints, in the guest, `KLPSYM <%px> <%pS> <%pB>` for each
//! address around cmdline_proc_show's start and end, vmlinux's `_end` (the last byte before
//! it, `_end` itself and past it) and the case module's own functions (its last function
//! ends the module's text). klpsym is given what a user has: the kernel's image, the
//! module's file, and where /proc/kallsyms showed the module; it must print the same text,
//! or the number where the kernel prints the number (percent_ps.rs); and file:line as
//! binutils' addr2line gives it, for the kernel, a module and an oops's frames (file_line.rs).

#[path = "../common/mod.rs"]
mod common;
mod file_line;
mod percent_ps;

/// The words of each `out=KLPSYM` line. A module symbol's ` [module]` belongs to the word
/// before it.
pub fn kernel_words(oracle: &str) -> Vec<Vec<String>> {
    oracle
        .lines()
        .filter_map(|l| l.strip_prefix("out=KLPSYM "))
        .map(|l| {
            let mut words: Vec<String> = Vec::new();
            for w in l.split_whitespace() {
                match words.last_mut() {
                    Some(prev) if w.starts_with('[') => {
                        prev.push(' ');
                        prev.push_str(w);
                    }
                    _ => words.push(w.to_string()),
                }
            }
            words
        })
        .collect()
}

/// (address, %pS, %pB) of each `out=KLPSYM` line; the symbolize case prints three columns,
/// and a line of another shape fails the test naming it.
pub fn kernel_lines(oracle: &str) -> Vec<(String, String, String)> {
    kernel_words(oracle)
        .into_iter()
        .map(|w| match &w[..] {
            [a, s, b] => (a.clone(), s.clone(), b.clone()),
            _ => panic!("an out=KLPSYM line of {} words, not 3: {w:?}", w.len()),
        })
        .collect()
}
