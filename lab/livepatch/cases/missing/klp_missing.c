// SPDX-License-Identifier: GPL-2.0
/*
 * Case "missing": a function name that vmlinux does not define. The kernel refuses the
 * patch at klp_enable_patch(); the replacement never runs.
 */
#include "klp_oracle.h"

static void klp_no_such_function(void)
{
}

static struct klp_func funcs[] = {
	{ .old_name = "klp_oracle_no_such_function", .new_func = klp_no_such_function },
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
