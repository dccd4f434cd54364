// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_ADR_PREL_LO21 (adr) to a kernel
 * symbol, out of its +-1 MB range.
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_AARCH64_ADR_PREL_LO21, jiffies\n"
"	.inst 0x10000000\n"
"	.balign 8\n"
KLPSYM_RELOC_END);
