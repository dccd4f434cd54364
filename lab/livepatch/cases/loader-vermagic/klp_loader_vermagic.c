// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-vermagic": the unique patch with one vermagic token changed (mod_unload ->
 * mod_unlo4d): check_modinfo() refuses it. The case.conf post= edit (lab/livepatch/klp-
 * elfedit.c) makes the change after kbuild; the module is otherwise the unique case.
 */
#define KLP_CASE "loader-vermagic"
#include "klp_cmdline_patch.h"
