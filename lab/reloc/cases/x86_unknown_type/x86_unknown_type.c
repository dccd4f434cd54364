// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, x86_64, expected to be refused: R_X86_64_GOTPCREL (type 9), a type
 * the module loader does not know ("Unknown rela relocation").
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
"	.quad jiffies\n"
"	.reloc ., R_X86_64_GOTPCREL, jiffies\n"
"	.long 0\n"
"	.long 0\n"
KLPSYM_RELOC_END);
