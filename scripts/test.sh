#!/usr/bin/env bash
# The whole test suite, set-up included: the README's test command and what .ci/run runs.
#
# 1. The real-kernel lab (lab/): installs QEMU and friends with apt-get, fetches the newest
#    Debian bookworm kernel packages, boots the kernel under QEMU and captures /proc/kallsyms
#    without and with real modules; fetches the -dbg vmlinux. Downloads are cached in
#    ${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}, never required to be there.
# 2. cargo test over the workspace, with the lab's files handed to the real-kernel tests.
#
# KLPSYM_SKIP_LAB=1 runs only the tests that need no real kernel (they say what they skip);
# under CI=true the lab is never skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests get a cache folder of their own (decoded tables; see `klpsym cache`): they meet
# both a cold and a warm cache, and never read or fill the user's.
XDG_CACHE_HOME="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-test-cache.XXXXXX")"
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT

if [ "${KLPSYM_SKIP_LAB:-0}" = 1 ] && [ "${CI:-}" != true ]; then
	echo "scripts/test.sh: KLPSYM_SKIP_LAB=1: real-kernel tests will skip" >&2
else
	if [ "$(id -u)" != 0 ]; then
		echo "scripts/test.sh: the real-kernel lab needs root (apt-get, /var/cache); run as root or set KLPSYM_SKIP_LAB=1" >&2
		exit 2
	fi
	echo "== real-kernel lab" >&2
	eval "$(bash lab/capture-kallsyms.sh)"
	eval "$(bash lab/fetch-kernel.sh)"
	eval "$(bash lab/fetch-dbg-vmlinux.sh)"
	export KLPSYM_TEST_VMLINUZ="$VMLINUZ"
	export KLPSYM_TEST_VMLINUX_STRIPPED="$VMLINUX"
	export KLPSYM_TEST_KALLSYMS="$KALLSYMS_NOMOD"
	export KLPSYM_TEST_KALLSYMS_NOMOD="$KALLSYMS_NOMOD"
	export KLPSYM_TEST_KALLSYMS_MODS="$KALLSYMS_MODS"
	export KLPSYM_TEST_MODULES_LOADED="$CAPTURE_DIR/modules-loaded.txt"
	export KLPSYM_TEST_MODULES_DIR="$MODULES_DIR"
	export KLPSYM_TEST_VMLINUX="$VMLINUX_DBG"
	export KLPSYM_TEST_LAB_DIR="$KLPSYM_LAB_DIR"
	export KLPSYM_TEST_IMAGE_DEB="$IMAGE_DEB"
	export KLPSYM_TEST_DBG_DEB="$DBG_DEB"
	# The livepatch oracle: C livepatch modules built with the kernel's headers, converted by
	# this tree's klpsym where a case needs klp relocations, loaded in the real kernel.
	echo "== livepatch oracle (real kernel)" >&2
	cargo build --release -p klpsym
	eval "$(KLPSYM_BIN="$PWD/target/release/klpsym" bash lab/livepatch-oracle.sh)"
	export KLPSYM_TEST_LIVEPATCH_DIR="$ORACLE_DIR"
	# Tests that need these fail instead of skipping from here on.
	export KLPSYM_REQUIRE_LAB=1
fi

echo "== cargo test" >&2
cargo test --workspace --release
