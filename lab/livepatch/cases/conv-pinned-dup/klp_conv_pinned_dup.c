// SPDX-License-Identifier: GPL-2.0
/*
 * Case "conv-pinned-dup": the replacement takes the address of m_show, a static
 * name defined twice in vmlinux (kernel/module/procfs.c, fs/namespace.c); the author pins
 * position 2 (fs/namespace.c's). It is never called: only its address is printed.
 *
 * Built with KBUILD_MODPOST_WARN=1 (the reference is undefined for modpost); klpsym
 * convert must turn it into a klp relocation before the kernel can load the module.
 * The replacement of cmdline_proc_show() prints "KLPREL <name> <address>" to the kernel
 * log and to /proc/cmdline: the address the kernel's klp relocation produced.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

/* Two static definitions in vmlinux; pinned to position 2 (klpsym convert --pin m_show=2). */
extern int m_show(struct seq_file *m, void *v);

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	printk(KERN_INFO "KLPREL m_show %px\n", m_show);
	seq_printf(m, "KLPREL m_show %px\n", m_show);
	seq_puts(m, "klp_oracle conv-pinned-dup: patched cmdline_proc_show\n");
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "cmdline_proc_show", .new_func = klp_cmdline_proc_show },
	{ }
};

static struct klp_object objs[] = {
	{ .funcs = funcs },	/* name NULL: vmlinux */
	{ }
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

KLP_ORACLE_MODULE(patch);
