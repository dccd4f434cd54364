/* SPDX-License-Identifier: GPL-2.0 */
/*
 * klp_oracle.h - what every livepatch case module of the oracle shares.
 *
 * A case module defines its replacement functions, its klp_func and klp_object tables
 * and a `struct klp_patch`, then ends with KLP_ORACLE_MODULE(patch). That adds:
 * - an init that calls klp_enable_patch() and returns its error unchanged (the kernel's own
 *   `livepatch: ...` line says why), and only when the kernel accepted the patch prints one
 *   line per function:
 *       KLPADDR <object> <old_name> <old_sympos> <old_func as %px>
 *   old_func is the address the kernel resolved (klp_init_object_loaded); it is 0 for an
 *   object whose module is not loaded (yet);
 * - a read-only module parameter, /sys/module/<patch>/parameters/klp_addrs, that returns
 *   the same lines at any later time, e.g. after the target module was loaded and the
 *   kernel resolved the functions of its object;
 * - MODULE_LICENSE("GPL") and the `livepatch=Y` modinfo the kernel requires.
 *
 * Written for the Debian 6.1 kernel (struct klp_func has old_func, the object and function
 * arrays end with an all-zero entry), in the style of samples/livepatch/livepatch-sample.c.
 */
#ifndef KLP_ORACLE_H
#define KLP_ORACLE_H

#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

/* The kernel's own end-of-table tests for the static arrays (klp_for_each_*_static). */
static inline bool klp_oracle_obj_end(const struct klp_object *obj)
{
	return !obj->funcs && !obj->name;
}

static inline bool klp_oracle_func_end(const struct klp_func *func)
{
	return !func->old_name && !func->new_func && !func->old_sympos;
}

/* Writes the KLPADDR lines of @patch into @buf (at most @size bytes); returns the length. */
static inline int klp_oracle_format(const struct klp_patch *patch, char *buf, size_t size)
{
	const struct klp_object *obj;
	const struct klp_func *func;
	int n = 0;

	for (obj = patch->objs; !klp_oracle_obj_end(obj); obj++)
		for (func = obj->funcs; func && !klp_oracle_func_end(func); func++)
			n += scnprintf(buf + n, size - n, "KLPADDR %s %s %lu %px\n",
				       obj->name ? obj->name : "vmlinux", func->old_name,
				       func->old_sympos, func->old_func);
	return n;
}

/* One printk per line, so that every line is its own kernel log record. */
static inline void klp_oracle_log(const struct klp_patch *patch)
{
	const struct klp_object *obj;
	const struct klp_func *func;

	for (obj = patch->objs; !klp_oracle_obj_end(obj); obj++)
		for (func = obj->funcs; func && !klp_oracle_func_end(func); func++)
			printk(KERN_INFO "KLPADDR %s %s %lu %px\n",
			       obj->name ? obj->name : "vmlinux", func->old_name,
			       func->old_sympos, func->old_func);
}

/*
 * KLP_ORACLE_MODULE_HOOK(patch, hook): KLP_ORACLE_MODULE with hook() called first in the
 * module's init, while the init text is still mapped (a case that looks at its own init
 * addresses). KLP_ORACLE_MODULE is the same with no hook.
 */
#define KLP_ORACLE_MODULE(patch) KLP_ORACLE_MODULE_HOOK(patch, klp_oracle_no_hook)

static inline void klp_oracle_no_hook(void)
{
}

#define KLP_ORACLE_MODULE_HOOK(patch, hook)					\
static int klp_oracle_addrs_get(char *buf, const struct kernel_param *kp)	\
{										\
	return klp_oracle_format(&(patch), buf, PAGE_SIZE);			\
}										\
static const struct kernel_param_ops klp_oracle_addrs_ops = {			\
	.get = klp_oracle_addrs_get,						\
};										\
module_param_cb(klp_addrs, &klp_oracle_addrs_ops, NULL, 0444);		\
static int __init klp_oracle_init(void)					\
{										\
	int ret;								\
	hook();									\
	ret = klp_enable_patch(&(patch));					\
	if (ret)								\
		return ret;							\
	klp_oracle_log(&(patch));						\
	return 0;								\
}										\
static void __exit klp_oracle_exit(void)					\
{										\
}										\
module_init(klp_oracle_init);							\
module_exit(klp_oracle_exit);							\
MODULE_LICENSE("GPL");								\
MODULE_DESCRIPTION("klpsym livepatch oracle case");				\
MODULE_INFO(livepatch, "Y")

#endif /* KLP_ORACLE_H */
