// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, x86_64, expected to be refused: R_X86_64_32 (zero-extended) of a
 * kernel address (0xffffffff8...) overflows ("likely not compiled with -mcmodel=kernel").
 * The R_X86_64_64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.long jiffies\n"
"	.long 0\n"
KLPSYM_RELOC_END);
