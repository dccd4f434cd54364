#!/usr/bin/env bash
# One kernel of the lab matrix, made ready for the tests: fetched and unpacked, captured,
# its -dbg vmlinux fetched, the livepatch oracle run (lab/livepatch-oracle.sh; KLPSYM_BIN
# as there), the seed's experiment (lab/seed-experiment.sh) and, for bookworm's amd64 kernel
# and the arm64 kernels, the relocation oracle (lab/reloc-oracle.sh). The suite is
# KLPSYM_LAB_SUITE (default bookworm), the architecture KLPSYM_LAB_ARCH (default amd64), the
# flavour KLPSYM_LAB_FLAVOUR (default the architecture's own; another one, cloud-amd64, gets
# its -dbg vmlinux and the livepatch cases that name it in load_on=, and no capture, seed or
# relocation oracle: CAPTURE_DIR, KALLSYMS_*, MODULES_LOADED and SEED_* are empty).
#
# arm64 kernels: no -dbg package (~1 GB; VMLINUX_DBG, DBG_DEB and DEBUG_MODULES_DIR are empty), no VMLINUX (the
# image is a raw Image, not ELF). A kernel without CONFIG_LIVEPATCH=y (Debian's arm64 kernels)
# gets neither the livepatch oracle nor the seed experiment: LIVEPATCH_SKIPPED= says why and
# LIVEPATCH_DIR, SEED_DIR and SEED_RESULTS are empty. Every key is always present.
#
# Writes $KLPSYM_LAB_DIR/lab.env, the KEY=VALUE description of this kernel the tests read
# (through KLPSYM_TEST_LAB_KERNELS), and prints LAB_ENV=<that file>.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# run_and_import SCRIPT: runs a lab script and imports its KEY=VALUE lines (keys are upper
# case names; nothing in the output is evaluated as code).
run_and_import() {
	local out line
	out="$("$@")" || die "$* failed"
	while IFS= read -r line; do
		[[ "$line" =~ ^([A-Z][A-Z0-9_]*)=(.*)$ ]] || continue
		printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
	done <<<"$out"
}

VMLINUX_DBG="" DBG_DEB="" DEBUG_MODULES_DIR="" ORACLE_DIR="" SEED_DIR="" SEED_RESULTS="" RELOC_DIR="" LIVEPATCH_SKIPPED=""
CAPTURE_DIR="" KALLSYMS_NOMOD="" KALLSYMS_MODS=""
run_and_import "$LAB_SRC_DIR/fetch-kernel.sh"
# A kernel of another flavour (KLPSYM_LAB_FLAVOUR) is the other half of a flavour pair: its
# -dbg vmlinux and the livepatch cases that name it (load_on=), no capture, no seed.
other_flavour=0
[ "$LAB_FLAVOUR" = "$LAB_ARCH" ] || other_flavour=1
[ "$other_flavour" = 1 ] || run_and_import "$LAB_SRC_DIR/capture-kallsyms.sh"
if [ "$LAB_ARCH" = amd64 ]; then
	run_and_import "$LAB_SRC_DIR/fetch-dbg-vmlinux.sh"
fi
if grep -qx 'CONFIG_LIVEPATCH=y' "$CONFIG"; then
	run_and_import "$LAB_SRC_DIR/livepatch-oracle.sh"
	[ "$other_flavour" = 1 ] || run_and_import "$LAB_SRC_DIR/seed-experiment.sh"
else
	LIVEPATCH_SKIPPED="CONFIG_LIVEPATCH is not set"
	log "$KERNEL_RELEASE: CONFIG_LIVEPATCH is not set: no livepatch oracle, no seed experiment"
fi
# The relocation oracle: ordinary modules whose relocations the kernel applies (amd64 once,
# on bookworm's 6.1; every arm64 kernel).
if [ "$other_flavour" = 0 ] && { [ "$LAB_ARCH" = arm64 ] || [ "$LAB_SUITE" = bookworm ]; }; then
	run_and_import "$LAB_SRC_DIR/reloc-oracle.sh"
fi

env_file="$KLPSYM_LAB_DIR/lab.env"
cat >"$env_file.tmp" <<EOT
SUITE=$LAB_SUITE
ARCH=$LAB_ARCH
FLAVOUR=$LAB_FLAVOUR
KERNEL_ID=$LAB_KERNEL_ID
RELEASE=$KERNEL_RELEASE
PACKAGE_VERSION=$KLPSYM_LAB_VERSION
LAB_DIR=$KLPSYM_LAB_DIR
VMLINUZ=$VMLINUZ
VMLINUX=$VMLINUX
BOOT_KERNEL=$BOOT_KERNEL
VMLINUX_DBG=$VMLINUX_DBG
MODULES_DIR=$MODULES_DIR
CONFIG=$CONFIG
IMAGE_DEB=$IMAGE_DEB
DBG_DEB=$DBG_DEB
DEBUG_MODULES_DIR=$DEBUG_MODULES_DIR
CAPTURE_DIR=$CAPTURE_DIR
KALLSYMS_NOMOD=$KALLSYMS_NOMOD
KALLSYMS_MODS=$KALLSYMS_MODS
MODULES_LOADED=${CAPTURE_DIR:+$CAPTURE_DIR/modules-loaded.txt}
LIVEPATCH_DIR=$ORACLE_DIR
LIVEPATCH_SKIPPED=$LIVEPATCH_SKIPPED
SEED_DIR=$SEED_DIR
SEED_RESULTS=$SEED_RESULTS
RELOC_DIR=$RELOC_DIR
EOT
mv "$env_file.tmp" "$env_file"
printf 'LAB_ENV=%s\n' "$env_file"
