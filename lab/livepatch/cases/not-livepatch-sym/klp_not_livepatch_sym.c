// SPDX-License-Identifier: GPL-2.0
/*
 * Case "not-livepatch-sym": like conv-unexported-data; after conversion the klp
 * symbol's st_shndx is SHN_ABS instead of SHN_LIVEPATCH (the module loader accepts an
 * absolute symbol; livepatch then refuses it).
 *
 * Built with KBUILD_MODPOST_WARN=1 (the reference is undefined for modpost); klpsym
 * convert must turn it into a klp relocation before the kernel can load the module.
 * The replacement of cmdline_proc_show() prints "KLPREL <name> <address>" to the kernel
 * log and to /proc/cmdline: the address the kernel's klp relocation produced.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

/* Global but not exported (kallsyms: B saved_command_line): unreachable for modules. */
extern char *saved_command_line;

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	printk(KERN_INFO "KLPREL saved_command_line %px\n", &saved_command_line);
	seq_printf(m, "KLPREL saved_command_line %px\n", &saved_command_line);
	seq_printf(m, "%s\n", saved_command_line);
	seq_puts(m, "klp_oracle not-livepatch-sym: patched cmdline_proc_show\n");
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
