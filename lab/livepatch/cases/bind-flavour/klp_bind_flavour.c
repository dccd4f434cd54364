// SPDX-License-Identifier: GPL-2.0
/*
 * Case "bind-flavour": two flavours of one Debian release, trixie's 6.12 -amd64 and
 * -cloud-amd64, are two builds of one source with two configurations. Their module_layout
 * CRC and the CRCs of every symbol this module imports are the same, so a patch built for
 * -amd64 loads on -cloud-amd64 with a plain finit_module(2): no --force, the kernel checks
 * the versions and the vermagic (the release before the first space is skipped with CRCs).
 * The replacement of cmdline_proc_show() takes the addresses of six names vmlinux defines
 * several times, each pinned (klpsym convert --pin) to a position on -amd64. The cloud
 * build leaves out many drivers, so four of the positions hold other definitions there
 * (the two builds' debug vmlinux, in address order):
 *   pfn_valid,1          sev.c                    -> snapshot.c
 *   descriptor.5,2       (dynamic debug) 8250_dma.c -> tcp.c
 *   chksum_update,1      crct10dif_generic.c      -> crc32c_generic.c
 *   early_cpu_to_node,1  setup_percpu.c           -> numa.c
 * and two hold the same ones (controls): jhash,2 (apparmorfs.c), _rs.6,2 (coredump.c).
 *
 * Built with KBUILD_MODPOST_WARN=1 (the references are undefined for modpost); klpsym
 * convert turns them into klp relocations. The replacement prints "KLPREL <name> <address>"
 * to the kernel log and to /proc/cmdline: the address each klp relocation produced.
 */
#include <linux/seq_file.h>
#include "klp_oracle.h"

extern char klp_pfn_valid[] __asm__("pfn_valid");
extern char klp_descriptor5[] __asm__("descriptor.5");
extern char klp_chksum_update[] __asm__("chksum_update");
extern char klp_early_cpu_to_node[] __asm__("early_cpu_to_node");
extern char klp_jhash[] __asm__("jhash");
extern char klp_rs6[] __asm__("_rs.6");

static void klp_print(struct seq_file *m, const char *name, const void *addr)
{
	printk(KERN_INFO "KLPREL %s %px\n", name, addr);
	seq_printf(m, "KLPREL %s %px\n", name, addr);
}

static int klp_cmdline_proc_show(struct seq_file *m, void *v)
{
	klp_print(m, "pfn_valid", klp_pfn_valid);
	klp_print(m, "descriptor.5", klp_descriptor5);
	klp_print(m, "chksum_update", klp_chksum_update);
	klp_print(m, "early_cpu_to_node", klp_early_cpu_to_node);
	klp_print(m, "jhash", klp_jhash);
	klp_print(m, "_rs.6", klp_rs6);
	seq_puts(m, "klp_oracle bind-flavour: patched cmdline_proc_show\n");
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
