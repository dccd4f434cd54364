//! What was found where: the era of the table layout, how names and addresses are encoded, and
//! the offset of every table in the decompressed image.

/// The order in which `scripts/kallsyms.c` emits its tables; it changed twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutEra {
    /// Up to 6.1: addresses/offsets, relative_base, num_syms, names, markers, token_table,
    /// token_index. No `kallsyms_seqs_of_names`.
    AddressesFirst,
    /// 6.2 and 6.3: addresses/offsets, relative_base, num_syms, names, markers,
    /// seqs_of_names, token_table, token_index.
    AddressesFirstWithSeqs,
    /// 6.4 up to the 2026 change: num_syms, names, markers, token_table, token_index, offsets,
    /// relative_base, seqs_of_names.
    TokensBeforeOffsets,
    /// Since "kallsyms: Get rid of kallsyms relative base" (2026): as `TokensBeforeOffsets`
    /// without `kallsyms_relative_base`, every label 4-byte aligned.
    PcRelative,
}

/// How each symbol's compressed length is stored in `kallsyms_names`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameLengthEncoding {
    /// One byte (before 6.1).
    OneByte,
    /// ULEB128, two bytes when the length exceeds 0x7F (6.1 and later).
    Uleb128,
    /// No compressed name is longer than 0x7F, so both encodings read the same.
    ShortOnly,
}

/// How `kallsyms_sym_address(i)` turns the table into an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `kallsyms_addresses[i]` (no CONFIG_KALLSYMS_BASE_RELATIVE).
    Absolute,
    /// `relative_base + (u32)offsets[i]`.
    BaseRelative { relative_base: u64 },
    /// x86_64 SMP before 6.15 (CONFIG_KALLSYMS_ABSOLUTE_PERCPU): `offsets[i] >= 0` is an absolute
    /// per-cpu address, otherwise `relative_base - 1 - offsets[i]`.
    AbsolutePercpu { relative_base: u64 },
    /// 2026+: `&offsets[i] + offsets[i]` (place-relative), so the table's own virtual address
    /// matters: `offsets_vaddr` is the address of `kallsyms_offsets`.
    PcRelative { offsets_vaddr: u64 },
}

/// Byte offsets of each table in the decompressed image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOffsets {
    pub num_syms: usize,
    pub names: usize,
    pub markers: usize,
    pub token_table: usize,
    pub token_index: usize,
    /// `kallsyms_offsets` or `kallsyms_addresses`.
    pub addresses: usize,
    pub relative_base: Option<usize>,
    pub seqs_of_names: Option<usize>,
}

/// The layout the decoder settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    pub era: LayoutEra,
    pub name_length: NameLengthEncoding,
    pub addressing: Addressing,
    /// Width of a `kallsyms_markers` entry: 4 (`unsigned int`) or 8 (older `unsigned long`).
    pub marker_width: usize,
    pub num_syms: u32,
    pub offsets: TableOffsets,
}

impl std::fmt::Display for LayoutEra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LayoutEra::AddressesFirst => "addresses first, no seqs_of_names (up to 6.1)",
            LayoutEra::AddressesFirstWithSeqs => {
                "addresses first, with seqs_of_names (6.2-6.3 order)"
            }
            LayoutEra::TokensBeforeOffsets => "tokens before offsets (6.4 order)",
            LayoutEra::PcRelative => "PC-relative offsets, no relative base (2026 order)",
        })
    }
}

impl std::fmt::Display for NameLengthEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NameLengthEncoding::OneByte => "one byte per length (before 6.1)",
            NameLengthEncoding::Uleb128 => "ULEB128, two bytes past 127 (6.1+)",
            NameLengthEncoding::ShortOnly => {
                "one byte (every name under 128 bytes; ULEB128-compatible)"
            }
        })
    }
}

impl std::fmt::Display for Addressing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addressing::Absolute => f.write_str("absolute addresses"),
            Addressing::BaseRelative { relative_base } => {
                write!(f, "offsets from relative base {relative_base:#x}")
            }
            Addressing::AbsolutePercpu { relative_base } => write!(
                f,
                "offsets from relative base {relative_base:#x}, negative ones absolute (per-cpu)"
            ),
            Addressing::PcRelative { offsets_vaddr } => {
                write!(f, "place-relative offsets (table at {offsets_vaddr:#x})")
            }
        }
    }
}

impl std::fmt::Display for TableOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "num_syms {:#x}, names {:#x}, markers {:#x}, token_table {:#x}, token_index {:#x}, addresses {:#x}",
            self.num_syms, self.names, self.markers, self.token_table, self.token_index, self.addresses
        )?;
        if let Some(r) = self.relative_base {
            write!(f, ", relative_base {r:#x}")?;
        }
        if let Some(s) = self.seqs_of_names {
            write!(f, ", seqs_of_names {s:#x}")?;
        }
        f.write_str(" (offsets in the decompressed image)")
    }
}
