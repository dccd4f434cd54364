// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_GLOB_DAT, a dynamic-linking type
 * the module loader does not apply ("unsupported RELA relocation").
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(
"	.pushsection .klpsym_reloc, \"a\", %progbits\n"
"	.balign 16\n"
"	.globl klpsym_reloc_start\n"
"klpsym_reloc_start:\n"
"	.quad jiffies\n"
"	.reloc ., R_AARCH64_GLOB_DAT, jiffies\n"
"	.quad 0\n"
"	.balign 8\n"
"	.globl klpsym_reloc_end\n"
"klpsym_reloc_end:\n"
"	.popsection\n"
);
