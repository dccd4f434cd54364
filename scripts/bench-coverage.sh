#!/usr/bin/env bash
# What coverage costs a check: a warm `klpsym check` of each PATCH on a kernel's image and -dbg
# packages (the cache filled by a first run: the table, the -dbg vmlinux's DWARF beside it),
# with every copy of the replaced functions found in the DWARF, against the same check with
# --no-coverage, interleaved, in one run; medians and their ratio. Then `klpsym copies NAME`
# cold (its index of the whole DWARF made: one walk of every unit) and warm (the index read
# from the cache).
#
#   scripts/bench-coverage.sh IMAGE.deb DBG.deb PATCH.ko... [-- NAME] [REPS=N in the environment]
#
# REPS (default 9) interleaved warm runs of each; NAME (default init_once) for `copies`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:?usage: bench-coverage.sh IMAGE.deb DBG.deb PATCH.ko... [-- NAME]}"
DBG="${2:?usage: bench-coverage.sh IMAGE.deb DBG.deb PATCH.ko... [-- NAME]}"
shift 2
PATCHES=()
NAME=init_once
while [ $# -gt 0 ]; do
	if [ "$1" = -- ]; then
		NAME="${2:-init_once}"
		break
	fi
	PATCHES+=("$1")
	shift
done
[ ${#PATCHES[@]} -gt 0 ] || { echo "bench-coverage: no PATCH.ko given" >&2; exit 2; }
REPS="${REPS:-9}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
BIN="$ROOT/target/release/klpsym"
export XDG_CACHE_HOME="$WORK/cache"
mkdir -p "$WORK/cache/klpsym"
chmod 700 "$WORK/cache/klpsym"

# seconds LABEL CMD...: appends the wall time of CMD to $WORK/LABEL (exit 0 or 1: a check's
# verdicts; 2 is an error).
seconds() {
	local label="$1" t0 rc
	shift
	t0="$(date +%s.%N)"
	set +e
	"$@" >/dev/null 2>"$WORK/err"
	rc=$?
	set -e
	[ "$rc" -le 1 ] || { cat "$WORK/err" >&2; exit 1; }
	echo "$(date +%s.%N) - $t0" | bc >>"$WORK/$label"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# A first run fills the cache (the packages read once, the DWARF kept beside the table).
"$BIN" check "${PATCHES[0]}" -k "$IMAGE" -k "$DBG" >/dev/null 2>&1 || true
for p in "${PATCHES[@]}"; do
	b="$(basename "$p" .ko)"
	for ((i = 0; i < REPS; i++)); do
		seconds "$b.with" "$BIN" check "$p" -k "$IMAGE" -k "$DBG"
		seconds "$b.without" "$BIN" check "$p" -k "$IMAGE" -k "$DBG" --no-coverage
	done
done
seconds copies.cold "$BIN" copies "$NAME" -k "$IMAGE" -k "$DBG"
for ((i = 0; i < REPS; i++)); do
	seconds copies.warm "$BIN" copies "$NAME" -k "$IMAGE" -k "$DBG"
done

echo "$(basename "$DBG"): warm check with coverage against --no-coverage, median of $REPS interleaved runs"
printf '%-40s %12s %12s %8s\n' PATCH "coverage s" "without s" ratio
for p in "${PATCHES[@]}"; do
	b="$(basename "$p" .ko)"
	w="$(median <"$WORK/$b.with")"
	n="$(median <"$WORK/$b.without")"
	printf '%-40s %12.3f %12.3f %8.2f\n' "$b" "$w" "$n" "$(echo "$w / $n" | bc -l)"
done
printf 'copies %s: cold (index made) %.2f s, warm median %.3f s\n' "$NAME" \
	"$(cat "$WORK/copies.cold")" "$(median <"$WORK/copies.warm")"
ls -l "$WORK/cache/klpsym" | awk '/klpc-copies/ {printf "copies index kept: %.1f MB\n", $5 / 1048576}'
