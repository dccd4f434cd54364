// SPDX-License-Identifier: GPL-2.0
/*
 * Case "bind-same", the control of bind-moved: positions chosen on bookworm-backports' 6.12
 * (+deb12) that hold the same definitions on trixie's 6.12 (+deb13):
 *   jhash,1       kernel/workqueue.c
 *   pfn_valid,1   arch/x86/virt/svm/sev.c
 *   warned.1,1    (a once flag) smp.c
 * Only the addresses are printed ("KLPREL <name> <address>"), as in bind-moved.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

extern char klp_jhash[] __asm__("jhash");
extern char klp_pfn_valid[] __asm__("pfn_valid");
extern char klp_warned1[] __asm__("warned.1");

static void klp_print(struct seq_file *m, const char *name, const void *addr)
{
	printk(KERN_INFO "KLPREL %s %px\n", name, addr);
	seq_printf(m, "KLPREL %s %px\n", name, addr);
}

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	klp_print(m, "jhash", klp_jhash);
	klp_print(m, "pfn_valid", klp_pfn_valid);
	klp_print(m, "warned.1", klp_warned1);
	seq_puts(m, "klp_oracle bind-same: patched cmdline_proc_show\n");
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
