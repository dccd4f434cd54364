//! An encoder of the kernel's compressed kallsyms tables for each layout era, with the same
//! token compression idea as `scripts/kallsyms.c` (our own code), so the decoder can be
//! tested on every layout without real images.

/// The order of the tables in the image (scripts/kallsyms.c of each era).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutEra {
    /// Up to 6.1: addresses/offsets, relative_base, num_syms, names, markers, token_table,
    /// token_index.
    AddressesFirst,
    /// 6.2 and 6.3: as before with seqs_of_names before the token table.
    AddressesFirstWithSeqs,
    /// 6.4 up to 2026: num_syms, names, markers, token_table, token_index, offsets,
    /// relative_base, seqs_of_names.
    TokensBeforeOffsets,
    /// 2026: as `TokensBeforeOffsets` without relative_base, every label 4-byte aligned.
    PcRelative,
}

/// One input symbol.
#[derive(Debug, Clone)]
pub struct Sym {
    pub addr: u64,
    pub kind: u8,
    pub name: String,
    /// x86_64 absolute per-cpu symbol (only meaningful with `percpu`).
    pub percpu: bool,
}

/// What to emit.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub era: LayoutEra,
    /// ULEB128 name lengths (6.1+); otherwise one byte.
    pub uleb: bool,
    /// `unsigned long` markers (older kernels).
    pub wide_markers: bool,
    /// CONFIG_KALLSYMS_ABSOLUTE_PERCPU.
    pub percpu: bool,
    /// `kallsyms_addresses` instead of offsets + relative base.
    pub absolute: bool,
    /// Virtual address of file offset 0 (for place-relative offsets).
    pub vbase: u64,
    /// Junk bytes before the tables.
    pub prefix: usize,
}

/// Compresses names: each code stands for itself if used, else for a pair of codes, picked
/// greedily by frequency.
fn compress(symbols: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut syms: Vec<Vec<u8>> = symbols.to_vec();
    let mut table: Vec<Vec<u8>> = vec![Vec::new(); 256];
    for s in &syms {
        for &c in s {
            table[usize::from(c)] = vec![c];
        }
    }
    for code in (0..256usize).rev() {
        if !table[code].is_empty() {
            continue;
        }
        let mut counts = vec![0u32; 65536];
        for s in &syms {
            for w in s.windows(2) {
                counts[usize::from(w[0]) | usize::from(w[1]) << 8] += 1;
            }
        }
        let (best, &n) = counts.iter().enumerate().max_by_key(|&(_, n)| *n).unwrap();
        if n < 2 {
            break;
        }
        let (a, b) = ((best & 0xff) as u8, (best >> 8) as u8);
        let mut exp = table[usize::from(a)].clone();
        exp.extend_from_slice(&table[usize::from(b)]);
        table[code] = exp;
        for s in &mut syms {
            let mut out = Vec::with_capacity(s.len());
            let mut i = 0;
            while i < s.len() {
                if i + 1 < s.len() && s[i] == a && s[i + 1] == b {
                    out.push(code as u8);
                    i += 2;
                } else {
                    out.push(s[i]);
                    i += 1;
                }
            }
            *s = out;
        }
    }
    (syms, table)
}

struct Out {
    b: Vec<u8>,
    align: usize,
}

impl Out {
    fn label(&mut self) -> usize {
        while !self.b.len().is_multiple_of(self.align) {
            self.b.push(0);
        }
        self.b.len()
    }
    fn put(&mut self, x: &[u8]) {
        self.b.extend_from_slice(x);
    }
}

/// Emits the tables of `syms` (sorted by address) in the layout of `o.era`.
pub fn encode(syms: &[Sym], o: Options) -> Vec<u8> {
    let raw: Vec<Vec<u8>> = syms
        .iter()
        .map(|s| {
            let mut v = vec![s.kind];
            v.extend_from_slice(s.name.as_bytes());
            v
        })
        .collect();
    let (comp, table) = compress(&raw);
    let align = if o.era == LayoutEra::PcRelative { 4 } else { 8 };
    let mut out = Out {
        b: (0..o.prefix).map(|i| (i * 7 + 3) as u8).collect(),
        align,
    };
    let n = syms.len();
    let rb = syms
        .iter()
        .find(|s| !(o.percpu && s.percpu))
        .map_or(0, |s| s.addr);
    let emit_offsets = |out: &mut Out| {
        let at = out.label();
        if o.absolute {
            for s in syms {
                out.put(&s.addr.to_le_bytes());
            }
            return;
        }
        for (i, s) in syms.iter().enumerate() {
            let v: i32 = if o.era == LayoutEra::PcRelative {
                let place = o.vbase + (at + 4 * i) as u64;
                (s.addr.wrapping_sub(place)) as i64 as i32
            } else if o.percpu && s.percpu {
                s.addr as i32
            } else if o.percpu {
                (rb as i64 - s.addr as i64 - 1) as i32
            } else {
                (s.addr - rb) as u32 as i32
            };
            out.put(&v.to_le_bytes());
        }
        if o.era != LayoutEra::PcRelative {
            out.label();
            out.put(&rb.to_le_bytes());
        }
    };
    let emit_names_markers = |out: &mut Out| {
        out.label();
        out.put(&(n as u32).to_le_bytes());
        let names_at = out.label();
        let mut markers = Vec::new();
        for (i, c) in comp.iter().enumerate() {
            if i % 256 == 0 {
                markers.push((out.b.len() - names_at) as u64);
            }
            if c.len() > 0x7f && o.uleb {
                out.put(&[(c.len() as u8 & 0x7f) | 0x80, (c.len() >> 7) as u8]);
            } else {
                out.put(&[c.len() as u8]);
            }
            out.put(c);
        }
        out.label();
        for m in markers {
            if o.wide_markers {
                out.put(&m.to_le_bytes());
            } else {
                out.put(&(m as u32).to_le_bytes());
            }
        }
    };
    let emit_seqs = |out: &mut Out| {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| {
            (syms[a].name.as_bytes(), syms[a].addr, a).cmp(&(
                syms[b].name.as_bytes(),
                syms[b].addr,
                b,
            ))
        });
        out.label();
        for i in order {
            out.put(&[(i >> 16) as u8, (i >> 8) as u8, i as u8]);
        }
    };
    let emit_tokens = |out: &mut Out| {
        let t = out.label();
        let mut idx = Vec::new();
        for tok in &table {
            idx.push((out.b.len() - t) as u16);
            out.put(tok);
            out.put(&[0]);
        }
        out.label();
        for i in idx {
            out.put(&i.to_le_bytes());
        }
    };
    match o.era {
        LayoutEra::AddressesFirst => {
            emit_offsets(&mut out);
            emit_names_markers(&mut out);
            emit_tokens(&mut out);
        }
        LayoutEra::AddressesFirstWithSeqs => {
            emit_offsets(&mut out);
            emit_names_markers(&mut out);
            emit_seqs(&mut out);
            emit_tokens(&mut out);
        }
        LayoutEra::TokensBeforeOffsets | LayoutEra::PcRelative => {
            emit_names_markers(&mut out);
            emit_tokens(&mut out);
            emit_offsets(&mut out);
            emit_seqs(&mut out);
        }
    }
    // Trailing rodata-like junk.
    out.b.extend((0..64).map(|i| (i * 13 + 1) as u8));
    out.b
}

/// A deterministic symbol set: `n` symbols with aliases, several kinds, and (if `long`) a few
/// names whose compressed length exceeds 0x7F.
pub fn symbols(n: usize, long: bool, percpu: usize) -> Vec<Sym> {
    let mut v = Vec::with_capacity(n);
    let mut addr = 0xffff_ffff_8100_0000u64;
    let kinds = [b'T', b't', b'D', b'd', b'b', b'r', b'W'];
    let mut seed = 0x1234_5678u64;
    for i in 0..n {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (name, is_percpu, a) = if i < percpu {
            (format!("percpu_var_{i}"), true, (i as u64) * 0x40)
        } else {
            if !seed.is_multiple_of(5) {
                addr += (seed >> 40) % 400 + 1; // every fifth symbol aliases the previous one
            }
            let name = if long && i % 97 == 13 {
                // Characters chosen so pairs rarely repeat: stays long after compression.
                let mut x = seed;
                (0..300)
                    .map(|_| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        char::from(b'a' + ((x >> 33) % 26) as u8)
                    })
                    .collect::<String>()
                    + &i.to_string()
            } else if i % 11 == 0 {
                "dup_name".to_string() // many equal names
            } else {
                format!(
                    "{}_{}_fn{}",
                    ["do", "sys", "ext4", "__x64"][i % 4],
                    i * 31 % 1000,
                    i
                )
            };
            (name, false, addr)
        };
        v.push(Sym {
            addr: a,
            kind: kinds[(seed >> 20) as usize % kinds.len()],
            name,
            percpu: is_percpu,
        });
    }
    v
}
