// SPDX-License-Identifier: GPL-2.0
/*
 * Case "vmlinux-in-module-sec": an object for the module dummy whose replacement of
 * dummy_get_stats64() reads saved_command_line (unexported vmlinux data). klpsym convert
 * puts that relocation in .klp.rela.vmlinux..text; the post= edit of case.conf renames the
 * section to .klp.rela.dummy..text, so a module-specific section refers to a vmlinux
 * symbol, which the kernel forbids when it initializes the dummy object.
 *
 * Built with KBUILD_MODPOST_WARN=1; needs klpsym convert before loading.
 */
#include <linux/netdevice.h>
#include "klp_oracle.h"

/* Global but not exported (kallsyms: B saved_command_line). */
extern char *saved_command_line;

static void klp_dummy_get_stats64(struct net_device *dev, struct rtnl_link_stats64 *stats)
{
	printk(KERN_INFO "KLPREL saved_command_line %px\n", &saved_command_line);
	stats->rx_packets = 4242;
}

static struct klp_func funcs[] = {
	{ .old_name = "dummy_get_stats64", .new_func = klp_dummy_get_stats64 },
	{ }
};

static struct klp_object objs[] = {
	{ .name = "dummy", .funcs = funcs },
	{ }
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

KLP_ORACLE_MODULE(patch);
