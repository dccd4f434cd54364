//! Shared fixtures of the fuzz targets: the allocation budget every target runs its parser
//! under, the target kernel that `livepatch_check` and `livepatch_convert` resolve against, and
//! the invariant checks more than one target uses.
//!
//! Kept here (not in each target) so the targets agree on one budget and one kernel, and the
//! seed generator can name the symbols that kernel holds.

use std::alloc::System;
use std::sync::OnceLock;

use cap::Cap;

use klpsym_core::resched::Resched;
use klpsym_core::{write_kallsyms, SymbolTable};
use klpsym_sources::parse_text;

/// Every Rust allocation of a fuzz target goes through this counting allocator (the `cap`
/// crate: no `unsafe` here). libFuzzer's `-malloc_limit_mb` needs a sanitizer runtime and its
/// RSS limit only sees gigabytes; the budget below sees a parser that allocates more than a
/// small multiple of its input.
#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

/// Bytes a parser may hold live per input byte (the "small multiple").
pub const BYTES_PER_INPUT_BYTE: usize = 64;

/// Bytes a parser may hold live whatever the input (fixed tables, first buffers).
pub const FIXED_BYTES: usize = 4 << 20;

/// Runs `f` with at most `extra + BYTES_PER_INPUT_BYTE * input_len + FIXED_BYTES` bytes
/// allocated beyond what is live when it starts. An allocation past the budget fails, and
/// Rust aborts on a failed allocation ("memory allocation of N bytes failed"), which libFuzzer
/// reports as a crash with its input.
pub fn with_budget<R>(input_len: usize, extra: usize, f: impl FnOnce() -> R) -> R {
    let budget = input_len
        .saturating_mul(BYTES_PER_INPUT_BYTE)
        .saturating_add(FIXED_BYTES)
        .saturating_add(extra);
    let base = ALLOC.allocated();
    ALLOC
        .set_limit(base.saturating_add(budget))
        .expect("the budget is above what is allocated");
    let r = f();
    ALLOC
        .set_limit(usize::MAX)
        .expect("raising the limit cannot fail");
    r
}

/// The kernel the livepatch targets check against: the functions, variables and helpers the
/// real test patches under /var/cache/klpsym-lab name (so resolution paths are reached), one
/// name defined three times (ambiguity and positions), and two loaded modules.
pub const TARGET_KALLSYMS: &str = "\
ffffffff81000000 T _text
ffffffff81001000 T __fentry__
ffffffff81001100 T __x86_return_thunk
ffffffff81002000 T _printk
ffffffff81002100 T scnprintf
ffffffff81002200 T seq_puts
ffffffff81002300 T seq_printf
ffffffff81002400 T klp_enable_patch
ffffffff81100000 t cmdline_proc_show
ffffffff81100100 t version_proc_show
ffffffff81100200 t m_show
ffffffff81100300 t m_show
ffffffff81100400 t m_show
ffffffff81100500 t cxl_set_mem_enable.isra.0
ffffffff81100600 t cpu_show_common.constprop.0
ffffffff82000000 D saved_command_line
ffffffff82000100 d static_counter
ffffffffc0001000 t dummy_get_stats64\t[dummy]
ffffffffc0002000 d numdummies\t[dummy]
ffffffffc0003000 T klp_oracle_init\t[klp_oracle]
ffffffffc0003100 T klp_oracle_exit\t[klp_oracle]
ffffffffc0003200 T klp_oracle_addrs_get\t[klp_oracle]
ffffffffc0003300 D klp_oracle_addrs_ops\t[klp_oracle]
ffffffffc0003400 D __param_str_klp_addrs\t[klp_oracle]
ffffffffc0003500 D __param_klp_addrs\t[klp_oracle]
";

/// Names the target exports (they stay ordinary relocations in `convert`).
pub const EXPORTED: &[&str] = &[
    "__fentry__",
    "__x86_return_thunk",
    "_printk",
    "scnprintf",
    "seq_puts",
    "seq_printf",
    "klp_enable_patch",
    "klp_oracle_init",
    "klp_oracle_exit",
    "klp_oracle_addrs_get",
    "klp_oracle_addrs_ops",
    "__param_str_klp_addrs",
    "__param_klp_addrs",
];

/// [`TARGET_KALLSYMS`] parsed once per process.
pub fn target_table() -> &'static SymbolTable {
    static TABLE: OnceLock<SymbolTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        parse_text(TARGET_KALLSYMS.as_bytes().to_vec(), &mut Resched::none())
            .expect("the built-in target kernel parses")
            .table
    })
}

/// True for the names in [`EXPORTED`].
pub fn is_exported(name: &str) -> bool {
    EXPORTED.contains(&name)
}

/// `table` written back in /proc/kallsyms format.
pub fn dump(table: &SymbolTable) -> Vec<u8> {
    let mut out = Vec::new();
    write_kallsyms(table, &mut out, &mut Resched::none()).expect("writing to a Vec cannot fail");
    out
}
