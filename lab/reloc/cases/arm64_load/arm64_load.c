// SPDX-License-Identifier: GPL-2.0
/*
 * Relocation oracle, arm64, expected to load: the relocation types the arm64 module loader
 * applies, against exported kernel symbols (jiffies, kfree, memcpy, init_task, _printk) and
 * module-local ones (klpsym_local_var in .data, klpsym_local_func in .text, the local label
 * 1: inside this section for the short-range types), with zero and nonzero addends.
 * `.reloc OFFSET, TYPE, SYM+ADDEND` + `.inst` (the instruction with a zero immediate) where
 * the mnemonic syntax cannot name the type or gas would resolve a same-section reference.
 * Instruction words and data are never executed: the section is only dumped.
 */
#include "klpsym_reloc.h"

asm(KLPSYM_RELOC_BEGIN
/* R_AARCH64_ABS64 */
"	.quad jiffies\n"
"	.quad kfree + 0x10\n"
"	.quad klpsym_local_var + 8\n"
"	.quad klpsym_local_func + 4\n"
/* R_AARCH64_PREL64 */
"	.quad jiffies - .\n"
"	.quad klpsym_local_var + 16 - .\n"
/* R_AARCH64_PREL32 */
"	.long jiffies + 4 - .\n"
"	.long klpsym_local_func - .\n"
/* R_AARCH64_PREL16, to this section (in range) */
"	.reloc ., R_AARCH64_PREL16, 1f + 2\n"
"	.hword 0\n"
"	.hword 0\n"
/* R_AARCH64_CALL26, R_AARCH64_JUMP26 */
"	bl kfree\n"
"	bl klpsym_local_func\n"
"	b memcpy\n"
"	b _printk + 8\n"
/* R_AARCH64_ADR_PREL_PG_HI21 (checked) and _NC */
"	adrp x0, jiffies\n"
"	adrp x1, klpsym_local_var + 0x20\n"
"	.reloc ., R_AARCH64_ADR_PREL_PG_HI21_NC, init_task + 0x1000\n"
"	.inst 0x90000002\n"			/* adrp x2, 0 */
/* R_AARCH64_ADD_ABS_LO12_NC */
"	add x0, x0, :lo12:jiffies\n"
"	add x1, x1, :lo12:klpsym_local_var + 8\n"
/* R_AARCH64_LDST8/16/32/64/128_ABS_LO12_NC */
"	ldrb w0, [x0, :lo12:jiffies + 1]\n"
"	ldrh w0, [x0, :lo12:jiffies + 2]\n"
"	ldr w0, [x0, :lo12:jiffies + 4]\n"
"	ldr x0, [x0, :lo12:jiffies]\n"
"	ldr x1, [x1, :lo12:klpsym_local_var + 8]\n"
"	.reloc ., R_AARCH64_LDST128_ABS_LO12_NC, init_task + 0x20\n"
"	.inst 0x3dc00000\n"			/* ldr q0, [x0] */
"	.reloc ., R_AARCH64_LDST128_ABS_LO12_NC, klpsym_local_var + 16\n"
"	.inst 0x3dc00000\n"
/* R_AARCH64_MOVW_UABS_G3 (checked, always fits), G2_NC, G1_NC, G0_NC */
"	movz x0, #:abs_g3:jiffies\n"
"	movk x0, #:abs_g2_nc:jiffies\n"
"	movk x0, #:abs_g1_nc:jiffies\n"
"	movk x0, #:abs_g0_nc:jiffies\n"
"	movz x1, #:abs_g3:klpsym_local_func + 0x10\n"
"	movk x1, #:abs_g2_nc:klpsym_local_func + 0x10\n"
"	movk x1, #:abs_g1_nc:klpsym_local_func + 0x10\n"
"	movk x1, #:abs_g0_nc:klpsym_local_func + 0x10\n"
/* R_AARCH64_MOVW_PREL_G3 (checked), G2_NC, G1_NC, G0_NC */
"	.reloc ., R_AARCH64_MOVW_PREL_G3, kfree + 8\n"
"	.inst 0xd2e00000\n"			/* movz x0, #0, lsl #48 */
"	.reloc ., R_AARCH64_MOVW_PREL_G2_NC, kfree + 8\n"
"	.inst 0xf2c00000\n"			/* movk x0, #0, lsl #32 */
"	.reloc ., R_AARCH64_MOVW_PREL_G1_NC, kfree + 8\n"
"	.inst 0xf2a00000\n"			/* movk x0, #0, lsl #16 */
"	.reloc ., R_AARCH64_MOVW_PREL_G0_NC, kfree + 8\n"
"	.inst 0xf2800000\n"			/* movk x0, #0 */
/* checked MOVW types that fit: PREL_G0 (this section), PREL_G1 (kernel, < 4 GB away),
 * PREL_G2 (kernel), SABS_G2 (a kernel address is a negative 48-bit value: MOVN) */
"	.reloc ., R_AARCH64_MOVW_PREL_G0, 1f\n"
"	.inst 0xd2800000\n"			/* movz x0, #0 */
"	.reloc ., R_AARCH64_MOVW_PREL_G1, jiffies\n"
"	.inst 0xd2a00000\n"			/* movz x0, #0, lsl #16 */
"	.reloc ., R_AARCH64_MOVW_PREL_G2, kfree\n"
"	.inst 0xd2c00000\n"			/* movz x0, #0, lsl #32 */
"	.reloc ., R_AARCH64_MOVW_SABS_G2, kfree\n"
"	.inst 0xd2c00000\n"
/* short-range PC-relative types, to the local label 1: below */
"	.reloc ., R_AARCH64_ADR_PREL_LO21, 1f + 3\n"
"	.inst 0x10000000\n"			/* adr x0, . */
"	.reloc ., R_AARCH64_LD_PREL_LO19, 1f + 8\n"
"	.inst 0x58000000\n"			/* ldr x0, . */
"	.reloc ., R_AARCH64_CONDBR19, 1f\n"
"	.inst 0x54000000\n"			/* b.eq . */
"	.reloc ., R_AARCH64_TSTBR14, 1f + 4\n"
"	.inst 0x36000000\n"			/* tbz w0, #0, . */
"	.balign 8\n"
"1:	.quad 0x5a5a5a5a5a5a5a5a\n"
"	.quad 0xa5a5a5a5a5a5a5a5\n"
KLPSYM_RELOC_END);
