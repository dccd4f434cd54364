// SPDX-License-Identifier: GPL-2.0
/*
 * Case "module-before": an object for the module dummy (drivers/net/dummy.ko, from the kernel
 * package), function dummy_get_stats64.
 * dummy is loaded first: the kernel resolves the function when the patch is enabled.
 * /sys/class/net/dummy0/statistics/rx_packets then reads 4242.
 */
#include <linux/netdevice.h>
#include "klp_oracle.h"

/* Same prototype as dummy_get_stats64(); reading a statistic of dummy0 calls it. */
static void klp_dummy_get_stats64(struct net_device *dev, struct rtnl_link_stats64 *stats)
{
	stats->rx_packets = 4242;
	stats->tx_packets = 4343;
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
