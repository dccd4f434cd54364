#!/usr/bin/env bash
# Build the static guest helpers into $KLPSYM_LAB_CACHE/tools and print their paths:
#   FINIT_BIN=...   finit.c: one finit_module(2) call per module, one FINIT line
#   SHMOUT_BIN=...  shmout.c: copy a file into the ivshmem BAR (fast guest -> host channel)
# Each is rebuilt only when its source is newer than the binary (gcc -static -O2).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_static() {
	local name="$1" src="$LAB_SRC_DIR/$1.c" out="$LAB_CACHE/tools/$1"
	if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
		ensure_packages gcc libc6-dev
		mkdir -p "$(dirname "$out")"
		gcc -static -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src" ||
			die "building $src failed"
		mv "$out.tmp" "$out"
		log "built $out"
	fi
	printf '%s_BIN=%s\n' "${name^^}" "$out"
}

build_static finit
build_static shmout
