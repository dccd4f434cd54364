// SPDX-License-Identifier: GPL-2.0
/*
 * Case "ambiguous-pos2": m_show with old_sympos 2. vmlinux defines two static m_show():
 * position 1 is kernel/module/procfs.c's (/proc/modules), position 2 fs/namespace.c's
 * (/proc/mounts); both are seq_file show functions, so one replacement fits either.
 * Position 2 picks /proc/mounts' m_show: cat /proc/mounts shows the patch, /proc/modules does not.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

static int klp_m_show(struct seq_file *m, void *v)
{
	seq_puts(m, "klp_oracle ambiguous-pos2: patched m_show\n");
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "m_show", .new_func = klp_m_show, .old_sympos = 2 },
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
