// SPDX-License-Identifier: GPL-2.0
/*
 * Case "notrace": replaces tracing_is_on() (kernel/trace/trace.c, exported, defined once),
 * a function without an ftrace call site: every file of kernel/trace/ is compiled without
 * CC_FLAGS_FTRACE. klp_find_object_symbol() finds it; klp_patch_func() then finds no ftrace
 * location for it and the kernel refuses the patch (klp_enable_patch() returns -EINVAL).
 * Should a kernel accept it, the replacement keeps the answer of an idle guest's ring buffer
 * (on) and says it ran.
 */
#include "klp_oracle.h"

static int klp_tracing_is_on(void)
{
	pr_info("klp_oracle notrace: patched tracing_is_on\n");
	return 1;
}

static struct klp_func funcs[] = {
	{ .old_name = "tracing_is_on", .new_func = klp_tracing_is_on },
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
