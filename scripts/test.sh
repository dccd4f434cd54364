#!/usr/bin/env bash
# The whole test suite, set-up included: the README's test command and what .ci/run runs.
#
# 1. The real-kernel lab (lab/): installs QEMU and friends with apt-get; for each kernel of
#    the matrix (KLPSYM_LAB_SUITES, default "bookworm bullseye trixie sid": Debian 6.1, 5.10,
#    6.12 and the newest, 7.x) fetches
#    the newest kernel packages of that suite, boots the kernel under QEMU and captures
#    /proc/kallsyms without and with real modules, fetches the -dbg vmlinux, builds the
#    livepatch cases with the kernel's own compiler (a debootstrap chroot of its suite when
#    the host has not that compiler) and records what the kernel did with them. Then the
#    arm64 kernels of KLPSYM_LAB_ARM64_SUITES (default "trixie sid"; QEMU's aarch64 virt
#    machine; no -dbg package, no livepatch oracle: Debian's arm64 kernels have no
#    CONFIG_LIVEPATCH). bookworm's amd64 kernel and the arm64 kernels also run the
#    relocation oracle (lab/reloc-oracle.sh). Everything is
#    cached in ${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}, keyed by package checksums and
#    sources, never required to be there.
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
	# klpsym converts the cases that need klp relocations (the oracle's KLPSYM_BIN).
	cargo build --release -p klpsym-cli
	export KLPSYM_BIN="$PWD/target/release/klpsym"
	# The matrix: one kernel per Debian suite, each fetched, captured and judged by the
	# livepatch oracle (lab/lab-kernel.sh). The first is the primary kernel of the tests that
	# take one kernel.
	lab_envs=()
	for suite in ${KLPSYM_LAB_SUITES:-bookworm bullseye trixie sid}; do
		echo "== lab kernel: $suite" >&2
		env_file="$(KLPSYM_LAB_SUITE="$suite" bash lab/lab-kernel.sh | sed -n 's/^LAB_ENV=//p')"
		[ -f "$env_file" ] || { echo "scripts/test.sh: lab kernel $suite failed" >&2; exit 1; }
		lab_envs+=("$env_file")
	done
	# arm64 kernels come after the amd64 ones (the first entry stays bookworm's amd64 kernel).
	for suite in ${KLPSYM_LAB_ARM64_SUITES-trixie sid}; do
		echo "== lab kernel: $suite arm64" >&2
		env_file="$(KLPSYM_LAB_ARCH=arm64 KLPSYM_LAB_SUITE="$suite" bash lab/lab-kernel.sh | sed -n 's/^LAB_ENV=//p')"
		[ -f "$env_file" ] || { echo "scripts/test.sh: lab kernel $suite arm64 failed" >&2; exit 1; }
		lab_envs+=("$env_file")
	done
	KLPSYM_TEST_LAB_KERNELS="$(IFS=:; printf '%s' "${lab_envs[*]}")"
	export KLPSYM_TEST_LAB_KERNELS
	lab_get() { sed -n "s/^$1=//p" "${lab_envs[0]}"; }
	export KLPSYM_TEST_VMLINUZ="$(lab_get VMLINUZ)"
	export KLPSYM_TEST_VMLINUX_STRIPPED="$(lab_get VMLINUX)"
	export KLPSYM_TEST_KALLSYMS="$(lab_get KALLSYMS_NOMOD)"
	export KLPSYM_TEST_KALLSYMS_NOMOD="$(lab_get KALLSYMS_NOMOD)"
	export KLPSYM_TEST_KALLSYMS_MODS="$(lab_get KALLSYMS_MODS)"
	export KLPSYM_TEST_MODULES_LOADED="$(lab_get MODULES_LOADED)"
	export KLPSYM_TEST_MODULES_DIR="$(lab_get MODULES_DIR)"
	export KLPSYM_TEST_VMLINUX="$(lab_get VMLINUX_DBG)"
	export KLPSYM_TEST_LAB_DIR="$(lab_get LAB_DIR)"
	export KLPSYM_TEST_IMAGE_DEB="$(lab_get IMAGE_DEB)"
	export KLPSYM_TEST_DBG_DEB="$(lab_get DBG_DEB)"
	export KLPSYM_TEST_LIVEPATCH_DIR="$(lab_get LIVEPATCH_DIR)"
	# Tests that need these fail instead of skipping from here on.
	export KLPSYM_REQUIRE_LAB=1
fi

echo "== cargo test" >&2
if [ -n "${KLPSYM_TEST_LAB_KERNELS:-}" ]; then
	# The oracle test writes what it judged here; README's lab tables are made from it.
	mkdir -p target
	export KLPSYM_TEST_SUMMARY="$PWD/target/lab-summary.txt"
	rm -f "$KLPSYM_TEST_SUMMARY"
fi
cargo test --workspace --release
if [ -n "${KLPSYM_TEST_LAB_KERNELS:-}" ]; then
	bash scripts/lab-tables.sh "$KLPSYM_TEST_LAB_KERNELS" "$KLPSYM_TEST_SUMMARY" >target/lab-tables.md
	python3 scripts/seed-plot.py "$KLPSYM_TEST_LAB_KERNELS" target/seed.svg
	echo "== README's lab tables and seed plot: target/lab-tables.md, target/seed.svg" >&2
fi
