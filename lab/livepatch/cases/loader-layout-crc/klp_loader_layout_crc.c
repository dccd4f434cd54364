// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-layout-crc": the unique patch with a wrong module_layout CRC:
 * check_modstruct_version() fails the load with -ENOEXEC. The case.conf post= edit
 * (lab/livepatch/klp-elfedit.c) makes the change after kbuild; the module is otherwise the
 * unique case.
 */
#define KLP_CASE "loader-layout-crc"
#include "klp_cmdline_patch.h"
