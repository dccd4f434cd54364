#!/usr/bin/env bash
# The Python package's overhead per call against the Rust library, side by side in one run:
# python/bench.py and `klpsym-bench calls` make the same calls (a batch of 100,000 addresses
# symbolized, a patch checked) on the same kernel, alternating ROUNDS times; each prints its
# fastest and median. Usage: scripts/bench-python.sh KERNEL PATCH.ko [ROUNDS]
# (the Python package installed in the active environment: pip install ./python).
set -euo pipefail
cd "$(dirname "$0")/.."
kernel="${1:?usage: bench-python.sh KERNEL PATCH.ko [ROUNDS]}" patch="${2:?}" rounds="${3:-3}"
cargo build -q --release -p klpsym-bench
for i in $(seq "$rounds"); do
	echo "-- round $i"
	target/release/klpsym-bench calls --kernel "$kernel" --patch "$patch"
	# -P: the installed package, not python/klpsym beside the script (which has no extension).
	python3 -P python/bench.py --kernel "$kernel" --patch "$patch"
done
