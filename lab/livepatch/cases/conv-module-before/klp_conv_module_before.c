// SPDX-License-Identifier: GPL-2.0
/*
 * Case "conv-module-before": an object for the module dummy whose replacement of dummy_get_stats64()
 * reads numdummies, a static variable of dummy.ko, through an extern declaration: a klp
 * relocation in a module-specific section (.klp.rela.dummy.*), applied when dummy is
 * (or becomes) loaded. Reading rx_packets of dummy0 gives 4000 + numdummies (4001) and
 * logs "KLPREL numdummies <address>".
 * dummy is loaded first: the relocation is applied when the patch is enabled.
 *
 * Built with KBUILD_MODPOST_WARN=1; needs klpsym convert (with --modules) before loading.
 */
#include <linux/netdevice.h>
#include "klp_oracle.h"

/* static int numdummies in drivers/net/dummy.c (its module parameter). */
extern int numdummies;

static void klp_dummy_get_stats64(struct net_device *dev, struct rtnl_link_stats64 *stats)
{
	printk(KERN_INFO "KLPREL numdummies %px\n", &numdummies);
	stats->rx_packets = 4000 + numdummies;
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
