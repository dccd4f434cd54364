#!/usr/bin/env bash
# Build the static guest helpers for the lab kernel's architecture (KLPSYM_LAB_ARCH) and
# print their paths:
#   FINIT_BIN=...    finit.c: one finit_module(2) call per module, one FINIT line
#   SHMOUT_BIN=...   shmout.c: copy a file into the ivshmem BAR (fast guest -> host channel)
#   BUSYBOX_BIN=...  the static busybox of the initramfs
# amd64: gcc -static -O2 into $KLPSYM_LAB_CACHE/tools, busybox from the host's busybox-static.
# arm64: aarch64-linux-gnu-gcc -static -O2 (bookworm's gcc-aarch64-linux-gnu) into
# $KLPSYM_LAB_CACHE/tools/arm64, busybox from busybox-static:arm64, downloaded with the
# suite's private arm64 apt configuration and unpacked with dpkg -x (never installed).
# Each helper is rebuilt only when its source is newer than the binary.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "$LAB_ARCH" = amd64 ]; then
	TOOLS="$LAB_CACHE/tools"
	CC=gcc
	CC_PACKAGES=(gcc libc6-dev)
else
	TOOLS="$LAB_CACHE/tools/$LAB_ARCH"
	CC=aarch64-linux-gnu-gcc
	CC_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
fi

build_static() {
	local name="$1" src="$LAB_SRC_DIR/$1.c" out="$TOOLS/$1"
	if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
		ensure_packages "${CC_PACKAGES[@]}"
		mkdir -p "$(dirname "$out")"
		"$CC" -static -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src" ||
			die "building $src failed"
		mv "$out.tmp" "$out"
		log "built $out"
	fi
	printf '%s_BIN=%s\n' "${name^^}" "$out"
}

# arm64_busybox: $TOOLS/busybox from the suite's busybox-static:arm64 (kept once made).
arm64_busybox() {
	local out="$TOOLS/busybox" tmp
	if [ ! -x "$out" ]; then
		mkdir -p "$TOOLS"
		tmp="$(mktemp -d "$TOOLS/.busybox.XXXXXX")"
		chown _apt "$tmp" 2>/dev/null || true
		log "apt-get download busybox-static:$LAB_ARCH ($LAB_SUITE)"
		lab_apt_download "$tmp" "busybox-static:$LAB_ARCH" || die "apt-get download busybox-static:$LAB_ARCH failed"
		dpkg -x "$tmp"/busybox-static_*.deb "$tmp/root" || die "dpkg -x busybox-static failed"
		[ -x "$tmp/root/bin/busybox" ] || [ -x "$tmp/root/usr/bin/busybox" ] ||
			die "busybox-static:$LAB_ARCH has no bin/busybox"
		if [ -x "$tmp/root/bin/busybox" ]; then mv "$tmp/root/bin/busybox" "$out"; else mv "$tmp/root/usr/bin/busybox" "$out"; fi
		basename "$tmp"/busybox-static_*.deb >"$TOOLS/busybox.source"
		rm -rf "$tmp"
		log "busybox for $LAB_ARCH: $(cat "$TOOLS/busybox.source")"
	fi
	printf 'BUSYBOX_BIN=%s\n' "$out"
}

build_static finit
build_static shmout
if [ "$LAB_ARCH" = amd64 ]; then
	# busybox-static conflicts with the dynamically linked busybox package: /bin/busybox is
	# then static and runs in the bare initramfs.
	ensure_packages busybox-static
	printf 'BUSYBOX_BIN=%s\n' /bin/busybox
else
	with_lock "$TOOLS/.lock" arm64_busybox
fi
