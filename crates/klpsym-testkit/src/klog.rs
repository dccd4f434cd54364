//! The one reader of a lab guest's kernel log: every oracle test takes the kernel's lines
//! of a step through here, never its own filter.
//!
//! A guest brackets each step it records (a module load, an exercise, a teardown) with
//! marker lines written to `/dev/kmsg` (`klplab: begin STEP`, `klplab: end STEP`: lab/guest/
//! guest-lib.sh's `kmark`), clears the log before the first and drains it after the second.
//! The reader keeps what lies between a step's two markers, and of that drops only the
//! lines of subsystems no step touches, which a boot prints whenever it gets to them
//! ([`NOISE_PREFIXES`]): a line printed while a module loads is the kernel's answer to that
//! load unless it is one of those.

/// The marker lines' prefix: `klplab: begin STEP` and `klplab: end STEP`.
pub const MARK: &str = "klplab: ";

/// Lines of the guest's own timekeeping and entropy, printed asynchronously late in a boot
/// under TCG (the TSC refinement runs from a delayed work item a second or more after
/// `tsc_init()`; the clocksource watchdog and switch follow it), sometimes in the middle of
/// a step: never the module loader's or livepatch's words. Seen in the lab:
/// "tsc: Refined TSC clocksource calibration: 2496.000 MHz", "clocksource: tsc: mask: …",
/// "clocksource: Switched to clocksource tsc".
pub const NOISE_PREFIXES: &[&str] = &[
    "tsc: ",
    "clocksource: ",
    "hrtimer: interrupt took ",
    "random: crng init done",
    "sched_clock: Marking stable",
];

/// Whether `line` (timestamp stripped) is a line of a subsystem no step touches.
pub fn is_noise(line: &str) -> bool {
    NOISE_PREFIXES.iter().any(|p| line.starts_with(p))
}

/// Whether `line` is one of the module loader's once-per-boot taint notices, which the
/// kernel prints on the first load that taints it in a boot (whichever step that is) and
/// never again: "loading out-of-tree module taints kernel.", "module verification failed:
/// signature and/or required key missing - tainting kernel", a forced load's "…: kernel
/// tainted." (try_to_force_load()) and "Disabling lock debugging due to kernel taint".
pub fn is_taint_notice(line: &str) -> bool {
    line.contains("taints kernel")
        || line.contains("tainting kernel")
        || line.ends_with(": kernel tainted.")
        || line == "Disabling lock debugging due to kernel taint"
}

/// `line` without a printk timestamp (`[    1.234567] `).
pub fn strip_timestamp(line: &str) -> &str {
    let t = line.trim_end_matches('\r');
    if let Some(rest) = t.strip_prefix('[') {
        if let Some((stamp, after)) = rest.split_once(']') {
            if stamp.trim().chars().all(|c| c.is_ascii_digit() || c == '.') {
                return after.strip_prefix(' ').unwrap_or(after);
            }
        }
    }
    t
}

/// The lines recorded as `KEY=LINE` in a guest's record (an oracle.txt), read through
/// [`bracketed`]: the kernel lines of every step recorded under `key`.
pub fn recorded(text: &str, key: &str) -> Result<Vec<String>, String> {
    let prefix = format!("{key}=");
    bracketed(text.lines().filter_map(|l| l.strip_prefix(prefix.as_str())))
        .map_err(|e| format!("{key}= lines: {e}"))
}

/// Each step of a record, in order, with its name (what follows `begin `): the kernel lines
/// between its two markers, noise left out (as [`bracketed`] reads them, step by step).
pub fn steps<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut open: Option<String> = None;
    for raw in lines {
        let line = strip_timestamp(raw);
        if let Some(m) = line.strip_prefix(MARK) {
            if let Some(step) = m.strip_prefix("begin ") {
                if let Some(prev) = open.replace(step.to_string()) {
                    return Err(format!(
                        "step {prev:?} has no end marker before {step:?} begins"
                    ));
                }
                out.push((step.to_string(), Vec::new()));
            } else if let Some(step) = m.strip_prefix("end ") {
                match open.take() {
                    Some(s) if s == step => {}
                    Some(s) => return Err(format!("step {s:?} ended as {step:?}")),
                    None => return Err(format!("step {step:?} ended without beginning")),
                }
            } else {
                return Err(format!("unknown marker line {line:?}"));
            }
            continue;
        }
        if open.is_some() && !line.trim().is_empty() && !is_noise(line) {
            out.last_mut()
                .expect("a step is open")
                .1
                .push(line.to_string());
        }
    }
    if let Some(s) = open {
        return Err(format!("step {s:?} has no end marker"));
    }
    if out.is_empty() {
        return Err("no step markers (klplab: begin/end): not a bracketed record".into());
    }
    Ok(out)
}

/// The kernel lines of one or more bracketed steps, in order: what lies between each
/// `klplab: begin` marker and its `klplab: end`, noise and markers left out, timestamps
/// stripped; what lies outside every bracket is no step's answer and is left out. `Err`
/// says what makes the record unusable: a step begun and never ended, an end without its
/// begin, or no marker at all.
pub fn bracketed<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Vec<String>, String> {
    Ok(steps(lines)?.into_iter().flat_map(|(_, l)| l).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_steps_lines_and_drops_noise_and_what_lies_outside() {
        let log = [
            "[    5.1] clocksource: Switched to clocksource tsc",
            "klplab: begin load 1",
            "[    5.2] livepatch: enabling patch 'p'",
            "[    5.3] tsc: Refined TSC clocksource calibration: 2496.000 MHz",
            "[    5.4] livepatch: 'p': starting patching transition",
            "klplab: end load 1",
            "[    5.5] random: crng init done",
            "late line outside every step",
        ];
        assert_eq!(
            bracketed(log).unwrap(),
            [
                "livepatch: enabling patch 'p'",
                "livepatch: 'p': starting patching transition"
            ]
        );
        let st = steps(log).unwrap();
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].0, "load 1");
    }

    #[test]
    fn a_record_without_markers_or_with_an_open_step_is_unusable() {
        assert!(bracketed(["livepatch: x"]).is_err());
        assert!(bracketed(["klplab: begin a", "livepatch: x"]).is_err());
        assert!(bracketed(["klplab: end a"]).is_err());
        assert!(bracketed(["klplab: begin a", "klplab: end b"]).is_err());
        assert!(steps(["klplab: begin a", "klplab: begin b"]).is_err());
        assert!(steps(["klplab: bogus"]).is_err());
    }

    #[test]
    fn timestamps_are_stripped_and_other_brackets_kept() {
        assert_eq!(strip_timestamp("[   12.345678] x: y"), "x: y");
        assert_eq!(
            strip_timestamp("[<ffffffff81000000>] x"),
            "[<ffffffff81000000>] x"
        );
        assert_eq!(
            recorded(
                "dmesg=klplab: begin s\ndmesg=a\nlog=b\ndmesg=klplab: end s\n",
                "dmesg"
            )
            .unwrap(),
            ["a"]
        );
    }
}
