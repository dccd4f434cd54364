#!/usr/bin/env bash
# The core name lookup against a base build, side by side in one run: the first pass over a
# freshly built index (what a patch check does once) and the fastest of 7 passes.
#
#   scripts/bench-lookup.sh KALLSYMS [ROUNDS] [BASE]
#
# KALLSYMS  a /proc/kallsyms capture (the lab's: /var/cache/klpsym-lab/6.1.0-57/capture/
#           kallsyms-nomod.txt); ROUNDS (default 5) alternating runs of each build;
#           BASE (default e0414df, the build before the table was read in place) a commit.
#
# Both builds run `klpsym-bench resolve` (11,000 lookups: 10,000 klp relocations and 1,000
# replaced functions over vmlinux and 20 generated modules). The base build's bench has no
# `--klpsym-only`: this script adds to a worktree of it the lines that print the first
# pass (and the fastest of its 7 passes) and a return after them, so the base never runs the
# seconds-long kernel walk; this tree's bench prints the same two lines by the same
# expressions.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KALLSYMS="${1:?usage: bench-lookup.sh KALLSYMS [ROUNDS] [BASE]}"
ROUNDS="${2:-5}"
BASE="${3:-e0414df}"
WORK="$(mktemp -d)"
trap 'git -C "$ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

log() { echo "bench-lookup: $*" >&2; }

log "building this tree's klpsym-bench (release)"
(cd "$ROOT" && cargo build --release -q -p klpsym-bench)
NEW="$ROOT/target/release/klpsym-bench"

log "building $BASE's klpsym-bench (release, worktree; target/bench-base)"
git -C "$ROOT" worktree add --detach -q "$WORK/base" "$BASE"
resolve="$WORK/base/crates/klpsym-bench/src/resolve.rs"
grep -q '^    let klpsym_time = median(times);$' "$resolve" ||
	{ log "$BASE's resolve.rs has no 'let klpsym_time = median(times);' line to time after"; exit 2; }
sed -i 's|^    let klpsym_time = median(times);$|    println!("first pass over the new index: {:.1} ns per lookup", times[0].as_secs_f64() * 1e9 / lookups.len() as f64);\n    println!("fastest of 7 passes: {:.1} ns per lookup", times.iter().min().unwrap().as_secs_f64() * 1e9 / lookups.len() as f64);\n    if std::env::var_os("BENCH_LOOKUP_ONLY").is_some() { return Ok(()); }\n&|' "$resolve"
(cd "$WORK/base" && CARGO_TARGET_DIR="$ROOT/target/bench-base" cargo build --release -q -p klpsym-bench 2>/dev/null)
OLD="$ROOT/target/bench-base/release/klpsym-bench"

printf '%-6s %-22s %14s %20s\n' round build "first pass" "fastest of 7 passes"
for ((r = 1; r <= ROUNDS; r++)); do
	for build in base new; do
		if [ "$build" = base ]; then
			out="$(BENCH_LOOKUP_ONLY=1 "$OLD" resolve --kernel "$KALLSYMS")"
			name="$BASE"
		else
			out="$("$NEW" resolve --kernel "$KALLSYMS" --klpsym-only 1)"
			name="$(git -C "$ROOT" rev-parse --short HEAD)"
		fi
		first="$(sed -n 's/^first pass over the new index: \([0-9.]*\) ns.*/\1/p' <<<"$out")"
		fastest="$(sed -n 's/^fastest of 7 passes: \([0-9.]*\) ns.*/\1/p' <<<"$out")"
		printf '%-6s %-22s %11s ns %17s ns\n' "$r" "$build ($name)" "$first" "$fastest"
		echo "$first $fastest" >>"$WORK/times-$build"
	done
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
fb="$(cut -d' ' -f1 "$WORK/times-base" | median)"
fn="$(cut -d' ' -f1 "$WORK/times-new" | median)"
sb="$(cut -d' ' -f2 "$WORK/times-base" | median)"
sn="$(cut -d' ' -f2 "$WORK/times-new" | median)"
awk -v fb="$fb" -v fn="$fn" -v sb="$sb" -v sn="$sn" -v base="$BASE" 'BEGIN {
	printf "medians: first pass %s ns (%s) -> %s ns (this build), %.2fx the time; fastest of 7 %s -> %s ns, %.2fx\n", fb, base, fn, fn / fb, sb, sn, sn / sb
}'
