#!/usr/bin/env bash
# The Python package's overhead per call against the Rust library, side by side in one run:
# python/bench.py and `klpsym-bench calls` make the same calls (a batch of 100,000 addresses
# symbolized, a patch checked) on the same kernel, alternating ROUNDS times; each prints its
# fastest and median. Usage: scripts/bench-python.sh KERNEL PATCH.ko [ROUNDS] [BASE]
# (the Python package installed in the active environment: pip install ./python). With
# BASE, a commit, that commit's Python package is built too (from `git archive`, into a
# virtualenv of its own, its extension in target/bench-base) and its bench.py run in each
# round beside this one's.
set -euo pipefail
cd "$(dirname "$0")/.."
kernel="${1:?usage: bench-python.sh KERNEL PATCH.ko [ROUNDS] [BASE]}" patch="${2:?}" rounds="${3:-3}"
base="${4:-}"
cargo build -q --release -p klpsym-bench
if [ -n "$base" ]; then
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/src"
	git archive "$base" | tar -x -C "$work/src"
	python3 -m venv "$work/venv"
	"$work/venv/bin/pip" install --quiet "maturin>=1.5,<2"
	CARGO_TARGET_DIR="$PWD/target/bench-base" "$work/venv/bin/pip" install --quiet "$work/src/python"
fi
for i in $(seq "$rounds"); do
	echo "-- round $i"
	target/release/klpsym-bench calls --kernel "$kernel" --patch "$patch"
	# -P: the installed package, not python/klpsym beside the script (which has no extension).
	python3 -P python/bench.py --kernel "$kernel" --patch "$patch"
	if [ -n "$base" ]; then
		echo "($base's package:)"
		"$work/venv/bin/python" -P python/bench.py --kernel "$kernel" --patch "$patch"
	fi
done
