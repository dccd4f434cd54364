#!/usr/bin/env bash
# The kernel's own compiler for building modules against a lab kernel's headers.
#
# Usage: lab/toolchain.sh CONFIG          (CONFIG: the kernel's config file)
#
# The compiler is the one CONFIG_CC_VERSION_TEXT names (gcc-10 for bullseye's 5.10, gcc-12
# for bookworm's 6.1, x86_64-linux-gnu-gcc-14 for trixie's 6.12...). When the host has that exact compiler and the
# kernel comes from the host's suite, modules are built on the host. Otherwise they are built
# in a chroot of the kernel's suite made with debootstrap, holding that suite's compiler, make,
# libelf and pahole: a module built with another compiler or with the kernel's flags
# overridden is not the module users build.
#
# Prints TOOLCHAIN_CC=<gcc-N> and TOOLCHAIN_ROOT=<chroot folder, empty for the host>.
# The chroot is cached in $CACHE/chroot/<suite> and made again only when its recipe (suite,
# mirror, package list) changes; its gcc version is recorded in .made and compared with the
# kernel's.
#
# arm64 kernels (CONFIG_CC_VERSION_TEXT "aarch64-linux-gnu-gcc-N ..."): the same chroot of the
# suite, with the suite's cross compiler added to it (gcc-N-aarch64-linux-gnu and
# binutils-aarch64-linux-gnu, apt-get install in the chroot). The addition has its own stamp,
# .made-arm64 (its recipe, then the cross gcc's version), so the chroot's recipe and cache
# key stay those of the amd64 builds. The headers' .kernelvariables set ARCH=arm64 and
# CROSS_COMPILE=aarch64-linux-gnu-: `make -C HEADERS M=...` needs no extra argument.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/chroot-packages.sh"

config="${1:?usage: toolchain.sh CONFIG}"
[ -f "$config" ] || die "kernel config not found: $config"
# The first word of CONFIG_CC_VERSION_TEXT is the compiler command: gcc-10, gcc-12, or with the
# target triplet (x86_64-linux-gnu-gcc-14) since trixie; the package is gcc-N either way.
cc="$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*\) .*/\1/p' "$config")"
[[ "$cc" =~ ^([a-z0-9_]+-linux-gnu-)?(gcc(-[0-9]+)?)$ ]] ||
	die "$config: CONFIG_CC_VERSION_TEXT names no gcc ('$cc'); only gcc-built kernels are supported"
cc_pkg="${BASH_REMATCH[2]}"
cross="${BASH_REMATCH[1]}"

host_suite="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null || true)"
# A backports kernel is built with its base suite's compiler (bookworm-backports: gcc-12).
base_suite="${LAB_SUITE%-backports}"
if [ "$cross" != aarch64-linux-gnu- ] && [ "$base_suite" = "$host_suite" ] && command -v "$cc" >/dev/null 2>&1; then
	# pahole: kbuild makes module BTF when the headers ship a BTF vmlinux (6.12 does).
	ensure_packages dwarves
	printf 'TOOLCHAIN_CC=%s\nTOOLCHAIN_ROOT=\n' "$cc"
	exit 0
fi

root="$LAB_CACHE/chroot/$base_suite"
# libelf-dev pulls the suite's libelf (libelf1 or libelf1t64); dwarves: kbuild runs pahole for
# module BTF when the headers ship a BTF vmlinux; xz-utils: compressed module tooling.
packages="$cc_pkg,make,libc6-dev,libelf-dev,dwarves,xz-utils,kmod"
# What makes the chroot (bump the recipe number when make_chroot changes what it builds).
recipe="recipe=1 suite=$base_suite mirror=$LAB_MIRROR variant=minbase packages=$packages"

make_chroot() {
	if [ -f "$root/.made" ] && [ "$(head -n1 "$root/.made")" = "$recipe" ]; then
		return 0
	fi
	ensure_packages debootstrap
	local t0
	t0="$(now)"
	rm -rf "$root.tmp"
	mkdir -p "$(dirname "$root")"
	log "debootstrap $base_suite with $packages (a few minutes, ~0.5 GB)"
	debootstrap --variant=minbase --include="$packages" "$base_suite" "$root.tmp" "$LAB_MIRROR" \
		>"$LAB_CACHE/chroot/$base_suite.debootstrap.log" 2>&1 ||
		die "debootstrap of $base_suite failed (log: $LAB_CACHE/chroot/$base_suite.debootstrap.log)"
	chroot "$root.tmp" "$cc" --version >/dev/null || die "the $base_suite chroot has no working $cc"
	rm -rf "$root.tmp/var/cache/apt/archives/"*.deb
	{
		printf '%s\n' "$recipe"
		chroot "$root.tmp" "$cc" --version | head -n1
	} >"$root.tmp/.made"
	rm -rf "$root"
	mv "$root.tmp" "$root"
	log "chroot $root ready in $(elapsed "$t0")s: $(sed -n 2p "$root/.made")"
}

# add_arm64_cross: the suite's aarch64 cross compiler in the chroot (stamp .made-arm64).
cross_packages="$cc_pkg-aarch64-linux-gnu binutils-aarch64-linux-gnu"
cross_recipe="arm64-recipe=1 packages=$cross_packages"
add_arm64_cross() {
	# shellcheck disable=SC2086 # one package per word
	chroot_add_packages "$root" .made-arm64 "$cross_recipe" "$cc" \
		"$LAB_CACHE/chroot/$base_suite-arm64.install.log" "cross compiler" $cross_packages
}

with_lock "$LAB_CACHE/chroot/.lock" make_chroot
made="$root/.made"
if [ "$cross" = aarch64-linux-gnu- ]; then
	with_lock "$LAB_CACHE/chroot/.lock" add_arm64_cross
	made="$root/.made-arm64"
fi
# The suite's compiler may have moved past the one that built the kernel (sid does): say so.
want="$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$config")"
have="$(sed -n 2p "$made")"
[ "$want" = "$have" ] || log "note: the $base_suite chroot has '$have', the kernel was built by '$want'"
printf 'TOOLCHAIN_CC=%s\nTOOLCHAIN_ROOT=%s\n' "$cc" "$root"
