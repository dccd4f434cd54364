// SPDX-License-Identifier: GPL-2.0
/*
 * Case "unique": replaces cmdline_proc_show() (fs/proc/cmdline.c, a static function
 * defined once in vmlinux) with old_sympos 0, like samples/livepatch/livepatch-sample.c.
 * `cat /proc/cmdline` shows the replacement runs. The patch itself is
 * include/klp_cmdline_patch.h, shared with the module-loader cases.
 */
#define KLP_CASE "unique"
#include "klp_cmdline_patch.h"
