# Helpers sourced by /init before the guest script (busybox sh).
#
# Two ways to hand results back to the host (run-vm.sh):
# - files written under $OUT (=/out) come back as files in the host's output folder
#   (sent as one gzipped tar over the second serial port: fast, 8-bit clean, any size);
# - `emit NAME TEXT` prints a marked console line; the host appends TEXT to the file NAME in
#   its output folder (handy for short line-by-line results that should also be readable in
#   console.log).

# emit NAME TEXT...: one result line for the host file NAME.
emit() {
	_name="$1"
	shift
	echo "@@KLPLAB@@ $_name $*"
}

# emit_cmd NAME CMD...: run CMD and emit each of its output lines (stdout and stderr) to NAME.
emit_cmd() {
	_name="$1"
	shift
	"$@" 2>&1 | while IFS= read -r _line; do echo "@@KLPLAB@@ $_name $_line"; done
}

# load_module KO [PARAMS]: exactly one finit_module(2) call; the FINIT line goes to the
# console and to $OUT/finit.log. Returns finit's exit status (0 loaded, 1 refused, 2 usage).
load_module() {
	_res=$(/bin/finit "$@")
	_rc=$?
	echo "$_res"
	echo "$_res" >>"$OUT/finit.log"
	return $_rc
}

# kmark begin|end STEP: a marker line in the kernel log ("klplab: begin STEP"), so that the
# host reads exactly one step's kernel lines (klpsym_testkit::klog). Each write opens
# /dev/kmsg anew: the kernel rate-limits writes per open file, not across opens.
kmark() {
	echo "klplab: $1 $2" >/dev/kmsg
}
