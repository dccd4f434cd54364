// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-bad-crc": the unique patch with a wrong symbol version for
 * klp_enable_patch: resolve_symbol() fails with -EINVAL. The case.conf post= edit
 * (lab/livepatch/klp-elfedit.c) makes the change after kbuild; the module is otherwise the
 * unique case.
 */
#define KLP_CASE "loader-bad-crc"
#include "klp_cmdline_patch.h"
