#!/usr/bin/env bash
# Fetch the unstripped vmlinux (with .symtab) of the lab kernel from Debian's -dbg package.
#
# The -dbg package is ~0.9-1.2 GB; only its vmlinux is extracted (to $KLPSYM_LAB_DIR/vmlinux-dbg),
# the .deb is kept in $CACHE/debs like the others (the package tests read it in place).
# Prints VMLINUX_DBG=<path> and DBG_DEB=<path>.
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
if [ ! -s "$out" ]; then
	# The vmlinux is /usr/lib/debug/boot/vmlinux-REL up to 6.x and
	# /usr/lib/debug/lib/modules/REL/vmlinux since 7.x: take whichever the package has.
	log "extracting vmlinux from $(basename "$deb")"
	tmpx="$(mktemp -d "$KLPSYM_LAB_DIR/.dbg.XXXXXX")"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmpx" --wildcards './usr/lib/debug/*vmlinux*'
	found="$(find "$tmpx" -type f \( -name "vmlinux-${KERNEL_RELEASE}" -o -path "*/${KERNEL_RELEASE}/vmlinux" \) | head -n1)"
	[ -n "$found" ] || die "no vmlinux of $KERNEL_RELEASE in $deb"
	mv "$found" "$out"
	rm -rf "$tmpx"
fi
echo "VMLINUX_DBG=$out"
echo "DBG_DEB=$deb"
