#!/usr/bin/env bash
# A fleet check's memory and time by the number of kernels, side by side in one run: the lab's
# "unique" livepatch case checked against 2, 4 and 8 kernels (every lab kernel's vmlinuz, then
# the stripped vmlinux files), as a matrix (`--json`: every kernel open at once), as a fleet
# (`--jsonl`: one kernel at a time) and as a fleet of two jobs (`--jsonl --jobs 2`), each cold
# (`--no-cache`) and warm (a primed cache).
#
#   scripts/bench-fleet.sh            # REPS=3 by default; REPS=N to change
#
# Prints a Markdown table: peak RSS (max of REPS, /usr/bin/time's %M) and wall time per kernel
# (median of REPS). Every --jsonl run's verdicts are compared with the --json run's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${REPS:-3}"
LAB="${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { printf '[bench-fleet] %s\n' "$*" >&2; }

(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
BIN="${KLPSYM_BIN:-$ROOT/target/release/klpsym}"

kernels=()
for key in VMLINUZ VMLINUX; do
	for env_file in "$LAB"/*/lab.env; do
		f="$(sed -n "s/^$key=//p" "$env_file")"
		[ -n "$f" ] && [ -f "$f" ] && kernels+=("$f")
	done
done
[ "${#kernels[@]}" -ge 8 ] || { log "need 8 lab kernel files, found ${#kernels[@]} (run scripts/test.sh first)"; exit 1; }
PATCH="$(sed -n 's/^LIVEPATCH_DIR=//p' "$LAB/6.1.0-57/lab.env" 2>/dev/null || true)/unique/klp_unique.ko"
[ -f "$PATCH" ] || PATCH="$(ls "$LAB"/*/livepatch/unique/klp_unique.ko | head -n1)"
CACHE="$WORK/cache"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

measure() { # N MODE(json|jsonl|jobs2) TEMP(cold|warm): prints "rss_mb ms_per_kernel"
	local n="$1" mode="$2" temp="$3" i args=() cache_args=() flags=()
	case "$mode" in json) flags=(--json) ;; jsonl) flags=(--jsonl) ;; jobs2) flags=(--jsonl --jobs 2) ;; esac
	for ((i = 0; i < n; i++)); do args+=(-k "${kernels[$i]}"); done
	if [ "$temp" = cold ]; then cache_args=(--no-cache); else cache_args=(--cache-dir "$CACHE"); fi
	[ "$temp" = warm ] && "$BIN" check "$PATCH" "${args[@]}" "${flags[@]}" "${cache_args[@]}" >/dev/null 2>&1 || true
	: >"$WORK/t"
	: >"$WORK/m"
	for ((i = 0; i < REPS; i++)); do
		/usr/bin/time -f '%M %e' -o "$WORK/one" "$BIN" check "$PATCH" "${args[@]}" "${flags[@]}" "${cache_args[@]}" \
			>"$WORK/$mode.out" 2>/dev/null || true
		read -r kb s < <(tail -n1 "$WORK/one")
		echo "$kb" >>"$WORK/m"
		echo "$s" >>"$WORK/t"
	done
	awk -v n="$n" -v kb="$(sort -n "$WORK/m" | tail -n1)" -v s="$(median <"$WORK/t")" \
		'BEGIN { printf "%.0f %.0f\n", kb / 1024, s * 1000 / n }'
}

verdicts_agree() { # N: the fleets' verdicts per kernel equal the matrix's
	local f
	jq -r '.results[] | "\(.kernel) \(.report.verdict.kind)"' "$WORK/json.out" | sort >"$WORK/a"
	for f in jsonl jobs2; do
		jq -r 'select(.report) | "\(.kernel) \(.report.verdict.kind)"' "$WORK/$f.out" | sort >"$WORK/b"
		cmp -s "$WORK/a" "$WORK/b" || { log "$1 kernels: $f verdicts differ from --json"; diff "$WORK/a" "$WORK/b" >&2; exit 1; }
	done
}

log "REPS=$REPS; patch $PATCH; ${#kernels[@]} kernel files"
echo "| kernels | cache | matrix (--json): peak RSS | per kernel | fleet (--jsonl): peak RSS | per kernel | --jsonl --jobs 2: peak RSS | per kernel |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in 2 4 8; do
	for temp in cold warm; do
		read -r jm jt < <(measure "$n" json "$temp")
		read -r lm lt < <(measure "$n" jsonl "$temp")
		read -r pm pt < <(measure "$n" jobs2 "$temp")
		verdicts_agree "$n"
		echo "| $n | $temp | $jm MB | $jt ms | $lm MB | $lt ms | $pm MB | $pt ms |"
	done
done
