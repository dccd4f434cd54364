#!/usr/bin/env bash
# Fetch the unstripped vmlinux (with .symtab) of the lab kernel from Debian's -dbg package.
#
# The -dbg package is ~0.9-1.2 GB; only its vmlinux is extracted (to $KLPSYM_LAB_DIR/vmlinux-dbg),
# the .deb is kept in $CACHE/debs like the others (the package tests read it in place).
# A few modules' debug files are extracted too (to $KLPSYM_LAB_DIR/debug-modules, their paths
# under lib/modules/REL kept): the file:line comparison with binutils' addr2line reads them.
# Prints VMLINUX_DBG=<path>, DBG_DEB=<path> and DEBUG_MODULES_DIR=<path>.
# Needs fetch-kernel.sh's outputs (it runs it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set -euo pipefail

eval "$("$(dirname "${BASH_SOURCE[0]}")/fetch-kernel.sh")"
out="$KLPSYM_LAB_DIR/vmlinux-dbg"
pkg="linux-image-${KERNEL_RELEASE}-dbg"
deb="$LAB_CACHE/debs/${pkg}_${KLPSYM_LAB_VERSION//:/%3a}_amd64.deb"
if ! { [ -s "$deb" ] && dpkg-deb --info "$deb" >/dev/null 2>&1; }; then
	tmp="$(mktemp -d "$LAB_CACHE/debs/.dl.XXXXXX")"
	chown _apt "$tmp" 2>/dev/null || true
	log "apt-get download $pkg=$KLPSYM_LAB_VERSION (~860 MB)"
	lab_apt_download "$tmp" "$pkg=$KLPSYM_LAB_VERSION" || {
		log "download failed; refreshing the $LAB_SUITE apt lists and retrying"
		lab_apt_update
		lab_apt_download "$tmp" "$pkg=$KLPSYM_LAB_VERSION"
	} || die "apt-get download $pkg=$KLPSYM_LAB_VERSION failed (if the archive dropped this version, remove $KLPSYM_LAB_DIR: the next run takes the suite's newest kernel)"
	mv "$tmp"/*.deb "$deb"
	rmdir "$tmp"
fi
# One pass through the package (~2 minutes of xz) for whatever is missing: the vmlinux
# (/usr/lib/debug/boot/vmlinux-REL up to 6.x, /usr/lib/debug/lib/modules/REL/vmlinux since
# 7.x: whichever the package has) and a few modules' debug files, small and large, with
# .text.unlikely (fat), tables (crc7, nls), inlined arithmetic (tcp_bbr).
dbg_mods="$KLPSYM_LAB_DIR/debug-modules"
prefix="./usr/lib/debug/lib/modules/${KERNEL_RELEASE}"
want=()
[ -s "$out" ] || want+=('./usr/lib/debug/*vmlinux*')
[ -f "$dbg_mods/.done" ] || want+=("$prefix/kernel/fs/fat/fat.ko" "$prefix/kernel/fs/fat/vfat.ko"
	"$prefix/kernel/lib/crc7.ko" "$prefix/kernel/fs/nls/nls_iso8859-1.ko"
	"$prefix/kernel/net/ipv4/tcp_bbr.ko")
if [ "${#want[@]}" -gt 0 ]; then
	log "extracting ${#want[@]} paths (vmlinux, module debug files) from $(basename "$deb")"
	tmpx="$(mktemp -d "$KLPSYM_LAB_DIR/.dbg.XXXXXX")"
	# tar exits non-zero when a wanted path is not in the package (a module a build does not
	# have); what was found is extracted, and what must be there is checked below.
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmpx" --wildcards "${want[@]}" ||
		log "not every wanted path is in $(basename "$deb") (checked below)"
	if [ ! -s "$out" ]; then
		found="$(find "$tmpx" -type f \( -name "vmlinux-${KERNEL_RELEASE}" -o -path "*/${KERNEL_RELEASE}/vmlinux" \) | head -n1)"
		[ -n "$found" ] || die "no vmlinux of $KERNEL_RELEASE in $deb"
		mv "$found" "$out"
	fi
	if [ ! -f "$dbg_mods/.done" ]; then
		[ -d "$tmpx/$prefix/kernel" ] || die "no module debug files of $KERNEL_RELEASE in $deb"
		rm -rf "$dbg_mods"
		mkdir -p "$dbg_mods"
		mv "$tmpx/$prefix/kernel" "$dbg_mods/kernel"
		touch "$dbg_mods/.done"
	fi
	rm -rf "$tmpx"
fi
echo "VMLINUX_DBG=$out"
echo "DEBUG_MODULES_DIR=$dbg_mods"
echo "DBG_DEB=$deb"
