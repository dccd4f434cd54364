#!/usr/bin/env bash
# Cold image decode side by side with the standard tool decompressing the same payload, in one
# run, on every amd64 lab kernel (the lab's XZ and zstd bzImages).
#
#   scripts/bench-decode.sh            # REPS=5 by default; REPS=N to change
#
# Per kernel (wall clock, median of REPS interleaved runs, output to /dev/null):
#   xz -dc PAYLOAD / zstd -dc PAYLOAD     the compressed payload cut out of the bzImage by its
#                                         setup header (payload_offset, payload_length)
#   klpsym lookup _text --no-cache --kernel VMLINUZ    decompress, find and decode the tables
# and prints klpsym / the tool (the target is at most 1.2x).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPS="${REPS:-5}"
CACHE="${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

(cd "$ROOT" && cargo build --release -q -p klpsym-cli)
BIN="$ROOT/target/release/klpsym"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The payload of a bzImage: protected-mode code starts after (setup_sects + 1) sectors; the
# payload lies payload_offset bytes into it, payload_length long (boot protocol 2.08+).
payload() { # VMLINUZ OUT
	python3 - "$1" "$2" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[0x202:0x206] == b"HdrS", "not a bzImage"
setup = (b[0x1f1] or 4) + 1
off, length = struct.unpack_from("<II", b, 0x248)
start = setup * 512 + off
# The last 4 bytes are the decompressed size the build appends, not compressed data.
open(sys.argv[2], "wb").write(b[start:start + length - 4])
PY
}

echo "| kernel | payload | tool alone | klpsym (cold) | klpsym / tool |"
echo "| --- | --- | ---: | ---: | ---: |"
for env in "$CACHE"/*/lab.env; do
	vmlinuz="$(sed -n 's/^VMLINUZ=//p' "$env")"
	[ -f "$vmlinuz" ] || continue
	head -c 518 "$vmlinuz" | tail -c 4 | grep -q HdrS || continue # bzImages (amd64) only
	abi="$(basename "$(dirname "$env")")"
	payload "$vmlinuz" "$WORK/payload"
	case "$(head -c 4 "$WORK/payload" | od -An -tx1 | tr -d ' ')" in
	fd377a58) tool=(xz -dc) ;;
	28b52ffd) tool=(zstd -dcq) ;;
	*) continue ;;
	esac
	: >"$WORK/tool.t"
	: >"$WORK/k.t"
	"$BIN" lookup _text --no-cache --kernel "$vmlinuz" >/dev/null # page cache
	for ((i = 0; i < REPS; i++)); do
		t0=${EPOCHREALTIME/./}
		"${tool[@]}" "$WORK/payload" >/dev/null
		t1=${EPOCHREALTIME/./}
		echo $((t1 - t0)) >>"$WORK/tool.t"
		t0=${EPOCHREALTIME/./}
		"$BIN" lookup _text --no-cache --kernel "$vmlinuz" >/dev/null
		t1=${EPOCHREALTIME/./}
		echo $((t1 - t0)) >>"$WORK/k.t"
	done
	t=$(median <"$WORK/tool.t")
	k=$(median <"$WORK/k.t")
	awk -v a="$abi" -v p="${tool[0]}" -v t="$t" -v k="$k" \
		'BEGIN { printf "| %s | %s | %.0f ms | %.0f ms | %.2fx |\n", a, p, t / 1000, k / 1000, k / t }'
done
