// SPDX-License-Identifier: GPL-2.0
/*
 * Case "klp-build-layout": a livepatch module in the layout the kernel's own klp-build
 * emits since 6.19. The module's data holds no struct klp_patch: one struct klp_object_ext
 * in section .init.klp_objects (name NULL: vmlinux) points at one struct klp_func_ext in
 * .init.klp_funcs (cmdline_proc_show, sympos 0). The init finds the objects with
 * klp_find_section_by_name() and builds zero-terminated klp_object/klp_func arrays from
 * them before calling klp_enable_patch(), which is what klp-build's generic init
 * (scripts/livepatch/init.c) does; replace stays off (klp-build --no-replace).
 *
 * On kernels before 6.19 (no <linux/livepatch_external.h>) this builds an empty module that
 * the oracle never loads (case.conf: requires_symbol=klp_find_section_by_name).
 */
#include <linux/kernel.h>
#include <linux/module.h>

#if __has_include(<linux/livepatch_external.h>)
#include <linux/livepatch.h>
#include <linux/livepatch_external.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "klp_oracle.h"

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "klp_oracle klp-build-layout: patched cmdline_proc_show\n");
	return 0;
}

static struct klp_func_ext klp_build_funcs[] __section(".init.klp_funcs") __used = {
	{ .old_name = "cmdline_proc_show", .new_func = klp_cmdline_proc_show, .sympos = 0 },
};

static struct klp_object_ext klp_build_objects[] __section(".init.klp_objects") __used = {
	{ .name = NULL, .funcs = klp_build_funcs, .nr_funcs = ARRAY_SIZE(klp_build_funcs) },
};

static struct klp_patch *klp_build_patch;

static int klp_build_addrs_get(char *buf, const struct kernel_param *kp)
{
	return klp_build_patch ? klp_oracle_format(klp_build_patch, buf, PAGE_SIZE) : 0;
}

static const struct kernel_param_ops klp_build_addrs_ops = {
	.get = klp_build_addrs_get,
};
module_param_cb(klp_addrs, &klp_build_addrs_ops, NULL, 0444);

static int __init klp_build_init(void)
{
	struct klp_object_ext *ext;
	struct klp_object *objs;
	struct klp_patch *patch;
	size_t size;
	unsigned int n, i, j;
	int ret;

	ext = klp_find_section_by_name(THIS_MODULE, ".init.klp_objects", &size);
	if (!ext || size < sizeof(*ext)) {
		pr_err("nothing to patch!\n");
		return -EINVAL;
	}
	n = size / sizeof(*ext);
	patch = kzalloc(sizeof(*patch), GFP_KERNEL);
	objs = kcalloc(n + 1, sizeof(*objs), GFP_KERNEL);
	if (!patch || !objs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct klp_func *funcs = kcalloc(ext[i].nr_funcs + 1, sizeof(*funcs), GFP_KERNEL);

		if (!funcs)
			return -ENOMEM;
		for (j = 0; j < ext[i].nr_funcs; j++) {
			funcs[j].old_name = ext[i].funcs[j].old_name;
			funcs[j].new_func = ext[i].funcs[j].new_func;
			funcs[j].old_sympos = ext[i].funcs[j].sympos;
		}
		objs[i].name = ext[i].name;
		objs[i].funcs = funcs;
		objs[i].callbacks = ext[i].callbacks;
	}
	patch->mod = THIS_MODULE;
	patch->objs = objs;
	patch->replace = false;
	ret = klp_enable_patch(patch);
	if (ret)
		return ret;
	klp_build_patch = patch;
	klp_oracle_log(patch);
	return 0;
}

static void __exit klp_build_exit(void)
{
}

module_init(klp_build_init);
module_exit(klp_build_exit);
MODULE_INFO(livepatch, "Y");
#endif /* <linux/livepatch_external.h> */

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("klpsym livepatch oracle case: klp-build's layout");
