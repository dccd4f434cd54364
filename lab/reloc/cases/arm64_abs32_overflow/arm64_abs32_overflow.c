// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_ABS32 of a kernel address
 * (0xffff8000...) does not fit 32 bits.
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_AARCH64_ABS32, jiffies\n"
"	.long 0\n"
"	.balign 8\n"
KLPSYM_RELOC_END);
