// SPDX-License-Identifier: GPL-2.0
/*
 * Case "module-dup-pos2": an object for the module fat (fs/fat/fat.ko, from the kernel package), function
 * init_once, which fat.ko defines twice (fs/fat/cache.c, then fs/fat/inode.c in its symbol
 * table on every lab kernel), with old_sympos 2. fat is loaded first: the kernel walks fat's own symbols when the patch is enabled.
 * The replacement is a slab constructor that is never called here: only the address the
 * kernel resolves is looked at (KLPADDR lines, klp_addrs).
 */
#include "klp_oracle.h"

static void klp_init_once(void *foo)
{
}

static struct klp_func funcs[] = {
	{ .old_name = "init_once", .new_func = klp_init_once, .old_sympos = 2 },
	{ }
};

static struct klp_object objs[] = {
	{ .name = "fat", .funcs = funcs },
	{ }
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

KLP_ORACLE_MODULE(patch);
