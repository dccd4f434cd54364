// SPDX-License-Identifier: GPL-2.0
/*
 * Case "unique-pos1": replaces cmdline_proc_show() (fs/proc/cmdline.c, a static function
 * defined once in vmlinux) with old_sympos 1 (accepted: one match, position 1), like samples/livepatch/livepatch-sample.c.
 * `cat /proc/cmdline` shows the replacement runs.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "klp_oracle unique-pos1: patched cmdline_proc_show\n");
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "cmdline_proc_show", .new_func = klp_cmdline_proc_show, .old_sympos = 1 },
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
