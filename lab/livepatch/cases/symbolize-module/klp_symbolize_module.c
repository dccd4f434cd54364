// SPDX-License-Identifier: GPL-2.0
/*
 * Case "symbolize-module": the kernel's own %pS, %pB and %ps of addresses in and around a
 * module, for `klpsym addr` to be held to: this module's text (a function's start, inside it,
 * its last function up to the end of its text layout), its rodata, data and bss symbols,
 * __this_module, its init function (printed by the init itself, while init text is
 * mapped), each section's start and the byte before it, the end of its core; and vmlinux's
 * data symbols of each type and the bytes below _text and past _end.
 *
 * Write an address to /sys/module/klp_symbolize_module/parameters/addr, then read .../show:
 *     KLPSYM <A as %px> <%pS> <%pB> <%ps>
 * for A-1, A and A+1. .../init_lines holds the same lines for the init function's start and
 * the byte after it, written while the init ran.
 * The patch replaces cmdline_proc_show, like the other cases.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

static unsigned long klp_probe_addr;
module_param_named(addr, klp_probe_addr, ulong, 0644);

/* One symbol in each data class (kept by being read below). */
static const char klp_symmod_ro[48] = "klpsym symbolize-module rodata";
static int klp_symmod_data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static int klp_symmod_bss[8];

/* Called by nothing but the exercise: a text symbol of the module. */
noinline int klp_symmod_text(int x)
{
	klp_symmod_bss[x & 7] += x;
	return x * 5 + klp_symmod_data[x & 7] + klp_symmod_ro[x & 31] + klp_symmod_bss[(x + 1) & 7];
}

static int klp_lines(char *buf, size_t size, unsigned long at)
{
	int n = 0;
	long d;

	for (d = -1; d <= 1; d++) {
		void *a = (void *)(at + d);

		n += scnprintf(buf + n, size - n, "KLPSYM %px %pS %pB %ps\n", a, a, a, a);
	}
	return n;
}

static int klp_show_get(char *buf, const struct kernel_param *kp)
{
	return klp_lines(buf, PAGE_SIZE, klp_probe_addr);
}

static const struct kernel_param_ops klp_show_ops = {
	.get = klp_show_get,
};
module_param_cb(show, &klp_show_ops, NULL, 0444);

/* Six lines of up to ~200 characters each (6.12+ names the __pfx_ padding in two columns):
 * a buffer that truncated the last one cut a line in two (512 bytes on every lab kernel,
 * 1024 on 6.12 and 7.2). */
static char klp_init_buf[2048];

static int klp_init_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%s", klp_init_buf);
}

static const struct kernel_param_ops klp_init_ops = {
	.get = klp_init_get,
};
module_param_cb(init_lines, &klp_init_ops, NULL, 0444);

/* In the init text: its own addresses, printed while they are mapped. */
static noinline void __init klp_symmod_init_probe(void)
{
	unsigned long at = (unsigned long)klp_symmod_init_probe;
	int n = klp_lines(klp_init_buf, sizeof(klp_init_buf), at);

	klp_lines(klp_init_buf + n, sizeof(klp_init_buf) - n, at + 8);
}

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_printf(m, "klp_oracle symbolize-module: %d\n", klp_symmod_text(1));
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

/* Placed last in the file: the module's last text symbol, for the end of its text. */
noinline int klp_symmod_last(int x)
{
	return x + 9;
}

KLP_ORACLE_MODULE_HOOK(patch, klp_symmod_init_probe);
