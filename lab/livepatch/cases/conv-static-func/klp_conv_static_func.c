// SPDX-License-Identifier: GPL-2.0
/*
 * Case "conv-static-func": the replacement calls version_proc_show(), a static
 * function of fs/proc/version.c (defined once in vmlinux), through an extern declaration.
 *
 * Built with KBUILD_MODPOST_WARN=1 (the reference is undefined for modpost); klpsym
 * convert must turn it into a klp relocation before the kernel can load the module.
 * The replacement of cmdline_proc_show() prints "KLPREL <name> <address>" to the kernel
 * log and to /proc/cmdline: the address the kernel's klp relocation produced.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

/* static in fs/proc/version.c: no module can link to it without a klp relocation. */
extern int version_proc_show(struct seq_file *m, void *v);

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	printk(KERN_INFO "KLPREL version_proc_show %px\n", version_proc_show);
	seq_printf(m, "KLPREL version_proc_show %px\n", version_proc_show);
	version_proc_show(m, v);	/* prints the "Linux version ..." line */
	seq_puts(m, "klp_oracle conv-static-func: patched cmdline_proc_show\n");
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
