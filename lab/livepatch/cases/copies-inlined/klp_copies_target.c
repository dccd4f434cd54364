// SPDX-License-Identifier: GPL-2.0
/*
 * Case "copies-inlined", the target module: klp_cov_helper is small and static, so the
 * compiler inlines it into klp_cov_get_inlined; its address is taken (klp_cov_ptr), so it also
 * stays out of line, where klp_cov_get_ptr reaches it through the pointer. Livepatch can
 * redirect only that out-of-line copy.
 *
 * Each parameter's read prints "KLPCOV <getter> <value> <how it called>": the getter's own
 * name (__func__), what it computed for klp_cov_arg, and `direct` or `pointer`.
 * klp_cov_old prints the helper's formula computed apart (the old value).
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static int klp_cov_arg = 41;
module_param_named(arg, klp_cov_arg, int, 0644);

/* Not `inline`: the kernel's `inline` is notrace, and livepatch needs the ftrace site. */
static int klp_cov_helper(int x)
{
	return x * 2 + 1;
}

/* Global, read once per call: the compiler cannot know what it points to. */
int (*klp_cov_ptr)(int) = klp_cov_helper;

static int klp_cov_get_ptr(char *buf, const struct kernel_param *kp)
{
	int (*f)(int) = READ_ONCE(klp_cov_ptr);

	return sprintf(buf, "KLPCOV %s %d pointer\n", __func__, f(READ_ONCE(klp_cov_arg)));
}

static int klp_cov_get_inlined(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "KLPCOV %s %d direct\n", __func__, klp_cov_helper(READ_ONCE(klp_cov_arg)));
}

/* The old value, computed without the helper. */
static int klp_cov_get_old(char *buf, const struct kernel_param *kp)
{
	int x = READ_ONCE(klp_cov_arg);

	return sprintf(buf, "KLPCOV old %d\n", x * 2 + 1);
}

static const struct kernel_param_ops klp_cov_ptr_ops = { .get = klp_cov_get_ptr };
static const struct kernel_param_ops klp_cov_inlined_ops = { .get = klp_cov_get_inlined };
static const struct kernel_param_ops klp_cov_old_ops = { .get = klp_cov_get_old };
module_param_cb(klp_cov_get_ptr, &klp_cov_ptr_ops, NULL, 0444);
module_param_cb(klp_cov_get_inlined, &klp_cov_inlined_ops, NULL, 0444);
module_param_cb(klp_cov_old, &klp_cov_old_ops, NULL, 0444);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klpsym livepatch oracle: the target of case copies-inlined");
