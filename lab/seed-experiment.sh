#!/usr/bin/env bash
# The seed's experiment on a real kernel: how long loading a livepatch with many klp
# relocations keeps the one CPU from anything else.
#
# For each size of KLPSYM_SEED_SIZES (klp relocations; default "200 600"), lab/seed/gen-patch.py
# writes a livepatch module referencing static vmlinux functions (50 distinct names, from this
# kernel's capture), kbuild builds it with the kernel's own compiler (lab/toolchain.sh),
# `klpsym convert` ($KLPSYM_BIN) turns the references into klp relocations, and one boot
# (QEMU, one vCPU) runs lab/seed/probe.c: first an idle baseline, then each module loaded
# with one finit_module(2) call while a task that wakes every millisecond records how late
# it runs and a loopback TCP flow counts the kernel's retransmissions. Every patch is disabled and removed before the next.
#
# Outputs in $KLPSYM_LAB_DIR/seed/: results.txt (one "SEED ..." line per run, see probe.c),
# klp_seed_<N>.ko (the modules loaded), dmesg.txt. The boot is keyed by the bytes it boots
# (kernel, converted modules, probe, guest tools): a run whose conversion came out the same
# does not boot again. Prints SEED_DIR= and SEED_RESULTS=.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SEED_SRC="$LAB_SRC_DIR/seed"
SIZES="${KLPSYM_SEED_SIZES:-200 600}"

run() {
	local dir="$KLPSYM_LAB_DIR/seed" build n stamp key
	build="$dir/.build"
	[ -n "${KLPSYM_BIN:-}" ] && [ -x "$KLPSYM_BIN" ] || die "KLPSYM_BIN must name a klpsym binary (it converts the modules)"
	# What the built (not yet converted) modules depend on: the kernel, the generator's
	# inputs, the compiler, this script. Unchanged: kbuild is not run again.
	stamp="$(
		echo "${IMAGE_SHA256:-} sizes=$SIZES toolchain=$TOOLCHAIN_CC"
		[ -z "$TOOLCHAIN_ROOT" ] || cat "$TOOLCHAIN_ROOT/.made"
		md5sum <"$KALLSYMS_NOMOD"
		cat "$SEED_SRC/gen-patch.py" "$LAB_SRC_DIR/seed-experiment.sh" \
			"$LAB_SRC_DIR/livepatch/include/"* | md5sum
	)"
	mkdir -p "$dir"
	if [ -f "$build/.stamp" ] && [ "$(cat "$build/.stamp")" = "$stamp" ]; then
		log "seed modules are up to date in $build"
	else
		rm -rf "$build"
		mkdir -p "$build/include"
		cp "$LAB_SRC_DIR/livepatch/include/"* "$build/include/"
		for n in $SIZES; do
			mkdir -p "$build/seed$n"
			python3 "$SEED_SRC/gen-patch.py" "$KALLSYMS_NOMOD" "klp_seed_$n" "$n" 50 "$build/seed$n" ||
				die "gen-patch.py failed"
			printf 'obj-m += seed%s/\n' "$n" >>"$build/Kbuild"
		done
		log "building the seed modules ($SIZES relocations) with $TOOLCHAIN_CC"
		in_toolchain "$TOOLCHAIN_ROOT" make -s -j2 -C "$HEADERS_DIR" M="$build" KBUILD_MODPOST_WARN=1 modules \
			>"$build/make.log" 2>&1 || { tail -n 20 "$build/make.log" >&2; die "kbuild of the seed modules failed"; }
		printf '%s\n' "$stamp" >"$build/.stamp"
	fi
	# Converted every run (a second or two): the boot below depends on the bytes that come out.
	rm -rf "$build/guest"
	mkdir -p "$build/guest"
	for n in $SIZES; do
		"$KLPSYM_BIN" convert "$build/seed$n/klp_seed_$n.ko" -o "$build/guest/klp_seed_$n.ko" \
			--kernel "$VMLINUZ" >"$build/convert-$n.log" 2>&1 ||
			{ tail -n 5 "$build/convert-$n.log" >&2; die "klpsym convert of klp_seed_$n failed"; }
	done
	gcc -static -O2 -Wall -Wextra -Werror -o "$build/guest/probe" "$SEED_SRC/probe.c" || die "building probe.c failed"
	cat >"$build/guest.sh" <<'GUEST'
: >"$OUT/results.txt"
# probe's loopback TCP flow needs lo up.
ifconfig lo 127.0.0.1 up
/lab/seed/probe - 500 >>"$OUT/results.txt"
for ko in /lab/seed/klp_seed_*.ko; do
	p="$(basename "$ko" .ko)"
	/lab/seed/probe "$ko" 500 >>"$OUT/results.txt"
	if [ -d "/sys/kernel/livepatch/$p" ]; then
		i=0
		while [ "$(cat "/sys/kernel/livepatch/$p/transition")" != 0 ] && [ $i -lt 300 ]; do sleep 1; i=$((i + 1)); done
		echo 0 >"/sys/kernel/livepatch/$p/enabled"
		i=0
		while [ -d "/sys/kernel/livepatch/$p" ] && [ $i -lt 300 ]; do sleep 1; i=$((i + 1)); done
		rmmod "$p"
	fi
done
dmesg >"$OUT/dmesg.txt"
GUEST
	# The boot is keyed by the bytes it boots: the kernel, the modules, the probe (built from
	# probe.c, whose own bytes vary with the compiler's build), the guest script and tools.
	key="$(
		{
			md5sum <"$VMLINUX"
			(cd "$build/guest" && md5sum ./*.ko)
			cat "$SEED_SRC/probe.c" "$build/guest.sh" | md5sum
			(cd "$LAB_SRC_DIR" && md5sum run-vm.sh build-helpers.sh finit.c shmout.c guest/*)
			dpkg-query -W -f '${Version}\n' busybox-static gcc qemu-system-x86 2>/dev/null || true
		} | md5sum | cut -c1-32
	)"
	if [ -f "$dir/.boot-key" ] && [ "$(cat "$dir/.boot-key")" = "$key" ] && [ -s "$dir/results.txt" ]; then
		log "seed results are up to date in $dir (boot key $key)"
		return 0
	fi
	rm -f "$dir/.boot-key"
	log "booting to measure the seed modules (boot key $key)"
	local vm="$build/vm"
	rm -rf "$vm"
	KLPSYM_LAB_TIMEOUT="${KLPSYM_LAB_TIMEOUT:-900}" "$LAB_SRC_DIR/run-vm.sh" --kernel "$VMLINUX" \
		--script "$build/guest.sh" --out "$vm" --add "$build/guest:/lab/seed" </dev/null ||
		die "the seed VM run failed"
	grep -c '^SEED ' "$vm/results.txt" | grep -qx "$(($(wc -w <<<"$SIZES") + 1))" ||
		die "the seed run recorded $(grep -c '^SEED ' "$vm/results.txt") results: $(cat "$vm/results.txt")"
	cp "$vm/results.txt" "$vm/dmesg.txt" "$dir/"
	cp "$build/guest/"*.ko "$dir/"
	# A measurement that failed its own sanity checks is never kept: every load returned,
	# every run took samples.
	if awk '/^SEED / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["rc"] != "0" || v["samples"] + 0 < 10) bad = 1 } END { exit bad }' "$dir/results.txt"; then
		printf '%s\n' "$key" >"$dir/.boot-key"
	else
		log "seed results failed their sanity checks (a load failed or a run took too few samples): not kept for the next run"
	fi
	log "seed results: $(tr '\n' ';' <"$dir/results.txt")"
}

main() {
	ensure_packages gcc libc6-dev make python3
	load_kernel_env
	local tc
	tc="$("$LAB_SRC_DIR/toolchain.sh" "$CONFIG")" || die "no toolchain for $KERNEL_RELEASE"
	TOOLCHAIN_CC="$(sed -n 's/^TOOLCHAIN_CC=//p' <<<"$tc")"
	TOOLCHAIN_ROOT="$(sed -n 's/^TOOLCHAIN_ROOT=//p' <<<"$tc")"
	KALLSYMS_NOMOD="$KLPSYM_LAB_DIR/capture/kallsyms-nomod.txt"
	[ -s "$KALLSYMS_NOMOD" ] || die "no capture in $KLPSYM_LAB_DIR/capture (run capture-kallsyms.sh)"
	with_lock "$KLPSYM_LAB_DIR/.seed.lock" run
	printf 'SEED_DIR=%s\nSEED_RESULTS=%s\n' "$KLPSYM_LAB_DIR/seed" "$KLPSYM_LAB_DIR/seed/results.txt"
}

main "$@"
