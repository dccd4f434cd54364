// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, x86_64, expected to be refused: an R_X86_64_PC32 relocation whose field
 * already holds a nonzero value (0x12345678); the kernel writes only over zeros.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_X86_64_PC32, jiffies\n"
"	.long 0x12345678\n"
"	.long 0\n"
KLPSYM_RELOC_END);
