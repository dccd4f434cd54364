// SPDX-License-Identifier: GPL-2.0
/*
 * Case "dotted": two GCC clones with suffixed names, each defined once in the vmlinux of
 * every lab kernel (Debian 5.10, 6.1, 6.12, 7.2): __ghes_peek_estatus.isra.0
 * (drivers/acpi/apei/ghes.c) and __nv_msi_ht_cap_quirk.part.0 (drivers/pci/quirks.c).
 * Their calling conventions are GCC's private business, so the replacement matches
 * neither: it must never run, and nothing in the guest calls them (QEMU has no GHES error
 * source and no NVIDIA bridge; PCI quirks ran at boot, before the patch).
 * What matters here is the address the kernel resolves, and that the patch is accepted.
 */
#include "klp_oracle.h"

static long klp_never_called(void)
{
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "__ghes_peek_estatus.isra.0", .new_func = klp_never_called },
	{ .old_name = "__nv_msi_ht_cap_quirk.part.0", .new_func = klp_never_called },
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
