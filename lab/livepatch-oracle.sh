#!/usr/bin/env bash
# The real-kernel livepatch oracle: builds the C livepatch cases of lab/livepatch/cases/
# against the Debian kernel's headers, loads them in that kernel under QEMU (one boot for
# all cases, one case after the other, everything unloaded in between) and records what the
# kernel did, for comparison with `klpsym check`. Format: lab/livepatch/README.md.
#
# Usage: lab/livepatch-oracle.sh [CASE]...      (default: every case)
#
# Environment:
#   KLPSYM_BIN   a klpsym binary (never run in the guest); when set, cases with `convert=yes` are converted with
#                `$KLPSYM_BIN convert IN.ko -o OUT.ko --kernel $VMLINUZ --modules $MODULES_DIR
#                [--pin P]...` and their `post=` edits applied (klp-elfedit); when unset they
#                are skipped (recorded as `skipped=...`).
#   KLPSYM_LAB_VERBOSE=1   mirror the guest console on stderr.
#
# Outputs, in $KLPSYM_LAB_DIR/livepatch/ (replaced case by case):
#   index.txt          one line per case: <case> <verdict|skipped> expect=<...> patch=<name>
#   <case>/oracle.txt  what the kernel did;   <case>/<patch>.ko  the module that was loaded
#   <case>/case.conf   the case's metadata;  <case>/kallsyms-modules.txt  module symbols then
# A boot is keyed by the bytes it boots (kernel, case modules and plans, package modules,
# guest tools): a run with the same bytes reuses the recorded boot ($KLPSYM_LAB_DIR/livepatch/
# .boots/KEY) instead of booting again.
# Prints ORACLE_DIR= and ORACLE_INDEX= on stdout. Exit 1 when the VM run fails or a case
# could not be cleaned up (later cases would be unreliable); a verdict that differs from
# `expect=` is only reported (the kernel is the judge, the expectation may be wrong).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LP_SRC="$LAB_SRC_DIR/livepatch"
SELF="$LAB_SRC_DIR/$(basename "${BASH_SOURCE[0]}")"

# conf_get FILE KEY: the values of KEY (one per line, in order).
conf_get() { sed -n "s/^$2=//p" "$1"; }

# build_cases BUILD: copies the sources to BUILD and runs kbuild once for all cases
# (a generated top-level Kbuild descends into every case folder). Skipped when the sources,
# the headers and this script are unchanged since the last successful build.
build_cases() {
	local build="$1" stamp cases_list
	stamp="$(
		cd "$LP_SRC" && find include cases -type f | LC_ALL=C sort | xargs md5sum
		echo "$HEADERS_DIR $KLPSYM_LAB_VERSION ${IMAGE_SHA256:-}"
		echo "toolchain $TOOLCHAIN_CC ${TOOLCHAIN_ROOT:-host} $([ -z "$TOOLCHAIN_ROOT" ] || cat "$TOOLCHAIN_ROOT/.made")"
		# Contents only (md5sum given a file argument ignores stdin and prints the path: the
		# stamp then changed with the checkout's folder, and this script's changes did not count).
		cat "$SELF" "$LP_SRC/guest-oracle.sh" | md5sum
	)"
	if [ -f "$build/.stamp" ] && [ "$(cat "$build/.stamp")" = "$stamp" ]; then
		log "case modules are up to date in $build"
		return 0
	fi
	rm -rf "$build"
	mkdir -p "$build"
	cp -r "$LP_SRC/include" "$LP_SRC/cases" "$build/"
	cases_list="$(cd "$build/cases" && ls -d -- */ | LC_ALL=C sort)"
	# shellcheck disable=SC2086 # one folder per word
	printf 'obj-m += %s\n' $cases_list >"$build/cases/Kbuild"
	log "building $(wc -w <<<"$cases_list") case modules against $HEADERS_DIR with $TOOLCHAIN_CC${TOOLCHAIN_ROOT:+ in $TOOLCHAIN_ROOT}"
	# KBUILD_MODPOST_WARN=1: the convert cases refer to unexported symbols on purpose.
	if ! in_toolchain "$TOOLCHAIN_ROOT" make -s -j2 -C "$HEADERS_DIR" M="$build/cases" KBUILD_MODPOST_WARN=1 modules \
		>"$build/make.log" 2>&1; then
		tail -n 30 "$build/make.log" >&2
		die "kbuild failed (full log: $build/make.log)"
	fi
	printf '%s\n' "$stamp" >"$build/.stamp"
}

# module_load_lines NAME: plan lines loading module NAME of the kernel package, after its
# dependencies (modules.dep lists them all; modprobe loads them right to left).
module_load_lines() {
	local name="$1" line path deps i
	line="$(awk -v n="$name" '{ p = $1; sub(/:$/, "", p); b = p; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b);
		gsub(/-/, "_", b); m = n; gsub(/-/, "_", m); if (b == m) { print; exit } }' "$MODULES_DIR/modules.dep")"
	[ -n "$line" ] || die "module $name not found in $MODULES_DIR/modules.dep"
	path="${line%%:*}"
	read -r -a deps <<<"${line#*:}"
	for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
		printf 'load module /modules/%s %s\n' "${deps[i]}" "$(basename "${deps[i]}" | sed 's/\.ko\(\.[a-z]*\)\{0,1\}$//' | tr - _)"
		printf '%s\n' "${deps[i]}" >>"$work/module-files"
	done
	printf 'load module /modules/%s %s\n' "$path" "$(tr - _ <<<"$name")"
	printf '%s\n' "$path" >>"$work/module-files"
}

# prepare_case CASE: fills $stage/CASE (the .ko to load, case.conf) and the guest plan
# $work/lp/CASE/plan; returns 1 (after writing a skipped oracle.txt) when the case cannot
# run.
prepare_case() {
	local c="$1" conf="$LP_SRC/cases/$1/case.conf" patch built out step pins=() post op conv_kernel
	patch="$(conf_get "$conf" patch)"
	[ -n "$patch" ] || die "case $c: case.conf has no patch="
	built="$build/cases/$c/$patch.ko"
	[ -f "$built" ] || die "case $c: kbuild produced no $built"
	out="$stage/$c"
	mkdir -p "$out" "$work/lp/$c"
	cp "$conf" "$out/case.conf"
	# load_on=KERNEL...: a case about two builds of one series runs on their kernels only
	# (a kernel is named by its suite, SUITE/FLAVOUR for another flavour: lib.sh's
	# LAB_KERNEL_ID). A kernel of another flavour runs only the cases that name it.
	local load_on built_for flags=0
	load_on="$(conf_get "$conf" load_on)"
	if { [ -n "$load_on" ] || [ "$LAB_FLAVOUR" != "$LAB_ARCH" ]; } &&
		! tr ' ' '\n' <<<"$load_on" | grep -qxF -- "$LAB_KERNEL_ID"; then
		printf 'case=%s
patch=%s
skipped=not applicable: loaded on the kernels of %s only
' "$c" "$patch" "${load_on:-the default flavour}" >"$out/oracle.txt"
		return 1
	fi
	# requires=CONFIG_X: a case about a feature the kernel may lack (e.g. symbol versions,
	# which Debian's 7.x builds without) is skipped on kernels without it, saying why.
	local req
	while IFS= read -r req; do
		[ -n "$req" ] || continue
		if ! grep -qx "$req=y" "$CONFIG"; then
			printf 'case=%s\npatch=%s\nskipped=not applicable: %s has no %s\n' "$c" "$patch" "$KERNEL_RELEASE" "$req" >"$out/oracle.txt"
			return 1
		fi
	done < <(conf_get "$conf" requires)
	# requires_symbol=NAME: a case about an interface the kernel may lack (klp-build's layout
	# needs klp_find_section_by_name, 6.19+), judged by the kernel's own captured kallsyms.
	local kallsyms="$KLPSYM_LAB_DIR/capture/kallsyms-nomod.txt"
	while IFS= read -r req; do
		[ -n "$req" ] || continue
		[ -s "$kallsyms" ] || die "case $c: requires_symbol needs the capture ($kallsyms)"
		if ! awk -v n="$req" '$3 == n { found = 1; exit } END { exit !found }' "$kallsyms"; then
			printf 'case=%s\npatch=%s\nskipped=not applicable: %s has no %s\n' "$c" "$patch" "$KERNEL_RELEASE" "$req" >"$out/oracle.txt"
			return 1
		fi
	done < <(conf_get "$conf" requires_symbol)
	# requires_module_symbol=MODULE:NAME: a case about one symbol of a module of the package
	# (a compiler-made .cold part, which another compiler may not split out), judged by the
	# module's own symbol table.
	while IFS= read -r req; do
		[ -n "$req" ] || continue
		local mname="${req%%:*}" sname="${req#*:}" mfile
		mfile="$(find "$MODULES_DIR" \( -name "$mname.ko" -o -name "$mname.ko.xz" -o -name "$mname.ko.zst" -o -name "$mname.ko.gz" \) | head -n 1)"
		if [ -z "$mfile" ] || ! lab_module_cat "$mfile" | nm - 2>/dev/null | awk -v n="$sname" '$3 == n { found = 1 } END { exit !found }'; then
			printf 'case=%s\npatch=%s\nskipped=not applicable: %s has no %s in %s\n' "$c" "$patch" "$KERNEL_RELEASE" "$sname" "$mname" >"$out/oracle.txt"
			return 1
		fi
	done < <(conf_get "$conf" requires_module_symbol)
	# built_for=KERNEL: the module is the one this oracle made for that kernel (built with
	# its headers and compiler, converted against it), loaded here unchanged. By default as
	# `modprobe --force` loads it: finit_module(2) with MODULE_INIT_IGNORE_MODVERSIONS |
	# MODULE_INIT_IGNORE_VERMAGIC (3), since two builds' module_layout CRCs differ. With
	# load=plain as insmod loads it (flags 0): two flavours of one release can share every
	# CRC the module asks (trixie's -amd64 and -cloud-amd64 do), and the kernel then checks
	# the symbol versions and the vermagic itself.
	built_for="$(conf_get "$conf" built_for)"
	if [ -n "$built_for" ] && [ "$built_for" != "$LAB_KERNEL_ID" ]; then
		local env_file src_dir src_release
		# The newest lab.env of that kernel (one written before lab.env named its kernel
		# says SUITE= alone: the suite's own flavour).
		env_file="$(for e in "$LAB_CACHE"/*/lab.env; do
			[ -f "$e" ] && grep -qx -e "ARCH=$LAB_ARCH" "$e" || continue
			id="$(sed -n 's/^KERNEL_ID=//p' "$e")"
			[ -n "$id" ] || id="$(sed -n 's/^SUITE=//p' "$e")"
			[ "$id" = "$built_for" ] && printf '%s\n' "$e"
		done | xargs -r ls -t | head -n1)"
		src_dir="$( [ -z "$env_file" ] || sed -n 's/^LIVEPATCH_DIR=//p' "$env_file")"
		if [ -z "$src_dir" ] || ! grep -qx 'verdict=accepted' "$src_dir/$c/oracle.txt" 2>/dev/null; then
			printf 'case=%s
patch=%s
skipped=needs the case accepted by the oracle of the %s kernel first (KLPSYM_LAB_SUITE=%s lab/lab-kernel.sh)
' \
				"$c" "$patch" "$built_for" "${built_for%%/*}" >"$out/oracle.txt"
			return 1
		fi
		src_release="$(sed -n 's/^RELEASE=//p' "$env_file")"
		cp "$src_dir/$c/$patch.ko" "$out/$patch.ko"
		case "$(conf_get "$conf" load)" in
		"" | force) flags=3 ;;
		plain) flags=0 ;;
		*) die "case $c: unknown load= '$(conf_get "$conf" load)' (force, plain)" ;;
		esac
		printf 'suite=%s
release=%s
lab_dir=%s
load_flags=%s
' "$built_for" "$src_release" \
			"$(sed -n 's/^LAB_DIR=//p' "$env_file")" "$flags" >"$out/built-for.txt"
	elif [ "$(conf_get "$conf" convert)" = yes ]; then
		cp "$built" "$out/$patch.built.ko"
		if [ -z "${KLPSYM_BIN:-}" ]; then
			printf 'case=%s\npatch=%s\nskipped=needs klpsym convert: set KLPSYM_BIN\n' "$c" "$patch" >"$out/oracle.txt"
			return 1
		fi
		while IFS= read -r step; do pins+=(--pin "$step"); done < <(conf_get "$conf" pin)
		# convert_kernel=dbg: convert against the -dbg vmlinux (source files from its DWARF,
		# for pins by file), fetched by lab/fetch-dbg-vmlinux.sh.
		conv_kernel="$VMLINUZ"
		if [ "$(conf_get "$conf" convert_kernel)" = dbg ]; then
			conv_kernel="$KLPSYM_LAB_DIR/vmlinux-dbg"
			if [ ! -f "$conv_kernel" ]; then
				printf 'case=%s\npatch=%s\nskipped=needs the -dbg vmlinux (lab/fetch-dbg-vmlinux.sh)\n' "$c" "$patch" >"$out/oracle.txt"
				return 1
			fi
		fi
		if ! "$KLPSYM_BIN" convert "$built" -o "$out/$patch.converted.ko" --kernel "$conv_kernel" \
			--modules "$MODULES_DIR" "${pins[@]}" >"$out/convert.log" 2>&1; then
			printf 'case=%s\npatch=%s\nskipped=klpsym convert failed (see convert.log)\n' "$c" "$patch" >"$out/oracle.txt"
			log "case $c: klpsym convert failed: $(tail -n 3 "$out/convert.log")"
			return 1
		fi
		cp "$out/$patch.converted.ko" "$out/$patch.ko"
	else
		cp "$built" "$out/$patch.ko"
	fi
	while IFS= read -r post; do
		[ -n "$post" ] || continue
		if [ -z "$elfedit" ]; then
			printf 'case=%s\npatch=%s\nskipped=post edits need klp-elfedit: set KLPSYM_BIN\n' "$c" "$patch" >"$out/oracle.txt"
			return 1
		fi
		read -r -a op <<<"$post"
		if ! "$elfedit" "$out/$patch.ko" "$out/$patch.ko.tmp" "${op[@]}" >>"$out/edit.log" 2>&1; then
			printf 'case=%s\npatch=%s\nskipped=post step failed: %s\n' "$c" "$patch" "$post" >"$out/oracle.txt"
			return 1
		fi
		mv "$out/$patch.ko.tmp" "$out/$patch.ko"
	done < <(conf_get "$conf" post)
	# compress=xz: the module as distributions ship it (kbuild's xz options); the guest hands
	# the .ko.xz to finit_module(2) unchanged (MODULE_INIT_COMPRESSED_FILE), and klpsym is
	# judged on the same file.
	local file="$patch.ko"
	case "$(conf_get "$conf" compress)" in
	"") ;;
	xz)
		xz --check=crc32 --lzma2=dict=1MiB -c "$out/$patch.ko" >"$out/$patch.ko.xz" || die "case $c: xz failed"
		rm -f "$out/$patch.ko"
		file="$patch.ko.xz"
		;;
	*) die "case $c: unknown compress= '$(conf_get "$conf" compress)' (xz)" ;;
	esac
	{
		printf 'patch %s\n' "$patch"
		for step in $(conf_get "$conf" steps); do
			case "$step" in
			patch) printf 'load patch /lab/lp/%s/%s %s\n' "$c" "$file" "$flags" ;;
			module:*) module_load_lines "${step#module:}" ;;
			# local:NAME: a module the case builds itself (NAME.ko beside the patch), published
			# in the case's modules/ folder: a module tree of its own for klpsym (its .ko
			# keeps kbuild's debug info, the DWARF klpsym reads copies from).
			local:*)
				local lname="${step#local:}"
				[ -f "$build/cases/$c/$lname.ko" ] || die "case $c: kbuild produced no $lname.ko"
				mkdir -p "$out/modules"
				cp "$build/cases/$c/$lname.ko" "$out/modules/"
				cp "$build/cases/$c/$lname.ko" "$work/lp/$c/"
				printf 'load module /lab/lp/%s/%s.ko %s\n' "$c" "$lname" "$lname"
				;;
			*) die "case $c: unknown step '$step' in steps=" ;;
			esac
		done
		conf_get "$conf" exercise | sed 's/^/exercise /'
	} >"$work/lp/$c/plan"
	cp "$out/$file" "$work/lp/$c/"
	printf '%s\n' "$c" >>"$work/lp/cases.txt"
}

run_oracle() {
	local t0 c cases=("$@") vm adds=() verdict expect patch bad=0 summary
	t0="$(now)"
	dest="$KLPSYM_LAB_DIR/livepatch"
	build="$dest/.build"
	build_cases "$build"
	log "build step: $(elapsed "$t0")s"
	elfedit=""
	if [ -n "${KLPSYM_BIN:-}" ]; then
		[ -x "$KLPSYM_BIN" ] || die "KLPSYM_BIN=$KLPSYM_BIN is not executable"
		elfedit="$build/klp-elfedit"
		gcc -O2 -Wall -Werror -o "$elfedit" "$LP_SRC/klp-elfedit.c" || die "building klp-elfedit failed"
	fi
	work="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-oracle.XXXXXX")"
	trap 'rm -rf "$work"' EXIT
	stage="$dest/.stage"
	rm -rf "$stage"
	mkdir -p "$stage" "$work/lp"
	: >"$work/lp/cases.txt"
	: >"$work/module-files"
	for c in "${cases[@]}"; do
		[ -f "$LP_SRC/cases/$c/case.conf" ] || die "no case '$c' (no $LP_SRC/cases/$c/case.conf)"
		prepare_case "$c" || log "case $c skipped: $(sed -n 's/^skipped=//p' "$stage/$c/oracle.txt")"
	done
	if [ -s "$work/lp/cases.txt" ]; then
		adds=(--add "$work/lp:/lab/lp")
		while IFS= read -r f; do adds+=(--add "$MODULES_DIR/$f:/modules/$f"); done < <(sort -u "$work/module-files")
		# A boot is keyed by the bytes it boots: the kernel, the case modules and plans, the
		# package modules it loads, and the guest-side tools. klpsym is judged outside the
		# guest against what the guest recorded, so a warm run whose modules came out of
		# `klpsym convert` byte for byte the same reuses the recorded run instead of booting.
		local key keydir
		key="$(
			{
				md5sum <"$VMLINUX"
				(cd "$work/lp" && find . -type f | LC_ALL=C sort | xargs md5sum)
				sort -u "$work/module-files" | while IFS= read -r f; do printf '%s ' "$f"; md5sum <"$MODULES_DIR/$f"; done
				md5sum <"$LP_SRC/guest-oracle.sh"
				(cd "$LAB_SRC_DIR" && md5sum run-vm.sh build-helpers.sh finit.c shmout.c guest/*)
				dpkg-query -W -f '${Version}\n' busybox-static qemu-system-x86 2>/dev/null || true
			} | md5sum | cut -c1-32
		)"
		keydir="$dest/.boots/$key"
		vm="$work/vm"
		if [ -f "$keydir/.complete" ]; then
			log "reusing the recorded boot $key (same kernel, modules, plans and guest tools)"
			cp -r "$keydir" "$vm"
		else
			log "booting for $(wc -l <"$work/lp/cases.txt") cases (boot key $key)"
			"$LAB_SRC_DIR/run-vm.sh" --kernel "$VMLINUX" --script "$LP_SRC/guest-oracle.sh" \
				--out "$vm" "${adds[@]}" </dev/null || die "the oracle VM run failed"
			# Kept for the next run with the same bytes (only the newest: one per kernel).
			rm -rf "$dest/.boots"
			mkdir -p "$dest/.boots"
			cp -r "$vm" "$keydir.tmp"
			touch "$keydir.tmp/.complete"
			mv "$keydir.tmp" "$keydir"
		fi
		while IFS= read -r c; do
			[ -f "$vm/$c/oracle.txt" ] || die "case $c: the guest wrote no oracle.txt"
			cp "$vm/$c/"* "$stage/$c/"
		done <"$work/lp/cases.txt"
		cp "$vm/console.log" "$vm/boot-dmesg.txt" "$vm/finit.log" "$stage/"
	fi
	# Publish: replace each case folder, then rewrite the index.
	: >"$stage/index.txt"
	for c in "${cases[@]}"; do
		verdict="$(sed -n 's/^verdict=//p' "$stage/$c/oracle.txt")"
		[ -n "$verdict" ] || verdict=skipped
		expect="$(conf_get "$stage/$c/case.conf" expect)"
		patch="$(conf_get "$stage/$c/case.conf" patch)"
		printf '%s %s expect=%s patch=%s\n' "$c" "$verdict" "$expect" "$patch" >>"$stage/index.txt"
		summary="$c: $verdict"
		if [ "$verdict" != skipped ] && [ "$verdict" != "$expect" ]; then
			summary+=" (expected $expect)"
		fi
		if grep -q '^cleanup=failed' "$stage/$c/oracle.txt"; then
			summary+=" ($(grep '^cleanup=' "$stage/$c/oracle.txt"))"
			bad=1
		fi
		log "$summary"
		rm -rf "${dest:?}/$c"
		mv "$stage/$c" "$dest/$c"
	done
	# Cases not run this time keep their index line (the index lists every case folder).
	if [ -f "$dest/index.txt" ]; then
		awk 'NR == FNR { ran[$1] = 1; next } !($1 in ran)' "$stage/index.txt" "$dest/index.txt" >>"$stage/index.txt.old"
		cat "$stage/index.txt.old" >>"$stage/index.txt"
		LC_ALL=C sort -o "$stage/index.txt" "$stage/index.txt"
	fi
	for f in index.txt console.log boot-dmesg.txt finit.log; do
		[ -f "$stage/$f" ] && mv "$stage/$f" "$dest/$f"
	done
	rm -rf "$stage"
	log "livepatch oracle done in $(elapsed "$t0")s"
	return "$bad"
}

main() {
	local cases=()
	ensure_packages gcc make libc6-dev libelf1 zlib1g
	load_kernel_env
	local tc
	tc="$("$LAB_SRC_DIR/toolchain.sh" "$CONFIG")" || die "no toolchain for $KERNEL_RELEASE"
	TOOLCHAIN_CC="$(sed -n 's/^TOOLCHAIN_CC=//p' <<<"$tc")"
	TOOLCHAIN_ROOT="$(sed -n 's/^TOOLCHAIN_ROOT=//p' <<<"$tc")"
	if [ $# -gt 0 ]; then
		cases=("$@")
	else
		mapfile -t cases < <(cd "$LP_SRC/cases" && ls -d -- */ | tr -d / | LC_ALL=C sort)
	fi
	set +e
	with_lock "$KLPSYM_LAB_DIR/.livepatch.lock" run_oracle "${cases[@]}"
	rc=$?
	set -e
	printf 'ORACLE_DIR=%s\nORACLE_INDEX=%s\n' "$KLPSYM_LAB_DIR/livepatch" "$KLPSYM_LAB_DIR/livepatch/index.txt"
	exit "$rc"
}

main "$@"
