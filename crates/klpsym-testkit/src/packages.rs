//! Builds small packages for tests and fuzz seeds, with the same crates a packager's tools
//! mirror (ar, tar, cpio), so the readers meet archives they did not write themselves.

use std::io::Write;

/// The compressions package payloads use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comp {
    Xz,
    Gz,
    Zst,
    Plain,
}

impl Comp {
    pub const ALL: [Comp; 4] = [Comp::Xz, Comp::Gz, Comp::Zst, Comp::Plain];

    pub fn apply(self, b: &[u8]) -> Vec<u8> {
        match self {
            Comp::Xz => {
                let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
                e.write_all(b).expect("xz");
                e.finish().expect("xz")
            }
            Comp::Gz => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(b).expect("gzip");
                e.finish().expect("gzip")
            }
            Comp::Zst => zstd::encode_all(b, 3).expect("zstd"),
            Comp::Plain => b.to_vec(),
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Comp::Xz => ".xz",
            Comp::Gz => ".gz",
            Comp::Zst => ".zst",
            Comp::Plain => "",
        }
    }
}

/// A tar of `(path, bytes)` files.
pub fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, *data).expect("tar");
    }
    b.into_inner().expect("tar")
}

/// A .deb: debian-binary, control.tar.gz (a control file), `data.tar` compressed with `c`.
pub fn deb(c: Comp, files: &[(&str, &[u8])]) -> Vec<u8> {
    let control = Comp::Gz.apply(&tar_of(&[(
        "./control",
        b"Package: linux-image-1.0.0-1-amd64\nVersion: 1.0.0-1\nArchitecture: amd64\n",
    )]));
    let data = c.apply(&tar_of(files));
    let data_name = format!("data.tar{}", c.suffix());
    let mut a = ar::Builder::new(Vec::new());
    for (name, body) in [
        ("debian-binary", &b"2.0\n"[..]),
        ("control.tar.gz", &control[..]),
        (data_name.as_str(), &data[..]),
    ] {
        let h = ar::Header::new(name.as_bytes().to_vec(), body.len() as u64);
        a.append(&h, body).expect("ar");
    }
    a.into_inner().expect("ar")
}

/// A cpio (newc) archive of `(path, bytes)` files.
pub fn cpio_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = Vec::new();
    for (i, (path, data)) in files.iter().enumerate() {
        let b = cpio::newc::Builder::new(path)
            .ino(i as u32 + 1)
            .mode(0o100644)
            .nlink(1);
        let mut f = b.write(&mut w, data.len() as u32);
        f.write_all(data).expect("cpio");
        f.finish().expect("cpio");
    }
    cpio::newc::trailer(&mut w).expect("cpio");
    w
}

/// An RPM: lead, an empty signature header, a main header naming the package, and the cpio
/// payload compressed with `c`.
pub fn rpm(c: Comp, files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = vec![0u8; 96];
    out[..4].copy_from_slice(&[0xed, 0xab, 0xee, 0xdb]);
    let header = |entries: &[(u32, &str)]| {
        let mut index = Vec::new();
        let mut store = Vec::new();
        for (tag, value) in entries {
            for x in [*tag, 6, store.len() as u32, 1] {
                index.extend_from_slice(&x.to_be_bytes());
            }
            store.extend_from_slice(value.as_bytes());
            store.push(0);
        }
        let mut h = vec![0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];
        h.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        h.extend_from_slice(&(store.len() as u32).to_be_bytes());
        h.extend(index);
        h.extend(store);
        h
    };
    out.extend(header(&[]));
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    out.extend(header(&[
        (1000, "kernel-core"),
        (1001, "1.0.0"),
        (1002, "1"),
        (1022, "x86_64"),
    ]));
    out.extend(c.apply(&cpio_of(files)));
    out
}

/// A kernel image package: `boot/vmlinuz-1.0.0-1-amd64` holding kallsyms tables of `n`
/// symbols (6.4+ layout) padded with zeros to `image_len` bytes, so that packages of every
/// `variant` have the same size; `variant` renames one symbol to another name of the same
/// length (`fn_variant_N`). Plain (uncompressed) data, `extra` files beside the image.
pub fn image_deb(n: usize, variant: u8, image_len: usize, extra: &[(&str, &[u8])]) -> Vec<u8> {
    use crate::kallsyms::{encode, symbols, LayoutEra, Options};
    let mut syms = symbols(n, false, 0);
    syms[n / 2].name = format!("fn_variant_{variant:03}");
    let mut image = encode(
        &syms,
        Options {
            era: LayoutEra::TokensBeforeOffsets,
            uleb: true,
            wide_markers: false,
            percpu: false,
            absolute: false,
            vbase: 0,
            prefix: 4096 + 40,
        },
    );
    assert!(image.len() <= image_len, "{} > {image_len}", image.len());
    image.resize(image_len, 0);
    let mut files: Vec<(&str, &[u8])> = vec![("./boot/vmlinuz-1.0.0-1-amd64", &image)];
    files.extend_from_slice(extra);
    deb(Comp::Plain, &files)
}
