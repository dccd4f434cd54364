// SPDX-License-Identifier: GPL-2.0
/*
 * Case "conv-pin-by-file": the replacement takes the address of init_once, a static name
 * defined 7 times in Debian 6.1's vmlinux (fs/inode.c, fs/proc/inode.c, fs/hugetlbfs/inode.c,
 * ...). The author names the one in fs/inode.c by its file, not by a position:
 * `klpsym convert --pin init_once@fs/inode.c` against the kernel's -dbg vmlinux, whose DWARF
 * says which definition is in which file. It is never called: only its address is printed.
 *
 * Built with KBUILD_MODPOST_WARN=1 (the reference is undefined for modpost). The replacement
 * of cmdline_proc_show() prints "KLPREL init_once <address>": the address the kernel's klp
 * relocation produced, i.e. which init_once the patched code refers to.
 */
#include <linux/printk.h>

extern void init_once(void *foo);

#define KLP_CASE "conv-pin-by-file"
#define KLP_CMDLINE_EXTRA(m) do {						\
	printk(KERN_INFO "KLPREL init_once %px\n", init_once);			\
	seq_printf(m, "KLPREL init_once %px\n", init_once);			\
} while (0)
#include "klp_cmdline_patch.h"
