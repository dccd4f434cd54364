// SPDX-License-Identifier: GPL-2.0
/*
 * Case "dotted": two GCC clones with suffixed names, each defined once in vmlinux:
 * cxl_set_mem_enable.isra.0 (drivers/cxl/core/pci.c) and cpu_show_common.constprop.0
 * (arch/x86/kernel/cpu/bugs.c). Their calling conventions are GCC's private business, so
 * the replacement matches neither: it must never run, and nothing in the guest calls them
 * (no CXL device; the harness never reads /sys/devices/system/cpu/vulnerabilities).
 * What matters here is the address the kernel resolves, and that the patch is accepted.
 */
#include "klp_oracle.h"

static long klp_never_called(void)
{
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "cxl_set_mem_enable.isra.0", .new_func = klp_never_called },
	{ .old_name = "cpu_show_common.constprop.0", .new_func = klp_never_called },
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
