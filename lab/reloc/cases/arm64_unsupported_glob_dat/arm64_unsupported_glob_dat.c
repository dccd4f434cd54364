// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to be refused: R_AARCH64_GLOB_DAT, a dynamic-linking type
 * the module loader does not apply ("unsupported RELA relocation").
 * The R_AARCH64_ABS64 before it is harmless.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_AARCH64_GLOB_DAT, jiffies\n"
"	.quad 0\n"
"	.balign 8\n"
KLPSYM_RELOC_END);
