// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-layout-crc": the unique patch with a wrong module_layout CRC:
 * check_modstruct_version() fails the load with -ENOEXEC. The case.conf post= edit
 * (lab/livepatch/klp-elfedit.c) makes the change after kbuild; the module is otherwise the
 * unique case.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "klp_oracle loader-layout-crc: patched cmdline_proc_show\n");
	return 0;
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
