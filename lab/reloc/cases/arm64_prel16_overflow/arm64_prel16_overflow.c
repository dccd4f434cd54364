// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_PREL16 to a kernel symbol: the
 * distance does not fit 16 bits.
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_AARCH64_PREL16, jiffies\n"
"	.hword 0\n"
"	.balign 8\n"
KLPSYM_RELOC_END);
