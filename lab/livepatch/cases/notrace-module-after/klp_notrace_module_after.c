// SPDX-License-Identifier: GPL-2.0
/*
 * Case "notrace-module-after": replaces fat_search_long.cold (fs/fat/dir.c's cold part, a local
 * function of fat.ko the compiler split out), which has no ftrace call site: a .cold part is
 * not a function entry, so it has no `call __fentry__` and no __mcount_loc entry of fat.ko.
 * The patch is enabled first (fat not loaded: the object is deferred); when fat loads,
 * klp_module_coming() finds the function, finds no ftrace location for it, and the kernel
 * refuses to load fat (-EINVAL).
 */
#include "klp_oracle.h"

static void klp_fat_search_long_cold(void)
{
	pr_info("klp_oracle notrace-module: patched fat_search_long.cold\n");
}

static struct klp_func funcs[] = {
	{ .old_name = "fat_search_long.cold", .new_func = klp_fat_search_long_cold },
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
