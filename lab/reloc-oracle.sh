#!/usr/bin/env bash
# The relocation oracle: ordinary (non-livepatch) modules whose relocations the real kernel
# applies at load, so that relocation arithmetic can be judged against what the kernel did.
#
# Usage: lab/reloc-oracle.sh            (KLPSYM_LAB_SUITE / KLPSYM_LAB_ARCH pick the kernel)
#
# Cases: lab/reloc/cases/<case>/ holds <case>.c, a Kbuild and `case` (arch=x86_64|arm64,
# expect=load|refuse, types=<the relocation types of .rela.klpsym_reloc>). The cases of the
# kernel's architecture are built with the kernel's own compiler (lab/toolchain.sh: host gcc
# for bookworm's 6.1, the suite's chroot with its aarch64 cross gcc for arm64) against the
# unpacked headers, with the kernel's flags untouched. Each built .ko must carry exactly the
# `types=` of its case in .rela.klpsym_reloc (readelf), else the script fails. One boot
# loads them all, one finit_module(2) call each (lab/reloc/guest-reloc.sh).
#
# Outputs in $KLPSYM_LAB_DIR/reloc/ (RELOC_DIR; replaced as a whole):
#   index.txt            one line per case: <case> loaded|refused errno=<E> expect=<load|refuse>
#   kallsyms             /proc/kallsyms after all loads (root: real addresses)
#   boot-dmesg.txt console.log finit.log    from the boot
#   <case>/module.ko     the exact file loaded
#   <case>/case          the case's metadata;  <case>/relocs.txt  readelf -Wr of module.ko
#   <case>/errno         0 (loaded) or the errno name
#   <case>/dmesg         the kernel lines of that load, timestamps stripped
#   loaded cases only:
#   <case>/sections      "NAME ADDR" per file of /sys/module/<case>/sections/, sorted by name
#   <case>/block.bin     the bytes of .klpsym_reloc after relocation (from the dump lines)
#   <case>/kallsyms      the same as ../kallsyms
#   <case>/verify.txt    lab/reloc/verify-block.py: each relocation recomputed from the psABI
#                        formulas, sections and kallsyms, compared with block.bin (a mismatch
#                        is reported, not fatal: the kernel is the judge)
# Cached: redone only when the image package (SHA-256), lab/reloc/ or this script, or the
# toolchain changes. Prints RELOC_DIR=. A verdict differing from expect= is only reported.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RELOC_SRC="$LAB_SRC_DIR/reloc"
SELF="$LAB_SRC_DIR/$(basename "${BASH_SOURCE[0]}")"

conf_get() { sed -n "s/^$2=//p" "$1"; }

# check_types CASE KO: the relocation types of KO's .rela.klpsym_reloc are exactly types=.
check_types() {
	local c="$1" ko="$2" have want
	have="$(readelf -Wr "$ko" | sed -n '/^Relocation section .\.rela\.klpsym_reloc/,/^$/p' |
		awk '$3 ~ /^R_/ { print $3 }' | LC_ALL=C sort -u | tr '\n' ' ')"
	want="$(conf_get "$RELOC_SRC/cases/$c/case" types | tr ' ' '\n' | sed '/^$/d' | LC_ALL=C sort -u | tr '\n' ' ')"
	[ "$have" = "$want" ] ||
		die "case $c: .rela.klpsym_reloc carries '$have', the case wants '$want' (gas resolved or converted one?)"
}

run_oracle() {
	local dest="$KLPSYM_LAB_DIR/reloc" build="$KLPSYM_LAB_DIR/.reloc-build" stamp c t0 vm
	t0="$(now)"
	stamp="$(
		echo "image=${IMAGE_SHA256:-} arch=$LAB_ARCH cases=${CASES[*]}"
		cd "$RELOC_SRC" && find . -type f | LC_ALL=C sort | xargs md5sum
		md5sum <"$SELF"
		# The guest side and the boot: what loads the modules and carries their output back.
		cat "$LAB_SRC_DIR/guest/init" "$LAB_SRC_DIR/guest/guest-lib.sh" "$LAB_SRC_DIR/run-vm.sh" \
			"$LAB_SRC_DIR/build-helpers.sh" "$LAB_SRC_DIR/finit.c" "$LAB_SRC_DIR/lib.sh" | md5sum
		echo "toolchain $TOOLCHAIN_CC ${TOOLCHAIN_ROOT:-host}"
		[ -z "$TOOLCHAIN_ROOT" ] || cat "$TOOLCHAIN_ROOT/.made"
		[ -z "$TOOLCHAIN_ROOT" ] || [ "$LAB_ARCH" = amd64 ] || cat "$TOOLCHAIN_ROOT/.made-arm64"
	)"
	if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$stamp" ] && [ -s "$dest/index.txt" ]; then
		log "relocation oracle is up to date in $dest"
		return 0
	fi
	# Build: every case of this architecture in one kbuild run.
	rm -rf "$build"
	mkdir -p "$build/cases"
	cp -r "$RELOC_SRC/include" "$build/"
	for c in "${CASES[@]}"; do
		cp -r "$RELOC_SRC/cases/$c" "$build/cases/"
		printf 'obj-m += %s/\n' "$c" >>"$build/cases/Kbuild"
	done
	log "building ${#CASES[@]} relocation cases against $HEADERS_DIR with $TOOLCHAIN_CC${TOOLCHAIN_ROOT:+ in $TOOLCHAIN_ROOT}"
	if ! in_toolchain "$TOOLCHAIN_ROOT" make -s -j2 -C "$HEADERS_DIR" M="$build/cases" modules \
		>"$build/make.log" 2>&1; then
		tail -n 30 "$build/make.log" >&2
		die "kbuild failed (full log: $build/make.log)"
	fi
	log "build: $(elapsed "$t0")s"

	work="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-reloc.XXXXXX")"
	trap 'rm -rf "$work"' EXIT
	local stage="$work/stage"
	mkdir -p "$work/reloc" "$stage"
	: >"$work/reloc/cases.txt"
	for c in "${CASES[@]}"; do
		[ -f "$build/cases/$c/$c.ko" ] || die "case $c: kbuild produced no $c.ko"
		check_types "$c" "$build/cases/$c/$c.ko"
		mkdir -p "$stage/$c"
		cp "$build/cases/$c/$c.ko" "$stage/$c/module.ko"
		cp "$build/cases/$c/$c.ko" "$work/reloc/$c.ko"
		cp "$RELOC_SRC/cases/$c/case" "$stage/$c/case"
		readelf -Wr "$stage/$c/module.ko" >"$stage/$c/relocs.txt"
		printf '%s\n' "$c" >>"$work/reloc/cases.txt"
	done
	vm="$work/vm"
	log "booting $KERNEL_RELEASE for ${#CASES[@]} relocation cases"
	"$LAB_SRC_DIR/run-vm.sh" --kernel "$BOOT_KERNEL" --script "$RELOC_SRC/guest-reloc.sh" \
		--out "$vm" --add "$work/reloc:/lab/reloc" </dev/null || die "the relocation oracle VM run failed"
	[ -s "$vm/kallsyms" ] || die "the guest wrote no kallsyms"
	local errno expect verdict summary
	: >"$stage/index.txt"
	for c in "${CASES[@]}"; do
		[ -f "$vm/$c/errno" ] || die "case $c: the guest wrote no errno"
		cp "$vm/$c/errno" "$vm/$c/dmesg" "$stage/$c/"
		errno="$(cat "$stage/$c/errno")"
		expect="$(conf_get "$stage/$c/case" expect)"
		if [ "$errno" = 0 ]; then
			verdict=loaded
			[ -s "$vm/$c/sections" ] || die "case $c loaded but the guest listed no sections"
			cp "$vm/$c/sections" "$stage/$c/sections"
			cp "$vm/kallsyms" "$stage/$c/kallsyms"
			python3 "$RELOC_SRC/decode-block.py" "$stage/$c/dmesg" "$stage/$c/block.bin" ||
				die "case $c: cannot decode the section dump"
			# The lab's own check of the kernel's arithmetic (no klpsym involved).
			if python3 "$RELOC_SRC/verify-block.py" "$stage/$c" >"$stage/$c/verify.txt"; then
				log "case $c: $(tail -n1 "$stage/$c/verify.txt") relocations against the psABI formulas"
			else
				log "case $c: WARNING: $(tail -n1 "$stage/$c/verify.txt") (see $dest/$c/verify.txt)"
			fi
		else
			verdict=refused
		fi
		printf '%s %s errno=%s expect=%s\n' "$c" "$verdict" "$errno" "$expect" >>"$stage/index.txt"
		summary="$c: $verdict (errno=$errno)"
		case "$expect:$verdict" in
		load:loaded | refuse:refused) ;;
		*) summary+=" (expected $expect)" ;;
		esac
		log "$summary"
	done
	cp "$vm/kallsyms" "$vm/console.log" "$vm/boot-dmesg.txt" "$vm/finit.log" "$stage/"
	printf '%s\n' "$stamp" >"$stage/.stamp"
	rm -rf "$dest.old"
	[ ! -e "$dest" ] || mv "$dest" "$dest.old"
	cp -r "$stage" "$dest"
	rm -rf "$dest.old"
	log "relocation oracle done in $(elapsed "$t0")s"
}

main() {
	local arch c tc
	ensure_packages gcc make libc6-dev libelf1 zlib1g binutils python3
	load_kernel_env
	case "$LAB_ARCH" in
	amd64) arch=x86_64 ;;
	arm64) arch=arm64 ;;
	esac
	CASES=()
	for c in $(cd "$RELOC_SRC/cases" && ls -d -- */ | tr -d / | LC_ALL=C sort); do
		[ "$(conf_get "$RELOC_SRC/cases/$c/case" arch)" = "$arch" ] && CASES+=("$c")
	done
	[ "${#CASES[@]}" -gt 0 ] || die "no relocation case for $arch in $RELOC_SRC/cases"
	tc="$("$LAB_SRC_DIR/toolchain.sh" "$CONFIG")" || die "no toolchain for $KERNEL_RELEASE"
	TOOLCHAIN_CC="$(sed -n 's/^TOOLCHAIN_CC=//p' <<<"$tc")"
	TOOLCHAIN_ROOT="$(sed -n 's/^TOOLCHAIN_ROOT=//p' <<<"$tc")"
	with_lock "$KLPSYM_LAB_DIR/.reloc.lock" run_oracle
	printf 'RELOC_DIR=%s\n' "$KLPSYM_LAB_DIR/reloc"
}

main "$@"
