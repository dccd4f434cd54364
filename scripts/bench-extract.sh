#!/usr/bin/env bash
# Issue 3, "Speed": klpsym's kernel-image extraction side by side with vmlinux-to-elf's
# kallsyms-finder, on the lab kernel's vmlinuz and its uncompressed vmlinux, in one run.
#
#   scripts/bench-extract.sh            # REPS=5 by default; REPS=N to change
#
# Times (wall clock, median of REPS runs, interleaved so load drifts hit every tool alike):
#   (a) kallsyms-finder FILE > /dev/null          (PyPI package vmlinux-to-elf, in a venv)
#   (b) klpsym dump --no-cache --kernel FILE > /dev/null  (release build; no index cache)
#   (d) klpsym dump --kernel FILE > /dev/null, as users run it: the index cache on (a private
#       --cache-dir, primed once before the repetitions; output checked equal to (b)'s)
#   (c) the XZ payload through liblzma alone, one call, no reschedule points
#       (klpsym-image's `measure` example; in-process, so it has no exec/read cost)
# and prints the ratios the issue sets targets for: kallsyms-finder / klpsym on each file
# (>= 100x on the vmlinux, cold (b) and warm (d)) and klpsym-on-vmlinuz / decompression
# alone (<= 1.2x). It also
# checks that both tools list the same symbols (count, then the lines themselves).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${REPS:-5}"
VENV="${KLPSYM_LAB_VENV:-/var/cache/klpsym-lab/venv}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

log() { printf '[bench-extract] %s\n' "$*" >&2; }

# Lab paths from fetch-kernel.sh's KEY=VALUE lines; the ABI is never written here.
VMLINUZ="" VMLINUX=""
while IFS='=' read -r key value; do
	case "$key" in
	VMLINUZ) VMLINUZ="$value" ;;
	VMLINUX) VMLINUX="$value" ;;
	esac
done < <(bash "$ROOT/lab/fetch-kernel.sh")
[ -f "$VMLINUZ" ] && [ -f "$VMLINUX" ] || {
	echo "lab/fetch-kernel.sh gave no VMLINUZ/VMLINUX files" >&2
	exit 1
}

if [ ! -x "$VENV/bin/kallsyms-finder" ]; then
	log "installing vmlinux-to-elf into $VENV"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install --quiet vmlinux-to-elf
fi
KF="$VENV/bin/kallsyms-finder"

log "building klpsym and the measure example (release)"
(cd "$ROOT" && flock /tmp/cargo.lock cargo build --quiet --release -p klpsym-cli)
(cd "$ROOT" && flock /tmp/cargo.lock cargo build --quiet --release -p klpsym-image --example measure)
KLPSYM="$ROOT/target/release/klpsym"
MEASURE="$ROOT/target/release/examples/measure"

# Seconds (float) one command takes, output to /dev/null.
time_cmd() {
	local t0 t1
	t0="$EPOCHREALTIME"
	"$@" >/dev/null 2>&1
	t1="$EPOCHREALTIME"
	calc "$t1 - $t0"
}

calc() { awk "BEGIN { print $* }"; }

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Warm the page cache and check the outputs agree.
for f in "$VMLINUZ" "$VMLINUX"; do
	name="$(basename "$f")"
	"$KF" "$f" >"$WORK/$name.kf" 2>/dev/null
	"$KLPSYM" dump --no-cache --kernel "$f" >"$WORK/$name.klpsym"
	n_kf="$(grep -c . "$WORK/$name.kf")"
	n_k="$(grep -c . "$WORK/$name.klpsym")"
	if [ "$n_kf" = "$n_k" ]; then
		same="$(cmp -s "$WORK/$name.kf" "$WORK/$name.klpsym" && echo "identical lines" ||
			echo "$(diff "$WORK/$name.kf" "$WORK/$name.klpsym" | grep -c '^<') lines differ")"
		echo "agreement on $name: $n_k symbols each ($same)"
	else
		echo "DISAGREEMENT on $name: kallsyms-finder lists $n_kf symbols, klpsym $n_k"
	fi
done

# The cache primed, and its answers checked against the cold ones.
CACHE="$WORK/cache"
for f in "$VMLINUZ" "$VMLINUX"; do
	name="$(basename "$f")"
	"$KLPSYM" dump --cache-dir "$CACHE" --kernel "$f" >/dev/null
	"$KLPSYM" dump --cache-dir "$CACHE" --kernel "$f" | cmp -s - "$WORK/$name.klpsym" || {
		echo "the cached dump of $name differs from the cold one" >&2
		exit 1
	}
done

: >"$WORK/kf.vmlinuz" >"$WORK/k.vmlinuz" >"$WORK/kf.vmlinux" >"$WORK/k.vmlinux"
: >"$WORK/w.vmlinuz" >"$WORK/w.vmlinux"
for i in $(seq "$REPS"); do
	log "repetition $i/$REPS"
	time_cmd "$KF" "$VMLINUZ" >>"$WORK/kf.vmlinuz"
	time_cmd "$KLPSYM" dump --no-cache --kernel "$VMLINUZ" >>"$WORK/k.vmlinuz"
	time_cmd "$KF" "$VMLINUX" >>"$WORK/kf.vmlinux"
	time_cmd "$KLPSYM" dump --no-cache --kernel "$VMLINUX" >>"$WORK/k.vmlinux"
	time_cmd "$KLPSYM" dump --cache-dir "$CACHE" --kernel "$VMLINUZ" >>"$WORK/w.vmlinuz"
	time_cmd "$KLPSYM" dump --cache-dir "$CACHE" --kernel "$VMLINUX" >>"$WORK/w.vmlinux"
done
"$MEASURE" "$VMLINUZ" --reps "$REPS" >"$WORK/measure"
raw_ms="$(sed -n 's/^raw_decoder_ms=//p' "$WORK/measure")"
[ -n "$raw_ms" ] || {
	echo "the measure example printed no raw_decoder_ms (payload not XZ?)" >&2
	exit 1
}

kf_z="$(median <"$WORK/kf.vmlinuz")"
k_z="$(median <"$WORK/k.vmlinuz")"
kf_x="$(median <"$WORK/kf.vmlinux")"
k_x="$(median <"$WORK/k.vmlinux")"
w_z="$(median <"$WORK/w.vmlinuz")"
w_x="$(median <"$WORK/w.vmlinux")"
raw="$(calc "$raw_ms / 1000")"

printf '\nmedian of %s runs (load average now: %s)\n' "$REPS" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %10s %10s\n' "" "$(basename "$VMLINUZ")" "$(basename "$VMLINUX")"
printf '%-44s %9.3fs %9.3fs\n' "(a) kallsyms-finder" "$kf_z" "$kf_x"
printf '%-44s %9.3fs %9.3fs\n' "(b) klpsym dump" "$k_z" "$k_x"
printf '%-44s %9.3fs %10s\n' "(c) XZ payload decompression alone" "$raw" "-"
printf '%-44s %9.3fs %9.3fs\n' "(d) klpsym dump, index cache warm" "$w_z" "$w_x"
echo
printf 'klpsym vs kallsyms-finder on %s: %.1fx faster\n' "$(basename "$VMLINUZ")" "$(calc "$kf_z / $k_z")"
printf 'klpsym vs kallsyms-finder on %s: %.1fx faster (target >= 100x)\n' "$(basename "$VMLINUX")" "$(calc "$kf_x / $k_x")"
printf 'klpsym with a warm cache vs kallsyms-finder on %s: %.1fx, on %s: %.1fx faster\n' \
	"$(basename "$VMLINUZ")" "$(calc "$kf_z / $w_z")" "$(basename "$VMLINUX")" "$(calc "$kf_x / $w_x")"
printf 'klpsym on %s vs decompression alone: %.3fx (target <= 1.2x)\n' "$(basename "$VMLINUZ")" "$(calc "$k_z / $raw")"
echo
echo "in-process (klpsym-image measure example, median of $REPS):"
grep -E '^(raw_decoder_ms|decompress_ms|extract_ms|entries)=' "$WORK/measure"
