// SPDX-License-Identifier: GPL-2.0
/*
 * Case "copies-inlined", the patch: replaces klp_copies_target's klp_cov_helper (x * 2 + 1)
 * with x * 2 + 1001. Its parameter klp_cov_new prints the new value for the target's argument
 * (read from the target's own parameter by the exercise: 41 unless changed), computed here.
 */
#include "klp_oracle.h"

static int klp_cov_helper_new(int x)
{
	return x * 2 + 1001;
}

static int klp_cov_get_new(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "KLPCOV new %d\n", klp_cov_helper_new(41));
}

static const struct kernel_param_ops klp_cov_new_ops = { .get = klp_cov_get_new };
module_param_cb(klp_cov_new, &klp_cov_new_ops, NULL, 0444);

static struct klp_func funcs[] = {
	{ .old_name = "klp_cov_helper", .new_func = klp_cov_helper_new },
	{ }
};

static struct klp_object objs[] = {
	{ .name = "klp_copies_target", .funcs = funcs },
	{ }
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

KLP_ORACLE_MODULE(patch);
