#!/usr/bin/env bash
# Mutation testing of the verdict code: cargo-mutants changes one thing at a time in
# klpsym-livepatch's check/ (the module loader's and livepatch's steps), klpsym-core's
# lookup.rs (klp_find_object_symbol()) and symbolize.rs (%pS), builds, and runs the tests that
# need no real kernel (the package's own). A mutant the tests do not catch is a behaviour no
# test holds: killed by a new test, or explained in docs/verification.md.
#
# Not in CI (hundreds of builds: hours on 2 cores). Usage:
#   scripts/mutants.sh [--list] [FILE...]   (default: the files above; --list only lists)
# Output: target/mutants/<package>/mutants.out/{caught,missed,timeout,unviable}.txt, and a
# summary line per package on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked cargo-mutants

list=""
if [ "${1:-}" = --list ]; then
	list=--list
	shift
fi
files=("$@")
if [ "${#files[@]}" = 0 ]; then
	files=(crates/klpsym-livepatch/src/check/*.rs crates/klpsym-core/src/lookup.rs
		crates/klpsym-core/src/symbolize.rs)
fi

# One run per package: its files mutated, its own tests judging (the lab's tests skip without
# KLPSYM_TEST_* and are not what this measures).
declare -A by_package
for f in "${files[@]}"; do
	pkg="$(sed -n 's|^crates/\([^/]*\)/.*|\1|p' <<<"$f")"
	[ -n "$pkg" ] || { echo "scripts/mutants.sh: $f is not in a crate" >&2; exit 2; }
	by_package[$pkg]+=" --file $f"
done
status=0
for pkg in "${!by_package[@]}"; do
	out="target/mutants/$pkg"
	mkdir -p "$out"
	# shellcheck disable=SC2086 # --file FILE pairs
	cargo-mutants mutants $list --package "$pkg" ${by_package[$pkg]} --output "$out" \
		--timeout-multiplier 3 --jobs 1 --profile mutants || status=$?
	if [ -z "$list" ]; then
		r="$out/mutants.out"
		printf '== %s: %s caught, %s missed, %s timed out, %s unviable\n' "$pkg" \
			"$(wc -l <"$r/caught.txt")" "$(wc -l <"$r/missed.txt")" \
			"$(wc -l <"$r/timeout.txt")" "$(wc -l <"$r/unviable.txt")" >&2
	fi
done
# cargo-mutants exits 2 when a mutant was missed, 3 on a timeout: reported above.
exit "$status"
