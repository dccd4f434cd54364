#!/usr/bin/env bash
# The whole test suite, set-up included: the README's test command and what .ci/run runs.
#
# 1. The real-kernel lab (lab/): installs QEMU and friends with apt-get; for each kernel of
#    the matrix (KLPSYM_LAB_SUITES, default "bookworm bullseye bookworm-backports trixie sid":
#    Debian 6.1, 5.10, two builds of 6.12 (+deb12 with gcc-12, +deb13 with gcc-14; the cases
#    built for the first are loaded on the second, so it comes first) and the newest, 7.x) fetches
#    the newest kernel packages of that suite, boots the kernel under QEMU and captures
#    /proc/kallsyms without and with real modules, fetches the -dbg vmlinux, builds the
#    livepatch cases with the kernel's own compiler (a debootstrap chroot of its suite when
#    the host has not that compiler) and records what the kernel did with them. Then the
#    arm64 kernels of KLPSYM_LAB_ARM64_SUITES (default "trixie sid"; QEMU's aarch64 virt
#    machine; no -dbg package, no livepatch oracle: Debian's arm64 kernels have no
#    CONFIG_LIVEPATCH). bookworm's amd64 kernel and the arm64 kernels also run the
#    relocation oracle (lab/reloc-oracle.sh). The other flavour of a flavour pair
#    (KLPSYM_LAB_FLAVOURS, default trixie/cloud-amd64) gets its -dbg vmlinux and the
#    livepatch cases that name it (a patch built for trixie's -amd64, loaded unforced). Everything is
#    cached in ${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}, keyed by package checksums and
#    sources, never required to be there; a boot is keyed by the bytes it boots.
# 2. cargo test over the workspace (profile `ci`: optimized, with overflow checks and debug
#    assertions), with the lab's files handed to the real-kernel tests; then the README's
#    library example against the lab's package, and the reschedule bound (klpsym-bench
#    resched) on the lab's capture.
# 3. The closing summary: N passed, N failed, N skipped, and what was not judged and why.
#
# `scripts/test.sh --fast`: what needs no real kernel, in a debug build (a minute or two after
# a one-line change); it says how much it skipped. `scripts/test.sh --emptied-oracle`: the
# lab with every oracle's record emptied, where each test that reads one must fail. KLPSYM_SKIP_LAB=1 runs the same tests in
# the `ci` profile. Under CI=true the lab is never skipped, and a skip is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0 emptied=0
if [ "${1:-}" = --fast ]; then
	fast=1
	shift
elif [ "${1:-}" = --emptied-oracle ]; then
	emptied=1
	shift
fi

# The tests get a cache folder of their own (decoded tables; see `klpsym cache`), never the
# user's: a fresh one here, deleted at exit; with the lab, the lab cache's `test-cache`
# (below). The tests that judge a cold and a warm run name cache folders of their own.
scratch_cache="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-test-cache.XXXXXX")"
XDG_CACHE_HOME="$scratch_cache"
export XDG_CACHE_HOME
mkdir -p target
# Every check a test could not judge is one line here (klpsym_testkit::lab::skip).
KLPSYM_TEST_SKIP_LOG="$PWD/target/test-skips.txt"
export KLPSYM_TEST_SKIP_LOG
: >"$KLPSYM_TEST_SKIP_LOG"
test_log="$(mktemp "${TMPDIR:-/tmp}/klpsym-test-log.XXXXXX")"
trap 'rm -rf "$scratch_cache" "$test_log"' EXIT

# summary STATUS: totals the `test result:` lines of the cargo test output and the skip
# log, prints them with every skip, and exits with STATUS (1 when a test failed).
summary() {
	local status="$1" passed failed skipped
	passed="$(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed.*/\1/p' "$test_log" | awk '{ n += $1 } END { print n + 0 }')"
	failed="$(sed -n 's/^test result: .* \([0-9]*\) failed.*/\1/p' "$test_log" | awk '{ n += $1 } END { print n + 0 }')"
	skipped="$(wc -l <"$KLPSYM_TEST_SKIP_LOG")"
	echo "== $passed passed, $failed failed, $skipped skipped" >&2
	if [ -n "${resched_note:-}" ]; then
		echo "== $resched_note" >&2
	fi
	if [ "$skipped" -gt 0 ]; then
		echo "== not judged (test, what, why):" >&2
		sort "$KLPSYM_TEST_SKIP_LOG" | sed 's/^/   /' >&2
	fi
	exit "$status"
}

if [ "$fast" = 1 ]; then
	echo "== fast tier: the tests that need no real kernel, debug build (scripts/test.sh --fast)" >&2
	set +e
	cargo test --workspace --exclude klpsym-python 2>&1 | tee "$test_log"
	rc="${PIPESTATUS[0]}"
	set -e
	summary "$rc"
fi

if [ "${KLPSYM_SKIP_LAB:-0}" = 1 ] && [ "${CI:-}" != true ]; then
	echo "scripts/test.sh: KLPSYM_SKIP_LAB=1: real-kernel tests will skip" >&2
else
	if [ "$(id -u)" != 0 ]; then
		echo "scripts/test.sh: the real-kernel lab needs root (apt-get, /var/cache); run as root or set KLPSYM_SKIP_LAB=1" >&2
		exit 2
	fi
	echo "== real-kernel lab" >&2
	# klpsym converts the cases that need klp relocations (the oracle's KLPSYM_BIN); the
	# tests below use the same build.
	cargo build --profile ci -p klpsym-cli
	export KLPSYM_BIN="$PWD/target/ci/klpsym"
	# The matrix: one kernel per Debian suite, each fetched, captured and judged by the
	# livepatch oracle (lab/lab-kernel.sh). The first is the primary kernel of the tests that
	# take one kernel.
	lab_envs=()
	for suite in ${KLPSYM_LAB_SUITES:-bookworm bullseye bookworm-backports trixie sid}; do
		echo "== lab kernel: $suite" >&2
		env_file="$(KLPSYM_LAB_SUITE="$suite" bash lab/lab-kernel.sh | sed -n 's/^LAB_ENV=//p')"
		[ -f "$env_file" ] || { echo "scripts/test.sh: lab kernel $suite failed" >&2; exit 1; }
		lab_envs+=("$env_file")
	done
	# The flavour pairs' other halves (KLPSYM_LAB_FLAVOURS, default trixie's cloud-amd64,
	# after trixie: its case is built for trixie's -amd64 kernel): the -dbg vmlinux and the
	# livepatch cases that name the kernel, handed to the tests of flavour pairs alone
	# (KLPSYM_TEST_LAB_FLAVOURS). An entry is SUITE/FLAVOUR.
	flavour_envs=()
	for pair in ${KLPSYM_LAB_FLAVOURS-trixie/cloud-amd64}; do
		echo "== lab kernel: $pair" >&2
		env_file="$(KLPSYM_LAB_SUITE="${pair%%/*}" KLPSYM_LAB_FLAVOUR="${pair#*/}" bash lab/lab-kernel.sh | sed -n 's/^LAB_ENV=//p')"
		[ -f "$env_file" ] || { echo "scripts/test.sh: lab kernel $pair failed" >&2; exit 1; }
		flavour_envs+=("$env_file")
	done
	KLPSYM_TEST_LAB_FLAVOURS="$(IFS=:; printf '%s' "${flavour_envs[*]}")"
	export KLPSYM_TEST_LAB_FLAVOURS
	# arm64 kernels come after the amd64 ones (the first entry stays bookworm's amd64 kernel).
	for suite in ${KLPSYM_LAB_ARM64_SUITES-trixie sid}; do
		echo "== lab kernel: $suite arm64" >&2
		env_file="$(KLPSYM_LAB_ARCH=arm64 KLPSYM_LAB_SUITE="$suite" bash lab/lab-kernel.sh | sed -n 's/^LAB_ENV=//p')"
		[ -f "$env_file" ] || { echo "scripts/test.sh: lab kernel $suite arm64 failed" >&2; exit 1; }
		lab_envs+=("$env_file")
	done
	# The kernel's own klp-build, on a 7.x kernel built from sid's linux-source in the sid
	# chroot the matrix made (lab/klp-build/build.sh); KLPSYM_LAB_KLP_BUILD=0 leaves it out.
	if [ "${KLPSYM_LAB_KLP_BUILD:-1}" != 0 ]; then
		echo "== lab: klp-build" >&2
		klp_dir="$(bash lab/klp-build/build.sh | sed -n 's/^KLP_BUILD_DIR=//p')"
		[ -d "$klp_dir" ] || { echo "scripts/test.sh: lab/klp-build/build.sh failed" >&2; exit 1; }
		export KLPSYM_TEST_KLP_BUILD_DIR="$klp_dir"
	fi
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
	# Every skip fails from here on.
	export KLPSYM_REQUIRE_LAB=1
	# The lab's tests decode the same packages every run (each -dbg package's DWARF and
	# module debug files: ~15 minutes cold on 2 cores). klpsym's own cache keeps them between
	# runs: its entries are keyed by each input's content (hash or build id) and the cache
	# format, proven by a stamp, so a changed input or a new format is decoded anew, never
	# answered from a stale entry. Kept in the lab cache, bounded like any klpsym cache
	# (4 GiB, least recently used first).
	XDG_CACHE_HOME="$(realpath -m "${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}")/test-cache"
	mkdir -p "$XDG_CACHE_HOME"
	# The independent tools' answers on the lab's files likewise (llvm-dwarfdump on a -dbg
	# vmlinux: seconds a call), keyed by the input's build id, the tool's version and the
	# question (klpsym_testkit::tools).
	export KLPSYM_TEST_TOOL_CACHE="$XDG_CACHE_HOME/tools"
	echo "== the tests' klpsym cache: $XDG_CACHE_HOME ($(du -sh "$XDG_CACHE_HOME" | cut -f1))" >&2
fi

if [ "$emptied" = 1 ]; then
	# The suite judges or fails (scripts/test.sh --emptied-oracle; not part of CI): the same
	# lab, but every oracle's record (the livepatch and relocation oracles' folders, the
	# klp-build record) replaced by an empty folder. Each test that reads one (noted through
	# KLPSYM_TEST_ORACLE_READS by klpsym-testkit) must fail; one that passes is named.
	[ -n "${KLPSYM_TEST_LAB_KERNELS:-}" ] || { echo "scripts/test.sh: --emptied-oracle needs the lab" >&2; exit 2; }
	empty="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-empty-oracle.XXXXXX")"
	reads="$empty/reads.txt"
	: >"$reads"
	rewrite() { # lab.env files (:-separated) -> copies whose oracle keys name empty folders
		local out=() f n=0 c
		IFS=: read -r -a files <<<"$1"
		for f in "${files[@]}"; do
			n=$((n + 1))
			c="$empty/lab$n-$2.env"
			mkdir -p "$empty/lp$n-$2" "$empty/reloc$n-$2"
			sed -e "s|^LIVEPATCH_DIR=.\+|LIVEPATCH_DIR=$empty/lp$n-$2|" \
				-e "s|^RELOC_DIR=.\+|RELOC_DIR=$empty/reloc$n-$2|" "$f" >"$c"
			out+=("$c")
		done
		(IFS=:; printf '%s' "${out[*]}")
	}
	KLPSYM_TEST_LAB_KERNELS="$(rewrite "$KLPSYM_TEST_LAB_KERNELS" main)"
	KLPSYM_TEST_LAB_FLAVOURS="$(rewrite "$KLPSYM_TEST_LAB_FLAVOURS" flavour)"
	mkdir -p "$empty/lp" "$empty/klp-build"
	export KLPSYM_TEST_LAB_KERNELS KLPSYM_TEST_LAB_FLAVOURS KLPSYM_TEST_LIVEPATCH_DIR="$empty/lp"
	[ -z "${KLPSYM_TEST_KLP_BUILD_DIR:-}" ] || export KLPSYM_TEST_KLP_BUILD_DIR="$empty/klp-build"
	export KLPSYM_TEST_ORACLE_READS="$reads"
	unset KLPSYM_TEST_SUMMARY
	echo "== cargo test with every oracle emptied" >&2
	set +e
	cargo test --workspace --exclude klpsym-python --profile ci --no-fail-fast 2>&1 | tee "$test_log"
	set -e
	# (An `if`, not `&&`: a last reader that failed must not end the loop, and the script
	# under `set -e`, with status 1.)
	passed_readers="$(sort -u "$reads" | while IFS= read -r t; do
		if grep -q "^test $t \.\.\. ok\$" "$test_log"; then printf '%s\n' "$t"; fi
	done)"
	readers="$(sort -u "$reads" | grep -c . || true)"
	rm -rf "$empty"
	if [ -n "$passed_readers" ]; then
		echo "== $readers tests read an oracle; these passed with every oracle emptied:" >&2
		sed 's/^/   /' <<<"$passed_readers" >&2
		exit 1
	fi
	echo "== $readers tests read an oracle; with every oracle emptied, each failed" >&2
	exit 0
fi

echo "== cargo test (profile ci: overflow checks and debug assertions on)" >&2
if [ -n "${KLPSYM_TEST_LAB_KERNELS:-}" ]; then
	# The oracle test writes what it judged here; docs/verification.md's tables are made from it.
	export KLPSYM_TEST_SUMMARY="$PWD/target/lab-summary.txt"
	rm -f "$KLPSYM_TEST_SUMMARY"
fi
set +e
cargo test --workspace --exclude klpsym-python --profile ci --no-fail-fast 2>&1 | tee "$test_log"
rc="${PIPESTATUS[0]}"
set -e
[ "$rc" = 0 ] || summary "$rc"
if [ -n "${KLPSYM_TEST_LAB_KERNELS:-}" ]; then
	echo "== the README's library example against the lab's package" >&2
	bash scripts/check-quickstart.sh "$KLPSYM_TEST_IMAGE_DEB" "$KLPSYM_TEST_LIVEPATCH_DIR" || summary 1
	echo "== the library's five example programs against the lab's packages" >&2
	bash scripts/check-examples.sh "$KLPSYM_TEST_IMAGE_DEB" "$KLPSYM_TEST_DBG_DEB" "$KLPSYM_TEST_VMLINUX" \
		"$KLPSYM_TEST_LIVEPATCH_DIR" || summary 1
	echo "== the fleet workflow (.github/workflows/fleet.yml), its steps run as shell" >&2
	fleet_dir="$(mktemp -d)"
	ln -s "$KLPSYM_TEST_IMAGE_DEB" "$KLPSYM_TEST_DBG_DEB" "$fleet_dir/"
	bash scripts/check-workflow.sh "$KLPSYM_TEST_LIVEPATCH_DIR/unique/klp_unique.ko" "$fleet_dir" || summary 1
	rm -rf "$fleet_dir"
	echo "== the Python package: pip install in a fresh virtualenv, its pytest suite" >&2
	KLPSYM_PY_PROFILE=ci bash scripts/check-python.sh || summary 1
	echo "== klpsym as a Debian package: built, installed with dpkg -i, used" >&2
	KLPSYM_DEB_PROFILE=ci bash scripts/check-deb.sh "$KLPSYM_TEST_IMAGE_DEB" || summary 1
	echo "== klpsym by cargo install --locked --path crates/klpsym-cli, used" >&2
	KLPSYM_INSTALL_PROFILE=ci bash scripts/check-cargo-install.sh "$KLPSYM_TEST_IMAGE_DEB" || summary 1
	echo "== the reschedule bound (klpsym-bench resched) on the lab's capture" >&2
	# Gated: the operations that hold the bound in every judged run on this project's machines.
	# Not yet gated (over the bound in every run, docs/performance.md): the live /proc/kallsyms
	# reader thread's first read and the index helper thread's start (130-360 µs), the debug
	# vmlinux and the package folder. The whole gate runs after, reported, not failing CI.
	# The gate exits 0 (within), 2 (over: the code's) or 3 (not judged at the bound: the
	# machine too noisy, or unfit, its fresh pages alone past the bound; then only gross
	# overruns, 2 ms, are judged). This VM has evenings of the second kind (2026-12-07: a
	# first-touch stretch's median 132-153 µs for hours, a single stat 150-1,050 µs), when no
	# code holds 100 µs; a verdict then would be the machine's. So: a pass ends the gate; an
	# over is run again and fails CI when the same operation was over in three runs (a
	# regression is over in every run at its operation; the machine's noise on a busy but fit
	# evening put different operations over in two runs of three, 2026-12-07); a not-judged
	# waits a minute and runs again, up to 6 runs in all, after which CI goes on, saying loudly
	# that the bound was not judged.
	gate() {
		cargo run --release -q -p klpsym-bench -- resched --kernel "$KLPSYM_TEST_KALLSYMS_NOMOD" --runs 5 \
			--no-live --only "load kallsyms" --only dump --only symbolize --only resolve --only check \
			--only convert --json target/resched-gate.json
	}
	gate_over_ops="$(mktemp)"
	gate_runs=0
	resched_note="the reschedule bound: NOT JUDGED (the machine too noisy or unfit in every gate run; see above)"
	while [ "$gate_runs" -lt 6 ]; do
		gate_runs=$((gate_runs + 1))
		set +e
		gate
		gate_rc=$?
		set -e
		case "$gate_rc" in
		0)
			resched_note="the reschedule bound: judged within, gate run $gate_runs"
			break
			;;
		2)
			python3 -c 'import json, sys; [print(r["op"]) for r in json.load(open(sys.argv[1])) if r["verdict"] == "OVER"]' \
				target/resched-gate.json >>"$gate_over_ops"
			if sort "$gate_over_ops" | uniq -c | awk '$1 >= 3 { found = 1 } END { exit !found }'; then
				echo "klpsym CI: the reschedule gate found the same operation over the bound in three runs:" >&2
				sort "$gate_over_ops" | uniq -c | awk '$1 >= 3' >&2
				summary 1
			fi
			echo "klpsym CI: WARNING: the reschedule gate found an operation over the bound; running it again" >&2
			resched_note="the reschedule bound: NOT CONFIRMED (operations over in some gate runs, none in three; see above)"
			;;
		3)
			echo "klpsym CI: WARNING: the reschedule gate could not judge the bound on this machine now (run $gate_runs of 6)" >&2
			if [ "$gate_runs" -lt 6 ]; then
				sleep 60
			fi
			;;
		*)
			echo "klpsym CI: the reschedule gate failed to run (exit $gate_rc)" >&2
			summary 1
			;;
		esac
	done
	if [ "$gate_runs" -ge 6 ] && [ "$gate_rc" != 0 ]; then
		printf '%s\n' "klpsym CI: WARNING: ============================================================" \
			"klpsym CI: WARNING: THE RESCHEDULE BOUND WAS NOT CONFIRMED in six gate runs: the machine" \
			"klpsym CI: WARNING: too noisy or unfit, or operations over in some, none in three (above)" \
			"klpsym CI: WARNING: ============================================================" >&2
	fi
	echo "== the whole reschedule gate, reported (the operations above and those not yet within it: every loader on the lab's 6.1 files)" >&2
	cargo run --release -q -p klpsym-bench -- resched --kernel "$KLPSYM_TEST_KALLSYMS_NOMOD" --runs 3 \
		--image "$KLPSYM_TEST_VMLINUZ" --vmlinux "$KLPSYM_TEST_VMLINUX_STRIPPED" \
		--debug-vmlinux "$KLPSYM_TEST_VMLINUX" --image-deb "$KLPSYM_TEST_IMAGE_DEB" \
		--dbg-deb "$KLPSYM_TEST_DBG_DEB" --modules "$KLPSYM_TEST_MODULES_DIR" ||
		echo "klpsym CI: WARNING: the whole reschedule gate found operations over the bound (above)" >&2
	bash scripts/lab-tables.sh "$KLPSYM_TEST_LAB_KERNELS" "$KLPSYM_TEST_SUMMARY" >target/lab-tables.md
	python3 scripts/seed-plot.py "$KLPSYM_TEST_LAB_KERNELS" target/seed.svg
	echo "== docs/verification.md's lab tables and seed plot: target/lab-tables.md, target/seed.svg" >&2
fi
summary 0
