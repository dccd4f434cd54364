#!/usr/bin/env bash
# A kernel's -dbg package read cold, side by side with extracting its vmlinux by hand: peak
# memory and time of `klpsym sympos NAME --file FILE` on the image and -dbg packages with an
# empty cache (the package streamed, its vmlinux spilled to a private file and mapped, the
# DWARF read and released behind), then the same warm, against `dpkg-deb --fsys-tarfile |
# tar -xO` of the vmlinux alone.
#
#   scripts/bench-dbg.sh IMAGE.deb DBG.deb [NAME FILE] [REPS]
#
# NAME FILE default to init_once fs/inode.c; REPS (default 1: a cold 7.x read is two minutes)
# interleaved runs, medians. KLPSYM_BIN=PATH measures that build of klpsym instead of building
# this tree's (a build before a change, kept aside). Peak RSS is /usr/bin/time's maximum resident set size (the
# process's anonymous memory and the mapped file pages it holds at once).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:?usage: bench-dbg.sh IMAGE.deb DBG.deb [NAME FILE] [REPS]}"
DBG="${2:?usage: bench-dbg.sh IMAGE.deb DBG.deb [NAME FILE] [REPS]}"
NAME="${3:-init_once}"
FILE="${4:-fs/inode.c}"
REPS="${5:-1}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
command -v /usr/bin/time >/dev/null || { echo "bench-dbg: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

if [ -n "${KLPSYM_BIN:-}" ]; then
	BIN="$KLPSYM_BIN"
else
	(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
	BIN="$ROOT/target/release/klpsym"
fi

dpkg-deb -c "$DBG" >"$WORK/list"
# The regular file: usr/lib/debug/boot/vmlinux-REL (5.10, 6.1) or
# usr/lib/debug/lib/modules/REL/vmlinux (newer; the other name is a link).
member="$(awk '$1 ~ /^-/ && ($NF ~ /^\.\/usr\/lib\/debug\/boot\/vmlinux-/ || $NF ~ /^\.\/usr\/lib\/debug\/lib\/modules\/[^\/]*\/vmlinux$/) {print $NF; exit}' "$WORK/list")"
[ -n "$member" ] || { echo "bench-dbg: $DBG holds no vmlinux-*" >&2; exit 2; }

# measure LABEL CMD...: appends "seconds kbytes" to $WORK/LABEL.
measure() {
	local label="$1"
	shift
	/usr/bin/time -f '%e %M' -o "$WORK/one" "$@" >/dev/null 2>"$WORK/err" ||
		{ cat "$WORK/err" >&2; exit 1; }
	cat "$WORK/one" >>"$WORK/$label"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for ((i = 0; i < REPS; i++)); do
	rm -rf "$WORK/cache"
	mkdir -p "$WORK/cache/klpsym"
	chmod 700 "$WORK/cache/klpsym"
	measure cold env XDG_CACHE_HOME="$WORK/cache" "$BIN" sympos "$NAME" --file "$FILE" -k "$IMAGE" -k "$DBG"
	measure warm env XDG_CACHE_HOME="$WORK/cache" "$BIN" sympos "$NAME" --file "$FILE" -k "$IMAGE" -k "$DBG"
	measure extract sh -c "dpkg-deb --fsys-tarfile '$DBG' | tar -xO '$member' >/dev/null"
done

row() {
	local label="$1" what="$2"
	printf '%-52s %9s s %9s MB\n' "$what" "$(cut -d' ' -f1 "$WORK/$label" | median)" \
		"$(cut -d' ' -f2 "$WORK/$label" | median | awk '{printf "%.0f", $1 / 1024}')"
}
echo "$(basename "$DBG"): median of $REPS"
row extract "dpkg-deb --fsys-tarfile | tar -xO (vmlinux only)"
row cold "klpsym sympos $NAME --file $FILE, empty cache"
row warm "the same, warm"
awk -v e="$(cut -d' ' -f1 "$WORK/extract" | median)" -v c="$(cut -d' ' -f1 "$WORK/cold" | median)" \
	'BEGIN { printf "cold klpsym / extraction alone: %.2fx the time\n", c / e }'
