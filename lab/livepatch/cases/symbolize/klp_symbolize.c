// SPDX-License-Identifier: GPL-2.0
/*
 * Case "symbolize": the kernel's own %pS and %pB, for `klpsym addr` to be held to.
 *
 * Write an address to /sys/module/klp_symbolize/parameters/addr, then read .../show: one line
 * per address A-1, A, A+1:
 *     KLPSYM <A as %px> <%pS> <%pB>
 * The exercise (case.conf) writes, from /proc/kallsyms: cmdline_proc_show's start, the next
 * address kallsyms lists after it (so A-1 is the last byte of cmdline_proc_show and %pB of
 * A is its end), `_end` (the last vmlinux symbol: A+1 is past every symbol), and this
 * module's own functions, the last of which ends the module's text.
 * The patch itself replaces cmdline_proc_show (so the module is a livepatch the oracle loads
 * like any other case); its replacement is not what this case is about.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

static unsigned long klp_probe_addr;
module_param_named(addr, klp_probe_addr, ulong, 0644);

/* Called by nothing: its address is symbolized (a module text symbol). */
noinline int klp_symbolize_probe(int x)
{
	return x * 3 + 1;
}

static int klp_show_get(char *buf, const struct kernel_param *kp)
{
	int n = 0;
	long d;

	for (d = -1; d <= 1; d++) {
		void *a = (void *)(klp_probe_addr + d);

		n += scnprintf(buf + n, PAGE_SIZE - n, "KLPSYM %px %pS %pB\n", a, a, a);
	}
	return n;
}

static const struct kernel_param_ops klp_show_ops = {
	.get = klp_show_get,
};
module_param_cb(show, &klp_show_ops, NULL, 0444);

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_printf(m, "klp_oracle symbolize: %d\n", klp_symbolize_probe(1));
	return 0;
}

/* Placed last in the file: the module's last text symbol, for the end of its text. */
noinline int klp_symbolize_last(int x)
{
	return x + 7;
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
