/* SPDX-License-Identifier: GPL-2.0 */
/*
 * klp_cmdline_patch.h - the "unique" case's whole patch, for the cases that differ from it
 * only in what the module loader sees (vermagic, symbol versions: their case.conf post=
 * edits). It replaces cmdline_proc_show() (fs/proc/cmdline.c, a static function defined
 * once in vmlinux) with old_sympos 0, like samples/livepatch/livepatch-sample.c; `cat
 * /proc/cmdline` shows the replacement runs. Define KLP_CASE (the case's name, a string)
 * before including it, and KLP_CMDLINE_EXTRA(m) for what a case prints first (the addresses
 * its patched code sees).
 */
#ifndef KLP_CMDLINE_PATCH_H
#define KLP_CMDLINE_PATCH_H

#include <linux/seq_file.h>
#include "klp_oracle.h"

#ifndef KLP_CASE
#error "define KLP_CASE before including klp_cmdline_patch.h"
#endif

#ifndef KLP_CMDLINE_EXTRA
#define KLP_CMDLINE_EXTRA(m) do { } while (0)
#endif

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	KLP_CMDLINE_EXTRA(m);
	seq_puts(m, "klp_oracle " KLP_CASE ": patched cmdline_proc_show\n");
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

#endif
