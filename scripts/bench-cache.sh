#!/usr/bin/env bash
# The index cache, side by side in one run: each command cold (`--no-cache`: decompress and
# decode) and warm (a primed cache: entry checked and read), on the lab kernel's files, as
# docs/performance.md reports them.
#
#   scripts/bench-cache.sh            # REPS=7 by default; REPS=N to change
#
# Commands (release build, output to /dev/null, wall clock, median of REPS interleaved runs):
#   lookup init_once --sympos 1 --kernel VMLINUZ            (XZ bzImage)
#   lookup init_once --sympos 1 --kernel VMLINUX            (stripped vmlinux: tables found
#                                                            without decompression)
#   lookup init_once --sympos 1 --kernel IMAGE.deb          (the Debian image package)
#   sympos init_once --file fs/inode.c -k IMAGE.deb -k DBG.deb
#                                                           (the -dbg package's source files
#                                                            and declaration lines)
#   check module-after.ko --kernel IMAGE.deb                (the patch's module, dummy, read
#                                                            from the image package)
#   check CASE.ko --kernel VMLINUZ --modules DIR            (the lab's livepatch case
#                                                            module-missing-after, on every
#                                                            lab kernel that has it, then
#                                                            all of them summed)
# Every warm answer is compared with the cold one (the same bytes on standard output).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${REPS:-7}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { printf '[bench-cache] %s\n' "$*" >&2; }

VMLINUZ="" VMLINUX="" MODULES_DIR="" IMAGE_DEB="" DBG_DEB="" LIVEPATCH_DIR=""
while IFS='=' read -r key value; do
	case "$key" in
	VMLINUZ) VMLINUZ="$value" ;;
	VMLINUX) VMLINUX="$value" ;;
	MODULES_DIR) MODULES_DIR="$value" ;;
	IMAGE_DEB) IMAGE_DEB="$value" ;;
	esac
done < <(bash "$ROOT/lab/fetch-kernel.sh")
# The -dbg package and the livepatch cases of the primary kernel, when the lab has them.
LAB_ENV="$(grep -lx "VMLINUZ=$VMLINUZ" "${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"/*/lab.env 2>/dev/null | head -n1 || true)"
if [ -n "$LAB_ENV" ]; then
	DBG_DEB="$(sed -n 's/^DBG_DEB=//p' "$LAB_ENV")"
	LIVEPATCH_DIR="$(sed -n 's/^LIVEPATCH_DIR=//p' "$LAB_ENV")"
fi
# KLPSYM_BENCH_CASE=CASE.ko: that case on the primary kernel only.
CASE="${KLPSYM_BENCH_CASE:-}"

(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
BIN="$ROOT/target/release/klpsym"
CACHE="$WORK/cache"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Times are microseconds from bash's own clock ($EPOCHREALTIME): a `date` process per reading
# would add its start-up to every warm time.
run_pair() { # NAME ARGS...: REPS interleaved cold/warm runs; prints a table row
	local name="$1" i t0 t1
	shift
	"$BIN" "$@" --cache-dir "$CACHE" >"$WORK/warm.out" 2>/dev/null || true # prime
	: >"$WORK/cold.t"
	: >"$WORK/warm.t"
	for ((i = 0; i < REPS; i++)); do
		t0=${EPOCHREALTIME/./}
		"$BIN" "$@" --no-cache >"$WORK/cold.out" 2>/dev/null || true
		t1=${EPOCHREALTIME/./}
		echo $((t1 - t0)) >>"$WORK/cold.t"
		t0=${EPOCHREALTIME/./}
		"$BIN" "$@" --cache-dir "$CACHE" >"$WORK/warm.out" 2>/dev/null || true
		t1=${EPOCHREALTIME/./}
		echo $((t1 - t0)) >>"$WORK/warm.t"
		cmp -s "$WORK/cold.out" "$WORK/warm.out" || {
			log "$name: warm output differs from cold"
			exit 1
		}
	done
	local c w
	c=$(median <"$WORK/cold.t")
	w=$(median <"$WORK/warm.t")
	awk -v n="$name" -v c="$c" -v w="$w" \
		'BEGIN { printf "| %s | %.1f ms | %.1f ms | %.1fx |\n", n, c / 1000, w / 1000, c / w }'
}

log "REPS=$REPS; cache in $CACHE"
echo "| command | cold (--no-cache) | warm | speed-up |"
echo "| --- | ---: | ---: | ---: |"
run_pair "lookup, vmlinuz (XZ)" lookup init_once --sympos 1 --kernel "$VMLINUZ"
run_pair "lookup, stripped vmlinux" lookup init_once --sympos 1 --kernel "$VMLINUX"
[ -n "$IMAGE_DEB" ] && run_pair "lookup, image .deb" lookup init_once --sympos 1 --kernel "$IMAGE_DEB"
if [ -n "$IMAGE_DEB" ] && [ -f "$DBG_DEB" ]; then
	run_pair "sympos --file, image .deb + -dbg .deb" sympos init_once --file fs/inode.c -k "$IMAGE_DEB" -k "$DBG_DEB"
fi
if [ -n "$IMAGE_DEB" ] && [ -f "$LIVEPATCH_DIR/module-after/klp_module_after.ko" ]; then
	run_pair "check, its module from the image .deb" check "$LIVEPATCH_DIR/module-after/klp_module_after.ko" --kernel "$IMAGE_DEB"
fi
# The livepatch case on every lab kernel that built it (each with its own image, module tree
# and case module), then the sums: a release engineer's matrix run, kernel by kernel.
: >"$WORK/sums"
lab_check() { # ENV_FILE
	local v m c r
	v=$(sed -n 's/^VMLINUZ=//p' "$1")
	m=$(sed -n 's/^MODULES_DIR=//p' "$1")
	r=$(sed -n 's/^RELEASE=//p' "$1")
	c=$(ls "$(sed -n 's/^LIVEPATCH_DIR=//p' "$1")"/module-missing-after/*.ko 2>/dev/null | head -n1 || true)
	[ -n "$c" ] && [ -f "$v" ] && [ -d "$m" ] || return 0
	run_pair "check $(basename "$c"), $r" check "$c" --kernel "$v" --modules "$m"
	echo "$(median <"$WORK/cold.t") $(median <"$WORK/warm.t")" >>"$WORK/sums"
}
if [ -n "${KLPSYM_BENCH_CASE:-}" ]; then
	run_pair "check $(basename "$CASE"), vmlinuz + modules" check "$CASE" --kernel "$VMLINUZ" --modules "$MODULES_DIR"
else
	for env_file in "${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"/*/lab.env; do
		lab_check "$env_file"
	done
	awk '{c += $1; w += $2; n++} END { if (n > 1) printf "| check, the %d kernels summed | %.1f ms | %.1f ms | %.1fx |\n", n, c / 1000, w / 1000, c / w }' "$WORK/sums"
fi
du -sh "$CACHE" | awk '{print "cache: " $1}' >&2
