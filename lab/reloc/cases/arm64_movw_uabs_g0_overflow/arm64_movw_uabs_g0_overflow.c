// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_MOVW_UABS_G0 (checked) of a kernel
 * address: the value does not fit the 16-bit immediate.
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(
"	.pushsection .klpsym_reloc, \"a\", %progbits\n"
"	.balign 16\n"
"	.globl klpsym_reloc_start\n"
"klpsym_reloc_start:\n"
"	.quad jiffies\n"
"	movz x0, #:abs_g0:jiffies\n"
"	.balign 8\n"
"	.globl klpsym_reloc_end\n"
"klpsym_reloc_end:\n"
"	.popsection\n"
);
