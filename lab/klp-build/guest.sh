# The klp-build kernel's guest (busybox sh, sourced by /init after guest-lib.sh): loads the
# modules klp-build made, one step each, and records per step in $OUT/<step>.txt:
#   load=<module file>   rc=<finit_module rc>   errno=<NAME>
#   dmesg=<line>         every kernel line the step printed, its kmark lines included (the
#                        host keeps what lies between them: klpsym_testkit::klog)
#   observe <what> <value>   what the patched functions show from user space (only the new
#                            code prints the klp-* marks the patches add)
#   func=<name,pos>      the functions livepatch's sysfs lists for the patch
#   note=<text>          what makes the record unusable (a transition that did not end)
K=/lab/klp
LIVEPATCH=/sys/kernel/livepatch

rec() {
	_f="$1"
	shift
	echo "$*" >>"$OUT/$_f.txt"
}

# kernel_lines STEP: the kernel's lines since the previous call (timestamps dropped).
kernel_lines() {
	dmesg -c 2>/dev/null | sed 's/^\[ *[0-9.]*\] //' | while IFS= read -r _l; do
		rec "$1" "dmesg=$_l"
	done
}

# load STEP KO: one finit_module(2) call, bracketed by kmark lines.
load() {
	rec "$1" "load=$(basename "$2")"
	kmark begin "$1 load $(basename "$2")"
	_res="$(load_module "$2")"
	kmark end "$1 load $(basename "$2")"
	rec "$1" "rc=$(echo "$_res" | sed -n 's/.* rc=\([-0-9]*\).*/\1/p')"
	rec "$1" "errno=$(echo "$_res" | sed -n 's/.* errno=\([A-Z0-9]*\).*/\1/p')"
}

# settle STEP PATCH: until PATCH's transition ends; its functions as sysfs lists them.
settle() {
	# A patch the kernel refused has no folder: nothing to wait for.
	[ -d "$LIVEPATCH/$2" ] || return 1
	_i=0
	while [ -f "$LIVEPATCH/$2/transition" ] && [ "$(cat "$LIVEPATCH/$2/transition")" = 1 ]; do
		_i=$((_i + 1))
		if [ "$_i" -gt 600 ]; then
			rec "$1" "note=the transition of $2 did not end in 60 s"
			return 1
		fi
		sleep 0.1 2>/dev/null || sleep 1
	done
	for _d in "$LIVEPATCH/$2"/*/*/; do
		[ -d "$_d" ] && rec "$1" "func=$(basename "$(dirname "$_d")") $(basename "$_d")"
	done
	return 0
}

# unload STEP PATCH: disable, wait, remove.
unload() {
	kmark begin "$1 unload"
	echo 0 >"$LIVEPATCH/$2/enabled" 2>/dev/null || rec "$1" "note=cannot disable $2"
	_i=0
	while [ -d "$LIVEPATCH/$2" ] && [ "$_i" -lt 600 ]; do
		_i=$((_i + 1))
		sleep 0.1 2>/dev/null || sleep 1
	done
	rmmod "$2" 2>/dev/null || rec "$1" "note=cannot remove $2"
	kmark end "$1 unload"
	kernel_lines "$1-unload"
}

observe() {
	rec "$1" "observe $2 $(cat "$3" 2>&1 | head -n1)"
}

dmesg -c >/dev/null 2>&1
# Each step's kernel lines come in brackets: the load ("STEP load FILE"), the wait for its
# transition ("STEP settle": what livepatch prints until "patching complete"), what user
# space then did ("STEP run": the new code's own lines) and the unload ("STEP unload").
# 1. vmlinux: type_show (reboot.c and serial_core.c), clones, static data.
observe vmlinux reboot_type_before /sys/kernel/reboot/type
observe vmlinux tty_type_before /sys/class/tty/ttyS0/type
load vmlinux "$K/livepatch-vmlinux.ko"
kmark begin "vmlinux settle"
settle vmlinux livepatch_vmlinux
settled=$?
kmark end "vmlinux settle"
kernel_lines vmlinux
if [ "$settled" = 0 ]; then
	kmark begin "vmlinux run"
	observe vmlinux reboot_type /sys/kernel/reboot/type
	observe vmlinux tty_type /sys/class/tty/ttyS0/type
	echo "0 0 0 0" >/proc/sys/vm/lowmem_reserve_ratio 2>/dev/null
	observe vmlinux lowmem_reserve_ratio /proc/sys/vm/lowmem_reserve_ratio
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null
	head -n1 /proc/kallsyms >/dev/null
	kmark end "vmlinux run"
	kernel_lines vmlinux
	unload vmlinux livepatch_vmlinux
fi
# 2. A module's function: kobject-example loaded first (ordinary module), then the patch.
load kobject "$K/modules/kobject-example.ko"
# Where the kernel placed it, for the check made with it loaded.
cat /proc/kallsyms >"$OUT/kallsyms-kobject.txt"
observe kobject bar_before /sys/kernel/kobject_example/bar
load kobject "$K/livepatch-kobject.ko"
kmark begin "kobject settle"
settle kobject livepatch_kobject
settled=$?
kmark end "kobject settle"
kernel_lines kobject
if [ "$settled" = 0 ]; then
	kmark begin "kobject run"
	observe kobject bar /sys/kernel/kobject_example/bar
	kmark end "kobject run"
	kernel_lines kobject
	unload kobject livepatch_kobject
fi
# 3. A function without an ftrace call site: refused at enable.
load notrace "$K/livepatch-notrace.ko"
kernel_lines notrace
exit 0
