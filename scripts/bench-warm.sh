#!/usr/bin/env bash
# Warm runs of the cache against a base build, side by side in one run (issue #49): what a
# warm run costs in time and in bytes read, and what the cache holds.
#
#   scripts/bench-warm.sh IMAGE.deb DBG.deb FOLDER [REPS] [BASE]
#
# Commands (release builds, output to /dev/null):
#   pair     sympos init_once --file fs/inode.c -k IMAGE.deb -k DBG.deb
#   folder   sympos init_once --file inode.c -k FOLDER   (every package of a folder: the lab's
#            /var/cache/klpsym-lab/debs holds each kernel's image, headers and -dbg packages)
# Each build (this tree's, and BASE's, default 41f489f: the build before the cache was
# keyed by its input) gets its own empty cache, primed by one cold run of each command (its
# time printed, not part of the medians), then REPS (default 5) warm runs of each, the two
# builds interleaved. For every run: wall time, the bytes the process read with read(2) and
# its kind (`rchar` of /proc/PID/io, read from the finished process before it is reaped:
# cache entries are mapped, so their pages are not counted; a package hashed or decoded
# is), and peak RSS. Then each build's cache: its files and their total size. BASE=none
# measures this tree's build alone (its figures against the bounds of docs/performance.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:?usage: bench-warm.sh IMAGE.deb DBG.deb FOLDER [REPS] [BASE]}"
DBG="${2:?usage: bench-warm.sh IMAGE.deb DBG.deb FOLDER [REPS] [BASE]}"
FOLDER="${3:?usage: bench-warm.sh IMAGE.deb DBG.deb FOLDER [REPS] [BASE]}"
REPS="${4:-5}"
BASE="${5:-41f489f}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "bench-warm: $*" >&2; }

log "building this tree's klpsym (release)"
(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
NEW="$ROOT/target/release/klpsym"
builds=(base new)
OLD=
if [ "$BASE" = none ]; then
	# This tree's build alone: its figures against the issue's bounds, no base beside it.
	builds=(new)
else
	log "building $BASE's klpsym (release, from git archive; target/bench-base)"
	mkdir -p "$WORK/base"
	git -C "$ROOT" archive "$BASE" | tar -x -C "$WORK/base"
	(cd "$WORK/base" && CARGO_TARGET_DIR="$ROOT/target/bench-base" cargo build --release -q -p klpsym-cli)
	OLD="$ROOT/target/bench-base/release/klpsym"
fi

# run CMD...: runs CMD, prints "seconds rchar_bytes peak_rss_kb exit_code" (the counters of
# the finished process, read before it is reaped).
run() {
	python3 - "$@" <<'EOF'
import os, sys, time, resource
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    err = os.environ.get("RUN_ERR")
    os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if err else fd, 2)
    os.execvp(sys.argv[1], sys.argv[1:])
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
secs = time.perf_counter() - t
io = dict(l.split(": ") for l in open(f"/proc/{pid}/io").read().splitlines())
_, status, ru = os.wait4(pid, 0)
code = os.waitstatus_to_exitcode(status)
# 1 and 2 are answers (a kernel said no; a kernel of a folder could not be read); a signal
# or anything else is a failure of the run.
if code not in (0, 1, 2):
    sys.exit(f"bench-warm: {' '.join(sys.argv[1:])}: exit status {code}")
print(f"{secs:.4f} {io['rchar']} {ru.ru_maxrss} {code}")
EOF
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

pair=(sympos init_once --file fs/inode.c -k "$IMAGE" -k "$DBG")
folder=(sympos init_once --file inode.c -k "$FOLDER")
# run_build BUILD COMMAND: the command's run by the build, on its own cache.
run_build() {
	local bin="$OLD"
	[ "$1" = new ] && bin="$NEW"
	local -n cmd="$2"
	run "$bin" "${cmd[@]}" --cache-dir "$WORK/cache-$1"
}
for build in "${builds[@]}"; do
	mkdir -p "$WORK/cache-$build"
	chmod 700 "$WORK/cache-$build"
	for c in pair folder; do
		RUN_ERR="$WORK/err" run_build "$build" "$c" >"$WORK/cold-$build-$c"
		log "$build $c cold (priming): $(cut -d' ' -f1 "$WORK/cold-$build-$c") s, exit $(cut -d' ' -f4 "$WORK/cold-$build-$c")"
		grep -v '^note' "$WORK/err" | tail -n 5 | sed 's/^/  stderr: /' >&2 || true
	done
done
for ((i = 0; i < REPS; i++)); do
	for c in pair folder; do
		for build in "${builds[@]}"; do
			run_build "$build" "$c" >>"$WORK/warm-$build-$c"
		done
	done
done

new_name="$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo +)"
printf '%-8s %-22s %10s %12s %14s %12s %5s\n' command build "cold s" "warm s" "warm read" "warm RSS" exit
for c in pair folder; do
	for build in "${builds[@]}"; do
		name="$BASE"
		[ "$build" = new ] && name="$new_name"
		f="$WORK/warm-$build-$c"
		printf '%-8s %-22s %10.2f %12.3f %11.1f MB %9.0f MB %5s\n' "$c" "$build ($name)" \
			"$(cut -d' ' -f1 "$WORK/cold-$build-$c")" \
			"$(cut -d' ' -f1 "$f" | median)" \
			"$(cut -d' ' -f2 "$f" | median | awk '{print $1 / 1e6}')" \
			"$(cut -d' ' -f3 "$f" | median | awk '{print $1 / 1024}')" \
			"$(cut -d' ' -f4 "$f" | sort -u | tr '\n' ' ')"
	done
	[ "$BASE" = none ] || awk -v b="$(cut -d' ' -f1 "$WORK/warm-base-$c" | median)" -v n="$(cut -d' ' -f1 "$WORK/warm-new-$c" | median)" \
		-v c="$c" 'BEGIN { printf "%-8s warm: base / new = %.1fx\n", c, b / n }'
done
for build in "${builds[@]}"; do
	d="$WORK/cache-$build"
	echo "cache of $build: $(find "$d" -type f | wc -l) files, $(du -sb "$d" | awk '{printf "%.1f MB", $1 / 1e6}')"
	find "$d" -type f -printf '%s %f\n' | awk '
		{ n = $2; k = "entries (.klpc)"; if (n ~ /\.dwarf$/) k = "debug sections (.klpc.dwarf)"; else if (n ~ /\.klps$/) k = "stamp records (.klps)"; else if (n ~ /klpc-debug/) k = "module debug files"; else if (n !~ /\.klpc$/) k = "other"; s[k] += $1; c[k]++ }
		END { for (k in s) printf "  %-30s %4d files %9.1f MB\n", k, c[k], s[k] / 1e6 }'
done
