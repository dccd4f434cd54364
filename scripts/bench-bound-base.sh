#!/usr/bin/env bash
# The reschedule bound of loading a big vmlinux file against a base build, side by side in
# one run: `klpsym-bench resched --vmlinux-elf VMLINUX` of this tree and of BASE (default
# 41f489f, whose loader copied the file to a private temporary file in 64 MiB steps before
# mapping it; this tree maps it in place), each RUNS times (default 3); each
# prints its table (the calibration rows and the vmlinux row), the longest stretch between
# two reschedule points in thread CPU time, best and worst run. The builds run one after the
# other.
#
#   scripts/bench-bound-base.sh VMLINUX [RUNS] [BASE]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VMLINUX="${1:?usage: bench-bound-base.sh VMLINUX [RUNS] [BASE]}"
RUNS="${2:-3}"
BASE="${3:-41f489f}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "bench-bound-base: $*" >&2; }

log "building this tree's klpsym-bench (release)"
(cd "$ROOT" && cargo build --release -q -p klpsym-bench)
log "building $BASE's klpsym-bench (release, from git archive; target/bench-base)"
mkdir -p "$WORK/base"
git -C "$ROOT" archive "$BASE" | tar -x -C "$WORK/base"
(cd "$WORK/base" && CARGO_TARGET_DIR="$ROOT/target/bench-base" cargo build --release -q -p klpsym-bench)

# A small kallsyms text as --kernel: the operations on it are not what is measured here.
head -n 2000 /proc/kallsyms >"$WORK/kallsyms.txt"
for build in base new; do
	bin="$ROOT/target/release/klpsym-bench"
	name="$(git -C "$ROOT" rev-parse --short HEAD)"
	if [ "$build" = base ]; then
		bin="$ROOT/target/bench-base/release/klpsym-bench"
		name="$BASE"
	fi
	echo "== $build ($name)"
	"$bin" resched --kernel "$WORK/kallsyms.txt" --vmlinux-elf "$VMLINUX" --runs "$RUNS" 2>&1 |
		grep -E 'calibration|vmlinux|operation|worst run' || true
done
