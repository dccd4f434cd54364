// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-unknown-symbol": the unique patch, but the replacement calls a function no
 * kernel defines. modpost only warns (KBUILD_MODPOST_WARN=1); the module loader's
 * simplify_symbols() refuses the module: "Unknown symbol ... (err -2)".
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

extern int klp_oracle_no_such_function(struct seq_file *m);

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	return klp_oracle_no_such_function(m);
}

static struct klp_func funcs[] = {
	{ .old_name = "cmdline_proc_show", .new_func = klp_cmdline_proc_show },
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
