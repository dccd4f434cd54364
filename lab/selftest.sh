#!/usr/bin/env bash
# Self-test of the lab harness against the real kernel; prints "N passed, N failed" last.
#   1. capture-kallsyms.sh: outputs present and plausible (vmlinux symbols, module lines);
#   2. capture-kallsyms.sh again: served from the cache in under 10 s, outputs unchanged;
#   3. an out-of-tree module built against the unpacked headers loads in the VM with exactly
#      one FINIT line per load, and a second load reports EEXIST.
# Needs root, apt-get and ~700 MB in $KLPSYM_LAB_CACHE; ~1 min on a cold machine.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

passed=0 failed=0
check() {
	local what="$1"
	shift
	if "$@"; then
		passed=$((passed + 1))
		log "ok: $what"
	else
		failed=$((failed + 1))
		log "FAILED: $what"
	fi
}

work="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-selftest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# --- 1. capture ---------------------------------------------------------------------------
t0="$(now)"
"$LAB_SRC_DIR/capture-kallsyms.sh" >"$work/cap1.env" || die "capture-kallsyms.sh failed"
log "first capture run: $(elapsed "$t0")s"
load_kernel_env
cap="$KLPSYM_LAB_DIR/capture"

nomod_plausible() {
	local f="$cap/kallsyms-nomod.txt"
	[ "$(wc -l <"$f")" -ge 50000 ] &&
		grep -q '^ffffffff81000000 T _text$' "$f" &&
		! grep -q '	\[' "$f" &&
		# mawk (Debian's awk) has no {16} intervals: check the length instead.
		awk 'NF != 3 || length($1) != 16 || $1 ~ /[^0-9a-f]/ || $2 !~ /^[a-zA-Z]$/ { bad = 1; exit }
			END { exit bad }' "$f"
}
mods_plausible() {
	local f="$cap/kallsyms-mods.txt" name
	# Every module line reads "<16 hex> <letter> <name>\t[<module>]".
	grep -qP '^[0-9a-f]{16} [a-zA-Z] \S+\t\[crc7\]$' "$f" || return 1
	while IFS=$'\t' read -r name _; do
		grep -q "	\[$name\]\$" "$f" || return 1
	done <"$cap/modules-loaded.txt"
	[ "$(wc -l <"$cap/modules-loaded.txt")" -ge 4 ]
}
exported_and_dependency() {
	# An exported symbol (upper-case type) of a module, and a module used by another.
	grep -qP '^[0-9a-f]{16} T crc7_be\t\[crc7\]$' "$cap/kallsyms-mods.txt" &&
		grep -qE '^llc [0-9]+ [1-9][0-9]* ' "$cap/proc-modules.txt"
}
check "kallsyms-nomod.txt holds vmlinux symbols only" nomod_plausible
check "kallsyms-mods.txt holds the loaded modules' symbols" mods_plausible
check "an exported module symbol and a module dependency were captured" exported_and_dependency

# --- 2. cached second run -----------------------------------------------------------------
md5_before="$(md5sum "$cap/kallsyms-mods.txt")"
t0="$(now)"
FORCE=0 "$LAB_SRC_DIR/capture-kallsyms.sh" >"$work/cap2.env" || die "second capture-kallsyms.sh failed"
t_warm="$(elapsed "$t0")"
log "second capture run: ${t_warm}s"
check "second capture run is served from the cache (<10 s)" awk -v t="$t_warm" 'BEGIN { exit !(t < 10) }'
check "second capture run leaves the outputs unchanged" \
	test "$md5_before" = "$(md5sum "$cap/kallsyms-mods.txt")"

# --- 3. out-of-tree module build + single finit call -------------------------------------
mkdir -p "$work/hello"
cat >"$work/hello/hello.c" <<'EOF'
#include <linux/module.h>
#include <linux/init.h>
static int __init hello_init(void) { pr_info("klplab hello loaded\n"); return 0; }
static void __exit hello_exit(void) { }
module_init(hello_init);
module_exit(hello_exit);
MODULE_LICENSE("GPL");
EOF
echo 'obj-m := hello.o' >"$work/hello/Makefile"
built() { make -s -C "$HEADERS_DIR" M="$work/hello" modules >"$work/make.log" 2>&1 && [ -f "$work/hello/hello.ko" ]; }
check "a module builds against the unpacked headers" built
if [ -f "$work/hello/hello.ko" ]; then
	cat >"$work/load.sh" <<'EOF'
load_module /hello.ko
load_module /hello.ko
dmesg | grep -c 'klplab hello loaded' >"$OUT/hello-count"
exit 0
EOF
	"$LAB_SRC_DIR/run-vm.sh" --script "$work/load.sh" --add "$work/hello/hello.ko:/" \
		--out "$work/vm" </dev/null || log "run-vm.sh failed"
	finit_lines() {
		[ "$(grep -c '^FINIT' "$work/vm/finit.log")" = 2 ] &&
			grep -q '^FINIT /hello.ko rc=0 errno=0$' "$work/vm/finit.log" &&
			grep -q '^FINIT /hello.ko rc=-1 errno=EEXIST$' "$work/vm/finit.log" &&
			[ "$(cat "$work/vm/hello-count")" = 1 ]
	}
	check "finit makes one call per load (rc=0, then EEXIST)" finit_lines
fi

echo "lab selftest: $passed passed, $failed failed"
[ "$failed" = 0 ]
