#!/usr/bin/env bash
# A one-shot live query side by side with reading /proc/kallsyms alone, in one run: the
# kernel's formatting of the file is the floor both pay.
#
#   scripts/bench-live.sh            # REPS=21 by default; REPS=N to change
#
# Commands (release build, output to /dev/null, wall clock, median of REPS interleaved runs):
#   cat /proc/kallsyms
#   klpsym lookup NAME --sympos 1                 (the running kernel; NAME its first text symbol
#                                                  with a duplicate, else _text)
#   klpsym dump
# Prints the medians and klpsym / cat.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${REPS:-21}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
BIN="$ROOT/target/release/klpsym"

NAME="$(awk '$2 ~ /^[tT]$/ && NF == 3 { if (seen[$3]++) { print $3; exit } }' /proc/kallsyms)"
NAME="${NAME:-_text}"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Times are microseconds from bash's own clock ($EPOCHREALTIME).
: >"$WORK/cat.t"
: >"$WORK/lookup.t"
: >"$WORK/dump.t"
for ((i = 0; i < REPS; i++)); do
	t0=${EPOCHREALTIME/./}
	cat /proc/kallsyms >/dev/null
	t1=${EPOCHREALTIME/./}
	echo $((t1 - t0)) >>"$WORK/cat.t"
	t0=${EPOCHREALTIME/./}
	"$BIN" lookup "$NAME" --sympos 1 >/dev/null
	t1=${EPOCHREALTIME/./}
	echo $((t1 - t0)) >>"$WORK/lookup.t"
	t0=${EPOCHREALTIME/./}
	"$BIN" dump >/dev/null
	t1=${EPOCHREALTIME/./}
	echo $((t1 - t0)) >>"$WORK/dump.t"
done
c=$(median <"$WORK/cat.t")
l=$(median <"$WORK/lookup.t")
d=$(median <"$WORK/dump.t")
n=$(wc -l </proc/kallsyms)
echo "/proc/kallsyms: $n lines; medians of $REPS interleaved runs (load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "| command | median | vs cat |"
echo "| --- | ---: | ---: |"
awk -v c="$c" -v l="$l" -v d="$d" -v name="$NAME" 'BEGIN {
	printf "| cat /proc/kallsyms | %.1f ms | 1.00x |\n", c / 1000
	printf "| klpsym lookup %s --sympos 1 | %.1f ms | %.2fx |\n", name, l / 1000, l / c
	printf "| klpsym dump | %.1f ms | %.2fx |\n", d / 1000, d / c
}'
