//! Times a kernel image's decompression and extraction, each the median of several runs:
//! `cargo run --release -p klpsym-image --example measure -- IMAGE [--reps N] [--out OUT.txt]`.
//!
//! Three timings, printed as `key=value` lines for scripts (scripts/bench-extract.sh):
//! - `raw_decoder_ms`: the payload through liblzma (XZ only) in one call into a presized
//!   buffer, no reschedule points: the floor any extractor pays;
//! - `decompress_ms`: [`klpsym_image::decompress_image_with`] (streamed, with points);
//! - `extract_ms`: [`klpsym_image::extract_with`] (decompress + find + decode).

use std::time::{Duration, Instant};

use klpsym_resched::resched::Resched;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// The XZ payload decoded by liblzma in one call, the way a tool with no reschedule points would.
fn raw_xz(payload: &[u8], size_hint: usize) -> Result<usize, Box<dyn std::error::Error>> {
    let mut stream = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0)?;
    let mut out = Vec::with_capacity(size_hint + 1);
    loop {
        let consumed = usize::try_from(stream.total_in())?.min(payload.len());
        let status =
            stream.process_vec(&payload[consumed..], &mut out, xz2::stream::Action::Run)?;
        if status == xz2::stream::Status::StreamEnd {
            return Ok(out.len());
        }
        if out.len() == out.capacity() {
            out.reserve(out.len());
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: measure IMAGE [--reps N] [--out OUT]")?;
    let (mut reps, mut out) = (5usize, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().ok_or("--reps needs N")?.parse()?,
            "--out" => out = Some(args.next().ok_or("--out needs a path")?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let reps = reps.max(1);
    let bytes = std::fs::read(&path)?;
    let limit = 1 << 30;

    let d = klpsym_image::decompress_image(&bytes, limit)?;
    let decompressed_len = d.data.len();
    let payload = d.payload_offset.map(|o| &bytes[o..]);
    let xz = matches!(
        d.format,
        klpsym_image::ImageFormat::BzImage {
            compression: klpsym_image::Compression::Xz
        } | klpsym_image::ImageFormat::Compressed {
            compression: klpsym_image::Compression::Xz
        }
    );
    drop(d);

    let (mut raw, mut dec, mut full) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..reps {
        if let (true, Some(p)) = (xz, payload) {
            let t = Instant::now();
            let n = raw_xz(p, decompressed_len)?;
            raw.push(t.elapsed());
            assert_eq!(n, decompressed_len, "raw decoder disagrees on the size");
        }
        let t = Instant::now();
        let d = klpsym_image::decompress_image_with(&bytes, limit, &mut Resched::none())?;
        dec.push(t.elapsed());
        drop(d);
        let t = Instant::now();
        let s = klpsym_image::extract_with(&bytes, limit, &mut Resched::none())?;
        full.push(t.elapsed());
        last = Some(s);
    }
    let full_syms = last.ok_or("no run")?;
    println!("format={:?}", full_syms.format);
    println!("version={:?}", full_syms.version);
    println!("arch={:?}", full_syms.arch);
    println!("layout={:?}", full_syms.layout.era);
    for n in &full_syms.notes {
        println!("note={n}");
    }
    println!("entries={}", full_syms.entries.len());
    println!("decompressed_bytes={decompressed_len}");
    println!("reps={reps}");
    if !raw.is_empty() {
        println!("raw_decoder_ms={}", ms(median(raw)));
    }
    println!("decompress_ms={}", ms(median(dec)));
    println!("extract_ms={}", ms(median(full)));
    if let Some(out) = out {
        std::fs::write(out, full_syms.to_proc_kallsyms())?;
    }
    Ok(())
}
