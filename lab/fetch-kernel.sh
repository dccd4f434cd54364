#!/usr/bin/env bash
# Fetch and unpack the newest kernel of a Debian suite for the real-kernel lab
# (KLPSYM_LAB_SUITE: bullseye 5.10, bookworm 6.1 (default), trixie 6.12, sid 7.x), for
# KLPSYM_LAB_ARCH amd64 (default) or arm64 (trixie and sid).
#
# Prints KEY=VALUE lines on stdout (logs go to stderr):
#   KLPSYM_LAB_DIR  $CACHE/<abi>            the per-ABI work folder ($CACHE/<abi>-arm64 for arm64)
#   KLPSYM_LAB_ABI  e.g. 6.1.0-57           Debian kernel ABI
#   KLPSYM_LAB_SUITE e.g. bookworm          the suite it came from
#   IMAGE_DEB IMAGE_SHA256                  the image package and its SHA-256 (cache key)
#   KLPSYM_LAB_VERSION e.g. 6.1.192-3       Debian package version
#   KERNEL_RELEASE  e.g. 6.1.0-57-amd64     uname -r of the booted kernel
#   VMLINUZ VMLINUX MODULES_DIR HEADERS_DIR SYSTEM_MAP CONFIG
#   BOOT_KERNEL     what run-vm.sh boots: amd64 the ELF vmlinux (= VMLINUX), arm64 the raw
#                   Image ($KLPSYM_LAB_DIR/Image: the packaged file itself when it is one,
#                   else decompressed from it). VMLINUX is empty for arm64 (no ELF in the image).
#   KBUILD_DIR      the unpacked linux-kbuild (always the amd64 build: its tools run here)
#
# Environment:
#   KLPSYM_LAB_CACHE   cache folder (default /var/cache/klpsym-lab); created if missing
#   KLPSYM_LAB_ABI     use this ABI instead of discovering the newest one
#   KLPSYM_LAB_UNSIGNED=1  take linux-image-<abi>-amd64-unsigned instead of the signed
#                      linux-image-<abi>-amd64 (same kernel, modules without signatures)
#   KLPSYM_LAB_SUITE   the Debian suite (default bookworm); its packages come from a private
#                      apt configuration in $CACHE/apt/<suite> (see lib.sh)
#   KLPSYM_LAB_ARCH    amd64 (default) or arm64 ($CACHE/apt/<suite>-arm64)
#   KLPSYM_LAB_FLAVOUR the flavour (default the architecture's own; e.g. cloud-amd64): its
#                      kernel gets the folder $CACHE/<abi>-<flavour>
#   KLPSYM_LAB_APT_UPDATE=1  refresh the suite's apt lists before discovering the ABI
#
# Idempotent: .debs are kept in $CACHE/debs and reused, the unpacked tree and the extracted
# vmlinux are only rebuilt when missing. Never installs the kernel system-wide.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DOWNLOAD_FAILED=75
# binutils (readelf) and llvm (llvm-dwarfdump): the independent DWARF readers of the lab tests;
# rpm (rpmbuild): the package tests build RPMs of the lab kernel.
HOST_PACKAGES=(qemu-system-x86 busybox-static cpio xz-utils zstd python3 libelf1 zlib1g gcc libc6-dev make kmod binutils llvm rpm)

# discover_abi: the ABI that linux-image-<arch> currently depends on in the suite, e.g.
# "6.1.0-57" or "6.12.117+deb13" (the same string for amd64 and arm64). apt-cache takes over
# a second (no binary package cache), so the answer is memoised against a fingerprint of the
# suite's lists: it changes only with them.
discover_abi() {
	local memo="$LAB_APT_DIR/abi-discovery$LAB_DIR_SUFFIX" stamp abi
	lab_apt_fresh
	stamp="$(find "$LAB_APT_DIR/lists" -maxdepth 1 -name '*Packages*' -printf '%f %s %T@\n' 2>/dev/null |
		sort | md5sum | cut -d' ' -f1)"
	if [ -f "$memo" ] && [ "$(head -n1 "$memo")" = "$stamp" ]; then
		sed -n 2p "$memo"
		return 0
	fi
	abi="$({ lab_apt_cache depends "linux-image-$LAB_FLAVOUR" 2>/dev/null || true; } |
		sed -n "s/^ *Depends: linux-image-\\([0-9][^ ]*\\)-$LAB_FLAVOUR\$/\\1/p" | head -n1)"
	if [ -n "$abi" ]; then
		printf '%s\n%s\n' "$stamp" "$abi" >"$memo.$$" && mv "$memo.$$" "$memo"
	fi
	printf '%s\n' "$abi"
}

# pkg_field PKG FIELD: a control field of the candidate version of PKG ("" if unknown).
pkg_field() {
	{ lab_apt_cache show --no-all-versions "$1" 2>/dev/null || true; } | sed -n "s/^$2: //p" | head -n1
}

# fetch_deb PKG VERSION [ARCH]: make sure $CACHE/debs holds PKG at VERSION (of ARCH, default
# the kernel's); print its path.
fetch_deb() {
	local pkg="$1" ver="$2" arch="${3:-$LAB_ARCH}" file tmp spec
	file="$LAB_CACHE/debs/${pkg}_${ver//:/%3a}_$arch.deb"
	spec="$pkg=$ver"
	[ "$arch" = "$LAB_ARCH" ] || spec="$pkg:$arch=$ver"
	if [ -s "$file" ] && dpkg-deb --info "$file" >/dev/null 2>&1; then
		log "reusing $(basename "$file")"
	else
		tmp="$(mktemp -d "$LAB_CACHE/debs/.dl.XXXXXX")"
		# apt's _apt sandbox user must be able to write the folder, else apt warns.
		chown _apt "$tmp" 2>/dev/null || true
		log "apt-get download $spec ($LAB_SUITE)"
		if ! lab_apt_download "$tmp" "$spec"; then
			rm -rf "$tmp"
			return 1
		fi
		mv "$tmp"/*.deb "$file" && rm -rf "$tmp"
	fi
	printf '%s\n' "$file"
}

# extract_vmlinux VMLINUZ OUT: the uncompressed ELF vmlinux in a bzImage's payload (XZ up to
# 6.1, zstd in Debian's 6.12 and 7.x). The boot protocol's setup header says where the
# payload is: setup_sects (byte 0x1f1; the protected-mode code starts at (setup_sects+1)*512),
# payload_offset (0x248) and payload_length (0x24c), both relative to that start. The kernel's
# build appends the uncompressed size (4 bytes) after the compressed stream: left out, so the
# decompressor reads all it is given.
extract_vmlinux() {
	local in="$1" out="$2" setup_sects off len magic
	le32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
	payload() { dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" bs=1M status=none; }
	setup_sects="$(od -An -tu1 -j $((0x1f1)) -N1 "$in" | tr -d ' ')"
	[ "$setup_sects" != 0 ] || setup_sects=4
	off=$(((setup_sects + 1) * 512 + $(le32 "$in" $((0x248)))))
	len="$(le32 "$in" $((0x24c)))"
	magic="$(od -An -tx1 -j "$off" -N4 "$in" | tr -d ' \n')"
	case "$magic" in
	fd377a58) # XZ; --single-stream ignores the size appended after the stream
		payload "$in" "$off" "$((len - 4))" | xz -dc --single-stream >"$out.tmp" ;;
	28b52ffd) # zstd
		payload "$in" "$off" "$((len - 4))" | zstd -dcq >"$out.tmp" ;;
	*) die "$in: payload at offset $off starts with $magic, neither XZ nor zstd" ;;
	esac
	[ "$(head -c4 "$out.tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] ||
		die "$in: the payload did not decompress to an ELF vmlinux"
	mv "$out.tmp" "$out"
	log "extracted vmlinux from the $magic payload at offset $off of $(basename "$in")"
}

# extract_arm64_image VMLINUZ OUT: a raw arm64 Image that QEMU's -kernel boots. Debian's
# trixie arm64 package ships the raw Image (magic "ARMd" at 0x38, an EFI stub header "MZ"
# at 0): OUT is then a symlink to it. A gzip/zstd/xz file or an EFI zboot image ("MZ" then
# "zimg" at 4: payload offset and size at 8 and 12, compression name at 0x18) is
# decompressed into OUT.
extract_arm64_image() {
	local in="$1" out="$2" head4 zimg off len comp
	rm -f "$out" "$out.tmp"
	head4="$(od -An -tx1 -N4 "$in" | tr -d ' \n')"
	if [ "$(od -An -c -j $((0x38)) -N4 "$in" | tr -d ' \n')" = ARMd ]; then
		ln -sr "$in" "$out"
		log "$(basename "$in") is a raw arm64 Image: booted as it is"
		return 0
	fi
	zimg="$(od -An -c -j4 -N4 "$in" | tr -d ' \n')"
	case "$head4" in
	1f8b*) gzip -dc <"$in" >"$out.tmp" ;;
	28b52ffd) zstd -dcq <"$in" >"$out.tmp" ;;
	fd377a58) xz -dc <"$in" >"$out.tmp" ;;
	4d5a*)
		[ "$zimg" = zimg ] || die "$in: an EFI image that is neither a raw Image nor a zboot image"
		off="$(od -An -tu4 -j8 -N4 "$in" | tr -d ' ')"
		len="$(od -An -tu4 -j12 -N4 "$in" | tr -d ' ')"
		comp="$(dd if="$in" bs=1 skip=$((0x18)) count=32 status=none | tr -d '\0')"
		log "$(basename "$in") is an EFI zboot image: $comp payload of $len bytes at $off"
		case "$comp" in
		gzip) dd if="$in" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=1M status=none | gzip -dc >"$out.tmp" ;;
		zstd*) dd if="$in" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=1M status=none | zstd -dcq >"$out.tmp" ;;
		xzkern | xz) dd if="$in" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=1M status=none | xz -dc --single-stream >"$out.tmp" ;;
		*) die "$in: zboot compression '$comp' not supported" ;;
		esac
		;;
	*) die "$in: starts with $head4: not an arm64 Image, gzip, zstd, xz or zboot file" ;;
	esac
	[ "$(od -An -c -j $((0x38)) -N4 "$out.tmp" | tr -d ' \n')" = ARMd ] ||
		die "$in: did not decompress to an arm64 Image (no ARMd magic)"
	mv "$out.tmp" "$out"
	log "decompressed $(basename "$in") to $out"
}

# kernel_ready DIR: the unpacked tree and the file it boots are there.
kernel_ready() {
	if [ "$LAB_ARCH" = amd64 ]; then
		[ -f "$1/.unpacked" ] && [ -s "$1/vmlinux" ]
	else
		[ -f "$1/.unpacked" ] && [ -s "$1/Image" ]
	fi
}

# unpack ABI VERSION: download and unpack the four packages into $CACHE/<abi>/root
# ($CACHE/<abi>-arm64/root for arm64).
unpack() {
	local abi="$1" ver="$2" release="$1-$LAB_FLAVOUR" dir="$LAB_CACHE/$1$LAB_DIR_SUFFIX"
	local image_pkg="linux-image-$release" hdr_pkg="linux-headers-$release"
	local common_pkg kbuild_pkg kbuild_ver debs=() deps
	[ "${KLPSYM_LAB_UNSIGNED:-0}" = 1 ] && image_pkg="$image_pkg-unsigned"

	if kernel_ready "$dir"; then
		return 0
	fi
	deps="$(pkg_field "$hdr_pkg" Depends)"
	common_pkg="$(grep -oF "linux-headers-$abi-common" <<<"$deps" | head -n1 || true)"
	kbuild_pkg="$(grep -oE 'linux-kbuild-[0-9][^ ,]*' <<<"$deps" | head -n1 || true)"
	[ -n "$common_pkg" ] && [ -n "$kbuild_pkg" ] ||
		die "cannot find -common/kbuild dependencies of $hdr_pkg (Depends: '$deps')"
	# The headers require kbuild >= their own version: take exactly that version when the
	# archive has it (it is built from the same source), else the candidate. Always the amd64
	# build: its programs (fixdep, modpost, objtool) run on this host, also for arm64 kernels.
	kbuild_ver="$ver"
	if ! lab_apt_cache show "$kbuild_pkg:amd64=$ver" >/dev/null 2>&1; then
		kbuild_ver="$(pkg_field "$kbuild_pkg:amd64" Version)"
		log "$kbuild_pkg $ver not in the archive, using $kbuild_ver"
	fi

	# Since 7.x linux-image-<abi>-<flavour> is a metapackage: the image is in linux-binary-*,
	# the config and System.map in linux-base-*, the modules in linux-modules-*, all of the
	# same version (and named in its Depends).
	local split=() p abi_re
	abi_re="$(sed 's/[].+*?^$[]/\\&/g' <<<"$abi")"
	for p in $(pkg_field "$image_pkg" Depends | grep -oE "linux-(binary|base|modules)-$abi_re-$LAB_FLAVOUR" || true); do
		split+=("$p=$ver")
	done

	mkdir -p "$LAB_CACHE/debs"
	local spec pkg pver f
	for spec in "$image_pkg=$ver" "${split[@]}" "$hdr_pkg=$ver" "$common_pkg=$ver"; do
		pkg="${spec%%=*}"
		pver="${spec#*=}"
		f="$(fetch_deb "$pkg" "$pver")" || return "$DOWNLOAD_FAILED"
		debs+=("$f")
	done
	f="$(fetch_deb "$kbuild_pkg" "$kbuild_ver" amd64)" || return "$DOWNLOAD_FAILED"
	debs+=("$f")

	local t0
	t0="$(now)"
	rm -rf "$dir/root.tmp"
	mkdir -p "$dir/root.tmp"
	local d
	for d in "${debs[@]}"; do
		log "dpkg -x $(basename "$d")"
		dpkg -x "$d" "$dir/root.tmp" || die "dpkg -x $d failed"
	done
	# Since trixie the packages install modules in /usr/lib/modules (merged /usr): give the
	# unpacked tree the /lib -> usr/lib link of a merged-/usr system, so that one path fits all.
	if [ ! -e "$dir/root.tmp/lib" ] && [ -d "$dir/root.tmp/usr/lib/modules" ]; then
		ln -s usr/lib "$dir/root.tmp/lib"
	fi
	fix_headers_makefile "$dir/root.tmp" "$dir/root" "$abi"
	rm -rf "$dir/root"
	mv "$dir/root.tmp" "$dir/root"
	if [ "$LAB_ARCH" = amd64 ]; then
		extract_vmlinux "$(kernel_file "$dir/root" vmlinuz "$release")" "$dir/vmlinux"
	else
		extract_arm64_image "$(kernel_file "$dir/root" vmlinuz "$release")" "$dir/Image"
	fi
	printf '%s\n' "$ver" >"$dir/.unpacked"
	log "unpacked $abi in $(elapsed "$t0")s"
}

# kernel_file ROOT NAME RELEASE: where the unpacked packages put the kernel's NAME (vmlinuz,
# config, System.map): /boot/NAME-RELEASE, or /usr/lib/modules/RELEASE/NAME since 7.x.
kernel_file() {
	local root="$1" name="$2" release="$3"
	if [ -e "$root/boot/$name-$release" ]; then
		printf '%s\n' "$root/boot/$name-$release"
	else
		printf '%s\n' "$root/usr/lib/modules/$release/$name"
	fi
}

# The package that holds the image file: the image package itself, or linux-binary-* (7.x).
image_package() {
	local abi="$1" dir="$2" release="$1-$LAB_FLAVOUR"
	if [ -e "$dir/root/boot/vmlinuz-$release" ]; then
		printf 'linux-image-%s%s\n' "$release" "$([ "${KLPSYM_LAB_UNSIGNED:-0}" = 1 ] && echo -unsigned)"
	else
		printf 'linux-binary-%s\n' "$release"
	fi
}

# The -<flavour> headers Makefile names installed paths: it includes the -common Makefile by its
# absolute path (/usr/src/linux-headers-<abi>-common/Makefile) and, since 7.x, sets
# KBUILD_OUTPUT=/usr/src/linux-headers-<abi>-<flavour>. Point both at the unpacked copies so that
# `make -C $HEADERS_DIR M=... modules` works without a system-wide install.
fix_headers_makefile() {
	local tmp_root="$1" final_root="$2" abi="$3"
	local mk="$tmp_root/usr/src/linux-headers-$abi-$LAB_FLAVOUR/Makefile"
	local common="/usr/src/linux-headers-$abi-common"
	[ -f "$mk" ] || die "headers Makefile missing: $mk"
	[ -d "$tmp_root$common" ] || die "unpacked -common headers missing: $tmp_root$common"
	grep -qF "$common" "$mk" || die "headers Makefile does not mention $common; layout changed?"
	local prefix="/usr/src/linux-headers-$abi-" re
	# A basic regular expression: only . [ ] * ^ $ and the # delimiter are special ("+" is not).
	re="$(sed 's/[].*^$#[]/\\&/g' <<<"$prefix")"
	sed -i "s#\([ =]\)$re#\1$final_root$prefix#g" "$mk"
	log "headers Makefile now names $final_root$prefix{common,$LAB_FLAVOUR}"
}

# The package ships no modules.dep (its postinst runs depmod on the installed system):
# generate it in the unpacked tree so that module dependencies can be resolved.
make_modules_dep() {
	local root="$1" release="$2"
	[ -s "$root/lib/modules/$release/modules.dep" ] && return 0
	log "depmod -b $root $release"
	depmod -b "$root" "$release" || die "depmod for $release failed"
}

main() {
	local abi ver t0
	t0="$(now)"
	ensure_packages "${HOST_PACKAGES[@]}"
	[ "${KLPSYM_LAB_APT_UPDATE:-0}" = 1 ] && lab_apt_update

	abi="${KLPSYM_LAB_ABI:-}"
	if [ -z "$abi" ]; then
		abi="$(discover_abi)"
		if [ -z "$abi" ]; then
			lab_apt_update
			abi="$(discover_abi)"
		fi
		[ -n "$abi" ] || die "cannot discover the kernel ABI: 'apt-cache depends linux-image-$LAB_FLAVOUR' in $LAB_SUITE names no linux-image-<abi>-$LAB_FLAVOUR"
	fi
	local dir="$LAB_CACHE/$abi$LAB_DIR_SUFFIX"
	if kernel_ready "$dir"; then
		ver="$(cat "$dir/.unpacked")"
	else
		ver="$(pkg_field "linux-image-$abi-$LAB_FLAVOUR" Version)"
		if [ -z "$ver" ]; then
			lab_apt_update
			ver="$(pkg_field "linux-image-$abi-$LAB_FLAVOUR" Version)"
		fi
		[ -n "$ver" ] || die "linux-image-$abi-$LAB_FLAVOUR is not in the apt lists"
		local rc
		set +e
		with_lock "$LAB_CACHE/.lock" unpack "$abi" "$ver"
		rc=$?
		set -e
		[ "$rc" = 0 ] || [ "$rc" = "$DOWNLOAD_FAILED" ] || die "unpacking kernel $abi failed (rc=$rc)"
		if [ "$rc" = "$DOWNLOAD_FAILED" ]; then
			# Stale lists name a version the archive already dropped: refresh once, retry.
			[ "$LAB_APT_UPDATED" = 0 ] || die "download of kernel $abi ($ver) failed"
			lab_apt_update
			[ -n "${KLPSYM_LAB_ABI:-}" ] || abi="$(discover_abi)"
			dir="$LAB_CACHE/$abi$LAB_DIR_SUFFIX"
			ver="$(pkg_field "linux-image-$abi-$LAB_FLAVOUR" Version)"
			set +e
			with_lock "$LAB_CACHE/.lock" unpack "$abi" "$ver"
			rc=$?
			set -e
			[ "$rc" = 0 ] || die "download or unpacking of kernel $abi ($ver) failed"
		fi
	fi

	local release="$abi-$LAB_FLAVOUR" root="$dir/root"
	if [ ! -s "$root/lib/modules/$release/modules.dep" ]; then
		with_lock "$LAB_CACHE/.lock" make_modules_dep "$root" "$release"
	fi
	local hdr="$root/usr/src/linux-headers-$release"
	local vmlinuz config sysmap
	vmlinuz="$(kernel_file "$root" vmlinuz "$release")"
	config="$(kernel_file "$root" config "$release")"
	sysmap="$(kernel_file "$root" System.map "$release")"
	local vmlinux="" boot="$dir/Image" kbuild
	if [ "$LAB_ARCH" = amd64 ]; then
		vmlinux="$dir/vmlinux"
		boot="$vmlinux"
	fi
	kbuild="$(find "$root/usr/lib" -maxdepth 1 -name 'linux-kbuild-*' | head -n1)"
	for f in "$vmlinuz" "$config" "$boot" "$root/lib/modules/$release" "$hdr/Makefile" "$kbuild"; do
		[ -e "$f" ] || die "expected $f after unpacking; remove $dir and retry"
	done
	# The image package itself, read in place by the package tests (kept from the unpacking;
	# fetched again only if it was removed).
	local image_deb
	local image_pkg
	image_pkg="$(image_package "$abi" "$dir")"
	image_deb="$(fetch_deb "$image_pkg" "$ver")" || die "download of $image_pkg ($ver) failed"
	# What captures and oracle builds are keyed by: the image package's content.
	local image_sha
	if [ -f "$dir/.image-sha256" ] && [ "$dir/.image-sha256" -nt "$image_deb" ]; then
		image_sha="$(cat "$dir/.image-sha256")"
	else
		image_sha="$(sha256sum "$image_deb" | cut -d' ' -f1)"
		printf '%s\n' "$image_sha" >"$dir/.image-sha256"
	fi
	log "kernel $release ($ver) ready in $(elapsed "$t0")s"
	cat <<EOF
KLPSYM_LAB_DIR=$dir
KLPSYM_LAB_ABI=$abi
KLPSYM_LAB_SUITE=$LAB_SUITE
KLPSYM_LAB_FLAVOUR=$LAB_FLAVOUR
KLPSYM_LAB_KERNEL_ID=$LAB_KERNEL_ID
KLPSYM_LAB_VERSION=$ver
KERNEL_RELEASE=$release
VMLINUZ=$vmlinuz
VMLINUX=$vmlinux
BOOT_KERNEL=$boot
MODULES_DIR=$root/lib/modules/$release
HEADERS_DIR=$hdr
KBUILD_DIR=$kbuild
SYSTEM_MAP=$sysmap
CONFIG=$config
IMAGE_DEB=$image_deb
IMAGE_SHA256=$image_sha
EOF
}

main "$@"
