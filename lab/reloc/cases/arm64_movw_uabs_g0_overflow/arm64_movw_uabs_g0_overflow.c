// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_MOVW_UABS_G0 (checked) of a kernel
 * address: the value does not fit the 16-bit immediate.
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	movz x0, #:abs_g0:jiffies\n"
"	.balign 8\n"
KLPSYM_RELOC_END);
