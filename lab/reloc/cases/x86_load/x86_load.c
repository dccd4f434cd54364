// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, x86_64, expected to load: every type the kernel applies
 * (R_X86_64_64, 32S, PC32, PLT32, PC64) against exported kernel symbols (jiffies, kfree,
 * _printk, memcpy) and module-local ones (klpsym_local_var in .data, klpsym_local_func in
 * .text; gas makes these relative to the section symbols), with zero and nonzero addends.
 * Every relocated field is zero in the file, as the kernel requires.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
/* R_X86_64_64 */
"	.quad jiffies\n"
"	.quad kfree + 0x10\n"
"	.quad klpsym_local_var + 8\n"
"	.quad klpsym_local_func\n"
/* R_X86_64_32S: kernel and module addresses are in the top 2 GB */
"	.reloc ., R_X86_64_32S, jiffies + 4\n"
"	.long 0\n"
"	.reloc ., R_X86_64_32S, klpsym_local_var + 16\n"
"	.long 0\n"
/* R_X86_64_PC32 */
"	.long jiffies - .\n"
"	.long _printk + 0x20 - .\n"
"	.long klpsym_local_var + 24 - .\n"
/* R_X86_64_PLT32: an explicit one, and calls (gas uses PLT32 for call) */
"	.reloc ., R_X86_64_PLT32, kfree - 4\n"
"	.long 0\n"
"	call memcpy\n"
"	call klpsym_local_func\n"
/* R_X86_64_PC64 */
"	.balign 8\n"
"	.quad jiffies - .\n"
"	.quad klpsym_local_func + 3 - .\n"
"	.quad 0x5a5a5a5a5a5a5a5a\n"
KLPSYM_RELOC_END);
