#!/usr/bin/env bash
# A kernel built by the kernel's own klp-build, and livepatch modules klp-build made from
# the patches in lab/klp-build/patches/: the upstream tool's real output for klpsym to read.
#
# Usage: lab/klp-build/build.sh
#
# From sid's newest linux-source-7.x (the upstream tree plus Debian's patches), in the lab's
# sid chroot with its own gcc, a small x86_64 kernel whose config (config.sh: tinyconfig plus
# what livepatch, klp-build and a serial-console guest need) is made in the tree. Then
# `scripts/livepatch/klp-build` (which builds the original kernel, the patched one, diffs
# their objects with `objtool klp diff` and links the module) runs on:
#   1. a-type-show, c-lowmem-reserve and d-clones together: one module,
#      livepatch-vmlinux.ko: a static name with several definitions (klp-build chooses the
#      position), a function reading static data, compiler clones;
#   2. b-kobject-example: a function of a module (samples/kobject), its own module;
#   3. e4-notrace-refused-by-kernel: a function without an ftrace site (kernel/trace/),
#      which klp-build builds and the kernel refuses at enable;
#   4. e1-lib-refused: a file klp-build refuses to patch (lib/), no module.
#
# Then the original kernel boots under QEMU and loads each module (guest.sh); the kernel's
# lines, verdicts and what the patched functions show are recorded in oracle/<step>.txt.
# Debian's own build of the same release (the lab's sid kernel: another configuration, so
# another `struct module`) loads the same files as a cross check: oracle-debian/<step>.txt.
#
# Everything is cached in $LAB_CACHE/klp-build/<key>/, key = the source package's SHA-256,
# config.sh, the patches, the build recipe and the chroot's gcc: a second run builds nothing;
# each boot is keyed by the guest side's bytes (and Debian's image). Prints KEY=VALUE: KLP_BUILD_DIR (the outputs:
# vmlinux of the original build, the modules, klp-build's logs and diff log, timings.txt,
# oracle/, oracle-debian/).
# sid's private apt configuration (lib.sh makes it for KLPSYM_LAB_SUITE when sourced).
export KLPSYM_LAB_SUITE=sid KLPSYM_LAB_ARCH=amd64
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../chroot-packages.sh"

HERE="$LAB_SRC_DIR/klp-build"
root="$LAB_CACHE/chroot/sid"

# The chroot's extra packages for a kernel build and klp-build (gawk: fix-patch-lines needs
# gawk's match(); patchutils: recountdiff; libxxhash-dev: objtool's klp subcommands).
klp_packages="gcc make bc flex bison libelf-dev libxxhash-dev gawk patch patchutils diffutils pkgconf xz-utils binutils cpio"
klp_recipe="klp-recipe=1 packages=$klp_packages"
add_klp_packages() {
	# shellcheck disable=SC2086 # one package per word
	chroot_add_packages "$root" .made-klp "$klp_recipe" gcc \
		"$LAB_CACHE/chroot/sid-klp.install.log" "klp-build's tools" $klp_packages
}

[ -f "$root/.made" ] || die "no sid chroot in $root: run the sid lab kernel first (KLPSYM_LAB_SUITE=sid lab/lab-kernel.sh)"
with_lock "$LAB_CACHE/chroot/.lock" add_klp_packages

# The newest linux-source-7.x of sid.
pkg="$(lab_apt_cache pkgnames linux-source- | grep -E '^linux-source-[0-9]+\.[0-9]+$' | sort -V | tail -n1)"
[ -n "$pkg" ] || die "sid lists no linux-source-X.Y package"
ver="$(lab_apt_cache show "$pkg" | sed -n 's/^Version: //p' | sort -V | tail -n1)"
debs="$LAB_CACHE/debs"
mkdir -p "$debs"
deb="$debs/${pkg}_${ver}_all.deb"
if [ ! -f "$deb" ]; then
	log "downloading $pkg $ver"
	lab_apt_download "$debs" "$pkg=$ver"
fi
[ -f "$deb" ] || die "apt-get download left no $deb"
gcc_ver="$(sed -n 2p "$root/.made-klp")"
# What makes the build (bump the recipe when the build steps below change what they make).
recipe="klp-build-recipe=1"
key="$({
	printf '%s\n' "$recipe"
	sha256sum "$deb" | cut -d' ' -f1
	(cd "$HERE" && sha256sum config.sh patches/*)
	printf '%s\n' "$gcc_ver"
} | sha256sum | cut -c1-32)"
out="$LAB_CACHE/klp-build/$key"

# record KERNEL DEST EXTRA WHAT: KERNEL boots under QEMU and loads every module (guest.sh);
# the record is kept in DEST, keyed by the guest side's bytes (guest.sh, the lab's VM tools)
# and EXTRA (what identifies KERNEL beyond this build).
record() {
	local kernel="$1" dest="$2" extra="$3" what="$4" bkey t f
	bkey="$({
		(cd "$LAB_SRC_DIR" && md5sum run-vm.sh build-helpers.sh finit.c shmout.c guest/* klp-build/guest.sh)
		dpkg-query -W -f '${Version}\n' busybox-static qemu-system-x86 2>/dev/null || true
		printf '%s\n' "$extra"
	} | md5sum | cut -c1-32)"
	if [ -f "$dest/.key" ] && [ "$(cat "$dest/.key")" = "$bkey" ]; then
		log "$what: record up to date in $dest"
		return 0
	fi
	t="$(now)"
	log "booting $what (boot key $bkey)"
	rm -rf "$dest.new"
	"$LAB_SRC_DIR/run-vm.sh" --kernel "$kernel" --script "$HERE/guest.sh" --mem 1G \
		--add "$out/livepatch-vmlinux.ko:/lab/klp/" --add "$out/livepatch-kobject.ko:/lab/klp/" \
		--add "$out/livepatch-notrace.ko:/lab/klp/" --add "$out/modules:/lab/klp/" \
		--out "$dest.new" </dev/null || die "the VM run of $what failed"
	# A record without every step's load result is never kept (the guest's script may have
	# stopped early).
	for f in vmlinux kobject notrace; do
		grep -q '^rc=' "$dest.new/$f.txt" 2>/dev/null ||
			die "$what recorded no load for step $f (see $dest.new/console.log)"
	done
	printf '%s\n' "$bkey" >"$dest.new/.key"
	rm -rf "$dest"
	mv "$dest.new" "$dest"
	log "$what: recorded in $(elapsed "$t")s"
}

# boot: the original kernel klp-build made loads its modules (oracle/); then, as a cross check
# the kernel itself answers, Debian's own build of sid's kernel (the lab's sid kernel, another
# configuration of the same release) loads the same files (oracle-debian/, with lab.env: the
# path of that kernel's lab.env, whose files the test checks against).
boot() {
	record "$out/vmlinux" "$out/oracle" "" "the klp-build kernel"
	load_kernel_env
	record "$BOOT_KERNEL" "$out/oracle-debian" "$IMAGE_SHA256" "Debian's $KERNEL_RELEASE"
	[ -f "$KLPSYM_LAB_DIR/lab.env" ] ||
		die "no $KLPSYM_LAB_DIR/lab.env: run the sid lab kernel first (KLPSYM_LAB_SUITE=sid lab/lab-kernel.sh)"
	printf '%s\n' "$KLPSYM_LAB_DIR/lab.env" >"$out/oracle-debian/lab.env.path"
}

if [ -f "$out/.done" ]; then
	log "klp-build outputs up to date in $out"
	boot
	printf 'KLP_BUILD_DIR=%s\n' "$out"
	exit 0
fi

# One build at a time (the work tree is shared); a second run waits, then finds it done.
if [ -z "${KLP_BUILD_LOCKED:-}" ]; then
	mkdir -p "$LAB_CACHE/klp-build"
	export KLP_BUILD_LOCKED=1
	with_lock "$LAB_CACHE/klp-build/.lock" bash "${BASH_SOURCE[0]}"
	exit 0
fi
work="$LAB_CACHE/klp-build/work"
# The multi-GB tree goes, whatever happens.
trap 'rm -rf "$work"' EXIT
rm -rf "$work" "$out.tmp"
mkdir -p "$work" "$out.tmp"
t0="$(now)"
log "unpacking $pkg $ver"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards './usr/src/linux-source-*.tar.xz'
tarball="$(ls "$work"/usr/src/linux-source-*.tar.xz)"
tar -xJf "$tarball" -C "$work"
rm -rf "$work/usr"
src="$(ls -d "$work"/linux-source-*)"
printf 'unpack %s\n' "$(elapsed "$t0")" >"$out.tmp/timings.txt"
cp -r "$HERE/patches" "$work/patches"
cp "$HERE/config.sh" "$work/config.sh"

# in_tree CMD: run the shell command CMD in the tree, in the chroot, with reproducible
# build stamps and both cores (klp-build runs make itself).
in_tree() {
	in_toolchain "$root" /bin/bash -c "cd '$src' && export KBUILD_BUILD_TIMESTAMP='2026-01-01' KBUILD_BUILD_USER=klp KBUILD_BUILD_HOST=lab && $1"
}

step() {
	local name="$1" t
	shift
	t="$(now)"
	log "klp-build: $name"
	set +e
	in_tree "$*" >"$out.tmp/$name.log" 2>&1
	local rc=$?
	set -e
	printf '%s %s rc=%s\n' "$name" "$(elapsed "$t")" "$rc" >>"$out.tmp/timings.txt"
	return "$rc"
}

step config "sh ../config.sh" || die "config failed (log: $out.tmp/config.log)"
cp "$src/.config" "$out.tmp/config"
# 1. The vmlinux patches: klp-build builds the original kernel, then the patched one.
step vmlinux "./scripts/livepatch/klp-build -T -j2 -o livepatch-vmlinux.ko ../patches/a-type-show.patch ../patches/c-lowmem-reserve.patch ../patches/d-clones.patch" ||
	die "klp-build of the vmlinux patches failed (log: $out.tmp/vmlinux.log)"
cp "$src/livepatch-vmlinux.ko" "$src/klp-tmp/1-orig/vmlinux" "$out.tmp/"
cp "$src/klp-tmp/4-diff/diff.log" "$out.tmp/vmlinux-diff.log"
# The module the original build made (samples/kobject): what the module patch targets.
mkdir -p "$out.tmp/modules"
find "$src/samples/kobject" -name '*.ko' -exec cp {} "$out.tmp/modules/" \;
# 2. A module's function, 3. a function without an ftrace site: reusing the original build.
step module "./scripts/livepatch/klp-build -T -S 2 -j2 -o livepatch-kobject.ko ../patches/b-kobject-example.patch" ||
	die "klp-build of the module patch failed (log: $out.tmp/module.log)"
cp "$src/livepatch-kobject.ko" "$out.tmp/"
step notrace "./scripts/livepatch/klp-build -T -S 2 -j2 -o livepatch-notrace.ko ../patches/e4-notrace-refused-by-kernel.patch" ||
	die "klp-build of the notrace patch failed (log: $out.tmp/notrace.log)"
cp "$src/livepatch-notrace.ko" "$out.tmp/"
# 4. A patch klp-build refuses: its words are recorded, and no module is made.
if step refused "./scripts/livepatch/klp-build -T -S 2 -j2 -o livepatch-refused.ko ../patches/e1-lib-refused.patch"; then
	die "klp-build accepted a patch to lib/ (log: $out.tmp/refused.log)"
fi
# Refused for its reason, not because something broke.
grep -q 'unsupported patch to lib/' "$out.tmp/refused.log" ||
	die "klp-build failed on the lib/ patch without saying it is unsupported (log: $out.tmp/refused.log)"
printf 'total %s\n' "$(elapsed "$t0")" >>"$out.tmp/timings.txt"
{
	printf 'package=%s\nversion=%s\ngcc=%s\n' "$pkg" "$ver" "$gcc_ver"
} >"$out.tmp/source.txt"
rm -rf "$work"
touch "$out.tmp/.done"
rm -rf "$out"
mv "$out.tmp" "$out"
log "klp-build outputs in $out ($(elapsed "$t0")s)"
boot
printf 'KLP_BUILD_DIR=%s\n' "$out"
