#!/usr/bin/env bash
# One kernel of the lab matrix, made ready for the tests: fetched and unpacked, captured,
# its -dbg vmlinux fetched, the livepatch oracle run (lab/livepatch-oracle.sh; KLPSYM_BIN
# as there) and the seed's experiment (lab/seed-experiment.sh). The suite is KLPSYM_LAB_SUITE (default bookworm).
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

run_and_import "$LAB_SRC_DIR/fetch-kernel.sh"
run_and_import "$LAB_SRC_DIR/capture-kallsyms.sh"
run_and_import "$LAB_SRC_DIR/fetch-dbg-vmlinux.sh"
run_and_import "$LAB_SRC_DIR/livepatch-oracle.sh"
run_and_import "$LAB_SRC_DIR/seed-experiment.sh"

env_file="$KLPSYM_LAB_DIR/lab.env"
cat >"$env_file.tmp" <<EOT
SUITE=$LAB_SUITE
ARCH=$LAB_ARCH
RELEASE=$KERNEL_RELEASE
PACKAGE_VERSION=$KLPSYM_LAB_VERSION
LAB_DIR=$KLPSYM_LAB_DIR
VMLINUZ=$VMLINUZ
VMLINUX=$VMLINUX
VMLINUX_DBG=$VMLINUX_DBG
MODULES_DIR=$MODULES_DIR
CONFIG=$CONFIG
IMAGE_DEB=$IMAGE_DEB
DBG_DEB=$DBG_DEB
CAPTURE_DIR=$CAPTURE_DIR
KALLSYMS_NOMOD=$KALLSYMS_NOMOD
KALLSYMS_MODS=$KALLSYMS_MODS
MODULES_LOADED=$CAPTURE_DIR/modules-loaded.txt
LIVEPATCH_DIR=$ORACLE_DIR
SEED_DIR=$SEED_DIR
SEED_RESULTS=$SEED_RESULTS
EOT
mv "$env_file.tmp" "$env_file"
printf 'LAB_ENV=%s\n' "$env_file"
