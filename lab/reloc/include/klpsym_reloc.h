/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared part of the relocation oracle's case modules (lab/reloc-oracle.sh).
 *
 * Every case puts its relocations in the section .klpsym_reloc (flags "a": allocated,
 * read-only, not executable, so neither ftrace, alternatives nor objtool look at it; a name
 * scripts/module.lds does not merge), between the global labels klpsym_reloc_start and
 * klpsym_reloc_end. The init function prints the section's bytes as the kernel holds them
 * after relocation, 32 bytes a line: "klpsym-reloc OFFSET HEXBYTES" (OFFSET: 4 hex digits).
 *
 * Module-local targets: klpsym_local_var (a static array in .data) and klpsym_local_func (a
 * static function in .text); both __used so the compiler keeps them under their names.
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/printk.h>

extern const unsigned char klpsym_reloc_start[], klpsym_reloc_end[];

/*
 * A case's top-level asm: asm(KLPSYM_RELOC_BEGIN "...the relocations..." KLPSYM_RELOC_END);
 * opens .klpsym_reloc at klpsym_reloc_start and closes it at klpsym_reloc_end.
 */
#define KLPSYM_RELOC_BEGIN						\
	"	.pushsection .klpsym_reloc, \"a\", %progbits\n"		\
	"	.balign 16\n"							\
	"	.globl klpsym_reloc_start\n"					\
	"klpsym_reloc_start:\n"
#define KLPSYM_RELOC_END						\
	"	.globl klpsym_reloc_end\n"					\
	"klpsym_reloc_end:\n"						\
	"	.popsection\n"

static __used __aligned(16) unsigned long klpsym_local_var[4] = {
	0x1111111111111111UL, 0x2222222222222222UL, 0x3333333333333333UL, 0x4444444444444444UL
};

static noinline __used int klpsym_local_func(int x)
{
	return x + (int)klpsym_local_var[0];
}

static int __init klpsym_reloc_init(void)
{
	size_t len = klpsym_reloc_end - klpsym_reloc_start, off, n;

	pr_info("klpsym-reloc-size %zu\n", len);
	for (off = 0; off < len; off += 32) {
		n = min_t(size_t, 32, len - off);
		pr_info("klpsym-reloc %04zx %*phN\n", off, (int)n, klpsym_reloc_start + off);
	}
	return 0;
}

static void __exit klpsym_reloc_exit(void)
{
}

module_init(klpsym_reloc_init);
module_exit(klpsym_reloc_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klpsym relocation oracle case");
