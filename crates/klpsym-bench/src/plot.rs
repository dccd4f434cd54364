//! An SVG plot of latency distributions (complementary CDF on log-log axes), written by hand:
//! a plot needs lines and text, not a plotting library.

use std::fmt::Write;

use crate::latency::RunResult;

const COLORS: [&str; 4] = ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"];

/// One panel per setting; one curve per strategy: the share of samples later than x.
pub fn svg(results: &[RunResult], title: &str) -> String {
    let settings: Vec<&str> = {
        let mut v: Vec<&str> = results.iter().map(|r| r.setting).collect();
        v.dedup();
        v
    };
    let (pw, ph, ml, mt, mb) = (520.0, 330.0, 70.0, 50.0, 60.0);
    let width = ml + pw * settings.len() as f64 + 30.0 * settings.len() as f64;
    let height = mt + ph + mb + 90.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="15" text-anchor="middle">{title}</text>"#,
        width / 2.0
    );
    // x: 1 µs .. 10 s (log), y: 1 .. 1e-4 (log share of samples later than x)
    let (xmin, xmax) = (0.0f64, 7.0f64);
    let (ymin, ymax) = (-4.0f64, 0.0f64);
    for (pi, setting) in settings.iter().enumerate() {
        let x0 = ml + pi as f64 * (pw + 30.0);
        let px = |us: f64| x0 + (us.max(1.0).log10() - xmin) / (xmax - xmin) * pw;
        let py = |share: f64| mt + (ymax - share.max(1e-4).log10()) / (ymax - ymin) * ph;
        let _ = writeln!(
            s,
            r##"<rect x="{x0}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-weight="bold">{}</text>"#,
            x0 + pw / 2.0,
            mt - 8.0,
            match *setting {
                "fifo" => "(a) probe lateness, SCHED_FIFO on the job's CPU",
                _ => "(b) echo round trip, job on the server's executor",
            }
        );
        for e in 0..=7 {
            let x = px(10f64.powi(e));
            let label = ["1µs", "10µs", "100µs", "1ms", "10ms", "100ms", "1s", "10s"][e as usize];
            let _ = writeln!(
                s,
                r##"<line x1="{x}" y1="{mt}" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{label}</text>"##,
                mt + ph,
                mt + ph + 16.0
            );
        }
        for e in 0..=4 {
            let y = py(10f64.powi(-e));
            let _ = writeln!(
                s,
                r##"<line x1="{x0}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">1e-{e}</text>"##,
                x0 + pw,
                x0 - 4.0,
                y + 4.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">latency (log)</text>"#,
            x0 + pw / 2.0,
            mt + ph + 34.0
        );
        if pi == 0 {
            let _ = writeln!(
                s,
                r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">share of samples later than x</text>"#,
                mt + ph / 2.0
            );
        }
        for (ci, r) in results.iter().filter(|r| r.setting == *setting).enumerate() {
            let mut v = r.raw_ns.clone();
            v.sort_unstable();
            let n = v.len().max(1) as f64;
            let mut path = String::new();
            for (i, ns) in v.iter().enumerate() {
                let share = (n - i as f64) / n;
                let _ = write!(
                    path,
                    "{}{:.1},{:.1} ",
                    if i == 0 { "M" } else { "L" },
                    px(*ns as f64 / 1e3),
                    py(share)
                );
            }
            let color = COLORS[ci % COLORS.len()];
            let _ = writeln!(
                s,
                r#"<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>"#
            );
        }
    }
    // legend
    let ly = mt + ph + mb;
    let mut seen = Vec::new();
    for r in results {
        if seen.contains(&r.strategy) {
            continue;
        }
        let i = seen.len();
        seen.push(r.strategy);
        let x = ml + (i % 2) as f64 * 380.0;
        let y = ly + (i / 2) as f64 * 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            x + 30.0,
            COLORS[i % 4],
            x + 36.0,
            y + 4.0,
            r.strategy.label().replace('<', "&lt;")
        );
    }
    s.push_str("</svg>\n");
    s
}
