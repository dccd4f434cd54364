#!/usr/bin/env bash
# Boot the lab kernel under QEMU (TCG) with given files and a guest script; collect results.
#
# Usage:
#   run-vm.sh --script GUEST.sh --out OUTDIR [--add SRC:DEST]... [--env KEY=VALUE]...
#             [--kernel VMLINUX] [--timeout SECONDS] [--append "CMDLINE ARGS"] [--mem 1G]
#
#   --script  busybox sh script, sourced in the guest after /lab/guest-lib.sh (emit,
#             emit_cmd, load_module) with $OUT=/out; its exit status is the guest's verdict.
#   --add     copy SRC (file or folder) into the initramfs at DEST (absolute guest path; a
#             DEST ending in / keeps SRC's base name). Repeatable.
#   --env     KEY=VALUE exported to the guest script. Repeatable.
#   --kernel  kernel to boot (default: $BOOT_KERNEL, else what fetch-kernel.sh prints). An ELF
#             vmlinux boots through its PVH entry: no decompressor, hence no KASLR. arm64
#             (KLPSYM_LAB_ARCH=arm64): a raw Image, booted with nokaslr on qemu's virt machine.
#   --out-mb  size of the shared-memory output window (power of two, default 64); a larger
#             /out falls back to the serial port (gzipped, ~250 KB/s; arm64: a virtio-serial
#             port named klplab.out).
#   --out     host folder that receives the results; replaced as a whole on success. On
#             failure the partial results are left in OUTDIR.failed.
#
# OUTDIR gets: everything the guest wrote under /out, one file per `emit NAME` (the lines in
# order), console.log (serial console, \r stripped), guest-rc, timings.
#
# Exit status: 0 when the guest script returned 0 and all data arrived; 1 otherwise, with the
# reason and the end of the console log on stderr. Timeout: KLPSYM_LAB_TIMEOUT (default 900 s: a guest of 30-odd cases under TCG takes minutes, more on a busy host).
# Set KLPSYM_LAB_VERBOSE=1 to mirror the console on stderr while the guest runs, and
# KLPSYM_LAB_NO_SHM=1 to leave out the shared-memory device (forces the serial fallback).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MARK='@@KLPLAB@@'

usage() {
	sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

script="" out="" kernel="${BOOT_KERNEL:-}" timeout_s="${KLPSYM_LAB_TIMEOUT:-900}" extra_append="" mem=1G out_mb=64
adds=() envs=()
while [ $# -gt 0 ]; do
	case "$1" in
	--script) script="${2:?--script needs a file}"; shift 2 ;;
	--out) out="${2:?--out needs a folder}"; shift 2 ;;
	--add) adds+=("${2:?--add needs SRC:DEST}"); shift 2 ;;
	--env) envs+=("${2:?--env needs KEY=VALUE}"); shift 2 ;;
	--kernel) kernel="${2:?--kernel needs a file}"; shift 2 ;;
	--timeout) timeout_s="${2:?--timeout needs seconds}"; shift 2 ;;
	--append) extra_append="${2?}"; shift 2 ;;
	--mem) mem="${2:?--mem needs a size}"; shift 2 ;;
	--out-mb) out_mb="${2:?--out-mb needs a size}"; shift 2 ;;
	-h | --help) usage ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
[ -n "$script" ] || die "--script is required (see --help)"
[ -n "$out" ] || die "--out is required (see --help)"
[ -f "$script" ] || die "guest script not found: $script"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds, got '$timeout_s'"
[[ "$out_mb" =~ ^[0-9]+$ ]] && [ "$out_mb" -gt 0 ] && [ $((out_mb & (out_mb - 1))) = 0 ] ||
	die "--out-mb must be a power of two, got '$out_mb'"

if [ "$LAB_ARCH" = arm64 ]; then
	ensure_packages qemu-system-arm cpio
else
	ensure_packages qemu-system-x86 cpio
fi
if [ -z "$kernel" ]; then
	load_kernel_env
	kernel="$BOOT_KERNEL"
fi
[ -f "$kernel" ] || die "kernel not found: $kernel"
# The guest's static binaries, for the kernel's architecture (busybox included).
helpers="$("$LAB_SRC_DIR/build-helpers.sh")" || die "building the guest helpers failed"
finit_bin="$(sed -n 's/^FINIT_BIN=//p' <<<"$helpers")"
shmout_bin="$(sed -n 's/^SHMOUT_BIN=//p' <<<"$helpers")"
busybox_bin="$(sed -n 's/^BUSYBOX_BIN=//p' <<<"$helpers")"
[ -x "$finit_bin" ] && [ -x "$shmout_bin" ] && [ -x "$busybox_bin" ] || die "guest helpers missing after build"

work="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-lab-vm.XXXXXX")"
trap 'rm -rf "$work"' EXIT
t_start="$(now)"

# --- initramfs --------------------------------------------------------------------------
rootfs="$work/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/lab" "$rootfs/out"
cp "$busybox_bin" "$rootfs/bin/busybox"
cp "$finit_bin" "$rootfs/bin/finit"
cp "$shmout_bin" "$rootfs/bin/shmout"
install -m 755 "$LAB_SRC_DIR/guest/init" "$rootfs/init"
cp "$LAB_SRC_DIR/guest/guest-lib.sh" "$rootfs/lab/guest-lib.sh"
cp "$script" "$rootfs/lab/guest.sh"
{
	for kv in "${envs[@]}"; do
		key="${kv%%=*}"
		[[ "$key" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ "$key" != "$kv" ] ||
			die "--env wants KEY=VALUE, got '$kv'"
		# Single-quote the value for the guest shell.
		val="${kv#*=}"
		val="${val//\'/\'\\\'\'}"
		printf "export %s='%s'\n" "$key" "$val"
	done
} >"$rootfs/lab/env.sh"
for spec in "${adds[@]}"; do
	src="${spec%%:*}"
	dest="${spec#*:}"
	[ "$src" != "$spec" ] && [ "${dest:0:1}" = / ] || die "--add wants SRC:/ABS/DEST, got '$spec'"
	[ -e "$src" ] || die "--add source not found: $src"
	case "$dest" in */) dest="$dest$(basename "$src")" ;; esac
	mkdir -p "$rootfs$(dirname "$dest")"
	cp -rL "$src" "$rootfs$dest"
done
(cd "$rootfs" && find . | cpio -o -H newc -R 0:0 --quiet) >"$work/initrd.cpio" ||
	die "building the initramfs failed"
t_initrd="$(elapsed "$t_start")"

# --- boot -------------------------------------------------------------------------------
if [ "$LAB_ARCH" = arm64 ]; then
	# qemu's virt machine has one usable UART (PL011, ttyAMA0): the console. The fallback
	# data channel is a named virtio-serial port (virtio_console and virtio_pci are built into
	# Debian's arm64 kernels) saved to a host file. pauth-impdef: QEMU's own pointer
	# authentication algorithm, much faster under TCG than the architected QARMA5.
	append="console=ttyAMA0 panic=-1 loglevel=1 nokaslr${extra_append:+ $extra_append}"
	# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
	qemu_cmd=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -accel tcg -m "$mem" -smp 1
		-nographic -no-reboot -nic none -serial mon:stdio
		-device virtio-serial-pci -chardev "file,id=klplabdata,path=$work/data.bin"
		-device virtserialport,chardev=klplabdata,name=klplab.out
		-kernel "$kernel" -initrd "$work/initrd.cpio" -append "$append")
else
	append="console=ttyS0 panic=-1 loglevel=1${extra_append:+ $extra_append}"
	qemu_cmd=(qemu-system-x86_64 -accel tcg -cpu max -m "$mem" -smp 1 -nographic -no-reboot
		-nic none -serial mon:stdio -serial "file:$work/data.bin"
		-kernel "$kernel" -initrd "$work/initrd.cpio" -append "$append")
fi
if [ "${KLPSYM_LAB_NO_SHM:-0}" != 1 ]; then
	# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
	qemu_cmd+=(-object "memory-backend-file,id=klplabout,share=on,mem-path=$work/out.mem,size=${out_mb}M"
		-device ivshmem-plain,memdev=klplabout)
fi
t_boot="$(now)"
qemu_rc=0
if [ "${KLPSYM_LAB_VERBOSE:-0}" = 1 ]; then
	timeout -k 5 "$timeout_s" "${qemu_cmd[@]}" </dev/null 2>&1 | tee "$work/console.raw" >&2 ||
		qemu_rc=$?
else
	timeout -k 5 "$timeout_s" "${qemu_cmd[@]}" </dev/null >"$work/console.raw" 2>&1 || qemu_rc=$?
fi
t_vm="$(elapsed "$t_boot")"

# --- collect ----------------------------------------------------------------------------
res="$work/result"
mkdir -p "$res"
tr -d '\r' <"$work/console.raw" >"$res/console.log"

fail() {
	rm -rf "$out.failed"
	mkdir -p "$(dirname "$out")"
	cp -r "$res" "$out.failed"
	{
		printf '[lab] ERROR: %s\n' "$*"
		printf '[lab] last console lines (full log: %s/console.log):\n' "$out.failed"
		tail -n 25 "$res/console.log" | sed 's/^/    /'
	} >&2
	exit 1
}

[ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ] && fail "guest timed out after ${timeout_s}s"
[ "$qemu_rc" = 0 ] || fail "qemu exited with status $qemu_rc"

# Marked lines: "@@KLPLAB@@ NAME TEXT" -> TEXT appended to $res/NAME. The marker may follow
# kernel output on the same console line, so match it anywhere.
awk -v mark="$MARK " -v dir="$res" '
	{
		i = index($0, mark); if (i == 0) next
		rest = substr($0, i + length(mark))
		sp = index(rest, " ")
		name = sp ? substr(rest, 1, sp - 1) : rest
		text = sp ? substr(rest, sp + 1) : ""
		if (name !~ /^[A-Za-z0-9][A-Za-z0-9._-]*$/) { print "bad result name: " name > "/dev/stderr"; next }
		if (name == "BOOTED" || name == "GUEST_DONE" || name == "DATA" || name == "RC") name = "lab-" name
		print text > (dir "/" name)
	}' "$res/console.log"

[ -f "$res/lab-BOOTED" ] || fail "the guest never reached /init (kernel did not boot?)"
[ -f "$res/lab-RC" ] || fail "the guest did not finish (no RC line; panic?)"
guest_rc="$(tail -n1 "$res/lab-RC")"
data_line="$(tail -n1 "$res/lab-DATA" 2>/dev/null || true)"
[[ "$data_line" =~ ^(shm|serial)\ bytes=([0-9]+) ]] ||
	fail "the guest could not send its /out folder ('$data_line')"
channel="${BASH_REMATCH[1]}"
want="${BASH_REMATCH[2]}"
if [ "$channel" = shm ]; then
	magic="$(head -c 8 "$work/out.mem" 2>/dev/null || true)"
	[ "$magic" = KLPLAB01 ] || fail "shared memory: no KLPLAB01 header (found '$magic')"
	got="$(od -An -tu8 -j8 -N8 "$work/out.mem" | tr -d ' ')"
	[ "$got" = "$want" ] || fail "shared memory: header says $got bytes, the guest sent $want"
	dd if="$work/out.mem" iflag=skip_bytes,count_bytes skip=16 count="$got" bs=1M status=none |
		tar -xf - -C "$res" || fail "shared memory: corrupt tar"
else
	log "shared memory unusable (see console.log), data came over the serial port"
	got="$(stat -c %s "$work/data.bin" 2>/dev/null || echo 0)"
	[ "$got" = "$want" ] || fail "serial data: got $got bytes, the guest sent $want"
	tar -xzf "$work/data.bin" -C "$res" || fail "serial data: corrupt tar.gz"
fi
printf '%s\n' "$guest_rc" >"$res/guest-rc"
{
	echo "initramfs_s=$t_initrd"
	echo "vm_wall_s=$t_vm"
	echo "data_channel=$channel"
	echo "data_bytes=$got"
	echo "guest_booted_uptime_s=$(awk '{print $2}' "$res/lab-BOOTED")"
	echo "guest_done_uptime_s=$(awk '{print $1}' "$res/lab-GUEST_DONE" 2>/dev/null)"
	echo "total_s=$(elapsed "$t_start")"
} >"$res/timings"
[ "$guest_rc" = 0 ] || fail "the guest script exited with status $guest_rc"

rm -rf "$out" "$out.failed"
mkdir -p "$(dirname "$out")"
mv "$res" "$out"
log "VM run done in $(elapsed "$t_start")s (qemu ${t_vm}s, $got bytes via $channel) -> $out"
