// SPDX-License-Identifier: GPL-2.0
/*
 * Case "unique-xz": the patch of case "unique" (cmdline_proc_show, old_sympos 0), loaded as
 * a .ko.xz: the oracle compresses the built module (compress=xz in case.conf) and the kernel
 * decompresses it in finit_module(2) (CONFIG_MODULE_DECOMPRESS).
 */
#define KLP_CASE "unique-xz"
#include "klp_cmdline_patch.h"
