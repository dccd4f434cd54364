// SPDX-License-Identifier: GPL-2.0
/*
 * Case "loader-vermagic-release": the unique patch with the vermagic's release changed
 * (-amd64 -> -xmd64): with __versions same_magic() skips the release. The case.conf post=
 * edit (lab/livepatch/klp-elfedit.c) makes the change after kbuild; the module is
 * otherwise the unique case.
 */
#define KLP_CASE "loader-vermagic-release"
#include "klp_cmdline_patch.h"
