//! Times decompression alone and full extraction of a kernel image:
//! `cargo run --release -p klpsym-image --example measure -- /boot/vmlinuz-... [out.txt]`.

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: measure IMAGE [OUT]")?;
    let out = args.next();
    let bytes = std::fs::read(&path)?;
    let limit = 1 << 30;
    let t = Instant::now();
    let d = klpsym_image::decompress_image(&bytes, limit)?;
    let t_dec = t.elapsed();
    let t2 = Instant::now();
    let syms = klpsym_image::find_kallsyms(&d.data)?;
    let t_find = t2.elapsed();
    drop(d);
    let t3 = Instant::now();
    let full = klpsym_image::extract(&bytes, limit)?;
    let t_full = t3.elapsed();
    println!("format: {:?}", full.format);
    println!("version: {:?}", full.version);
    println!("arch: {:?}", full.arch);
    println!("layout: {:?}", full.layout);
    for n in &full.notes {
        println!("note: {n}");
    }
    println!("entries: {}", syms.entries.len());
    println!(
        "decompress: {:.1} ms, find+decode: {:.1} ms, extract: {:.1} ms ({:.3}x decompress)",
        t_dec.as_secs_f64() * 1e3,
        t_find.as_secs_f64() * 1e3,
        t_full.as_secs_f64() * 1e3,
        t_full.as_secs_f64() / t_dec.as_secs_f64()
    );
    if let Some(out) = out {
        std::fs::write(out, full.to_proc_kallsyms())?;
    }
    Ok(())
}
