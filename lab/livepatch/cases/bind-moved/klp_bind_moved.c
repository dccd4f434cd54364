// SPDX-License-Identifier: GPL-2.0
/*
 * Case "bind-moved": the replacement of cmdline_proc_show() takes the addresses of four
 * names vmlinux defines several times, each pinned (klpsym convert --pin) to the position of
 * one definition on the kernel the patch is built for, bookworm-backports' 6.12 (+deb12,
 * gcc-12). On trixie's 6.12 (+deb13, gcc-14) each of these positions holds another
 * definition, and the kernel binds it without a word (seen in the two builds' tables and
 * DWARF; none of these is called, only their addresses are printed):
 *   jhash,2         kernel/bpf/offload.c        -> security/apparmor/apparmorfs.c
 *   pfn_valid,4     mm/mm_init.c                -> mm/memory.c
 *   _rs.6,1         (ratelimit state) coredump.c -> swapfile.c
 *   descriptor.5,3  (dynamic debug) tcp_output.c -> tcp.c
 * The names are not C identifiers (a dot) or are inline functions of the headers, so each
 * is declared under a C name with its symbol name as an asm label.
 *
 * Built with KBUILD_MODPOST_WARN=1 (the references are undefined for modpost); klpsym
 * convert turns them into klp relocations. The replacement prints "KLPREL <name> <address>"
 * to the kernel log and to /proc/cmdline: the address each klp relocation produced.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

extern char klp_jhash[] __asm__("jhash");
extern char klp_pfn_valid[] __asm__("pfn_valid");
extern char klp_rs6[] __asm__("_rs.6");
extern char klp_descriptor5[] __asm__("descriptor.5");

static void klp_print(struct seq_file *m, const char *name, const void *addr)
{
	printk(KERN_INFO "KLPREL %s %px\n", name, addr);
	seq_printf(m, "KLPREL %s %px\n", name, addr);
}

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	klp_print(m, "jhash", klp_jhash);
	klp_print(m, "pfn_valid", klp_pfn_valid);
	klp_print(m, "_rs.6", klp_rs6);
	klp_print(m, "descriptor.5", klp_descriptor5);
	seq_puts(m, "klp_oracle bind-moved: patched cmdline_proc_show\n");
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
