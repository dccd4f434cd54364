#!/usr/bin/env bash
# Capture /proc/kallsyms (and friends) from the real Debian kernel booted under QEMU.
#
# Outputs in $KLPSYM_LAB_DIR/capture/ (KLPSYM_LAB_DIR as printed by fetch-kernel.sh):
#   kallsyms-nomod.txt    /proc/kallsyms with no module loaded (vmlinux symbols only)
#   kallsyms-mods.txt     /proc/kallsyms after loading the modules below
#   proc-modules.txt      /proc/modules after loading
#   modules-loaded.txt    "<name>\t<path relative to MODULES_DIR>" in load order
#   module-sections.txt   "<module> <section> <address>" for each loaded module, from
#                         /sys/module/<module>/sections (where the loader put each section)
#   finit.log             one "FINIT <path> rc=<n> errno=<name>" line per load
#   dmesg.txt             the kernel log at the end
#   console.log timings   from run-vm.sh
#
# Modules: KLPSYM_LAB_MODULES (default below) names modules as modprobe would (dashes or
# underscores); their dependencies come from the package's modules.dep and are loaded first,
# each with exactly one finit_module(2) call. The default set covers: exported symbols
# (crc7, crc_itu_t, llc, stp, garp, mrp), a dependency chain (8021q -> garp, mrp -> stp -> llc),
# a dash in the file name (crc-itu-t.ko -> crc_itu_t), a driver (dummy) and a filesystem
# (minix).
#
# Cached: the boot is skipped when every output exists, is newer than the booted kernel, and was
# made for the same module list by the same version of this script; FORCE=1 re-captures.
# Prints KALLSYMS_NOMOD=, KALLSYMS_MODS=, CAPTURE_DIR= on stdout.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEFAULT_MODULES="crc7 crc-itu-t dummy minix 8021q"
OUTPUTS=(kallsyms-nomod.txt kallsyms-mods.txt proc-modules.txt modules-loaded.txt module-sections.txt finit.log dmesg.txt)

# resolve_load_order MODULES_DIR NAME...: print "<name>\t<relative path>" for the modules and
# all their dependencies, every dependency before the modules that need it.
resolve_load_order() {
	local mdir="$1"
	shift
	awk -v want="$*" '
		function norm(p,   b) { b = p; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b); gsub(/-/, "_", b); return b }
		function visit(p,   n, i, d) {
			if (state[p] == 2) return
			if (state[p] == 1) { print "dependency cycle at " p > "/dev/stderr"; exit 3 }
			state[p] = 1
			n = split(deps[p], d, " ")
			# modprobe loads the list right to left; any order works since visit() recurses.
			for (i = n; i >= 1; i--) visit(d[i])
			state[p] = 2
			print norm(p) "\t" p
		}
		{ key = $1; sub(/:$/, "", key); sub(/^[^:]*:[ ]*/, ""); deps[key] = $0; path[norm(key)] = key }
		END {
			n = split(want, w, " ")
			for (i = 1; i <= n; i++) {
				m = w[i]; gsub(/-/, "_", m)
				if (!(m in path)) { print "module " w[i] " not found in modules.dep" > "/dev/stderr"; exit 2 }
				visit(path[m])
			}
		}' "$mdir/modules.dep"
}

# The guest side: runs in the initramfs with guest-lib.sh loaded.
write_guest_script() {
	cat >"$1" <<'EOF'
if [ -n "$(cat /proc/modules)" ]; then
	emit error "modules already loaded before the capture: $(cut -d' ' -f1 /proc/modules)"
	exit 1
fi
cat /proc/kallsyms >"$OUT/kallsyms-nomod.txt"
fail=0
: >"$OUT/modules-loaded.txt"
: >"$OUT/finit.log"
while IFS="$(printf '\t')" read -r name path; do
	if load_module "/modules/$path"; then
		printf '%s\t%s\n' "$name" "$path" >>"$OUT/modules-loaded.txt"
	else
		emit error "loading $path failed"
		fail=1
	fi
done </lab/load-order.txt
cat /proc/kallsyms >"$OUT/kallsyms-mods.txt"
cat /proc/modules >"$OUT/proc-modules.txt"
# Where the loader put each section of each loaded module (root reads real addresses): the
# truth klpsym's module layout is held to, independent of /proc/kallsyms.
: >"$OUT/module-sections.txt"
while IFS="$(printf '\t')" read -r name path; do
	for f in /sys/module/"$name"/sections/* /sys/module/"$name"/sections/.*; do
		[ -f "$f" ] || continue
		printf '%s %s %s\n' "$name" "$(basename "$f")" "$(cat "$f")" >>"$OUT/module-sections.txt"
	done
done <"$OUT/modules-loaded.txt"
dmesg >"$OUT/dmesg.txt"
exit $fail
EOF
}

# check_capture DIR: sanity checks on what came back; die with the reason.
check_capture() {
	local dir="$1" n name
	n="$(wc -l <"$dir/kallsyms-nomod.txt")"
	[ "$n" -ge 50000 ] || die "kallsyms-nomod.txt has only $n lines"
	grep -q '	\[' "$dir/kallsyms-nomod.txt" && die "kallsyms-nomod.txt contains module symbols"
	awk '$1 != "0000000000000000" { found = 1; exit } END { exit !found }' "$dir/kallsyms-nomod.txt" ||
		die "kallsyms-nomod.txt has only zero addresses (kptr_restrict?)"
	# amd64: ffffffff81000000; arm64 (nokaslr): ffff800080000000.
	grep -qE '^ffff(ffff8|8000)[0-9a-f]* T _text$' "$dir/kallsyms-nomod.txt" ||
		die "kallsyms-nomod.txt has no '_text' text symbol"
	while IFS=$'\t' read -r name _; do
		grep -q "^$name " "$dir/proc-modules.txt" || die "module $name missing from /proc/modules"
		grep -q "	\[$name\]\$" "$dir/kallsyms-mods.txt" ||
			die "kallsyms-mods.txt has no symbol of module $name"
	done <"$dir/modules-loaded.txt"
}

# capture MODULES PARAMS: the cache check and the VM run, under the capture lock (two
# concurrent runs would both replace the capture folder).
capture() {
	local modules="$1" params="$2" cap="$KLPSYM_LAB_DIR/capture" f fresh=1 order
	if [ "${FORCE:-0}" != 1 ] && [ -f "$cap/.params" ] && [ "$(cat "$cap/.params")" = "$params" ]; then
		for f in "${OUTPUTS[@]}"; do
			[ -s "$cap/$f" ] && [ "$cap/$f" -nt "$BOOT_KERNEL" ] || fresh=0
		done
	else
		fresh=0
	fi
	if [ "$fresh" = 1 ]; then
		log "capture is up to date in $cap (FORCE=1 to redo)"
		return 0
	fi
	work="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-capture.XXXXXX")"
	trap 'rm -rf "$work"' EXIT
	order="$work/load-order.txt"
	# A module of the list that this kernel builds in or lacks (crc7 is built in since 7.x) is
	# left out, saying so; the others are still captured.
	local m present=()
	for m in $modules; do
		if grep -qE "(^|/)$(tr _ - <<<"$m" | sed 's/-/[-_]/g')\.ko(\.[a-z]+)?:" "$MODULES_DIR/modules.dep"; then
			present+=("$m")
		else
			log "module $m is not a module of $KERNEL_RELEASE (built in or absent): left out of the capture"
		fi
	done
	[ "${#present[@]}" -gt 0 ] || die "none of the modules '$modules' is a module of $KERNEL_RELEASE"
	resolve_load_order "$MODULES_DIR" "${present[@]}" >"$order" ||
		die "cannot resolve modules '$modules' in $MODULES_DIR/modules.dep"
	log "load order: $(cut -f1 "$order" | tr '\n' ' ')"
	local adds=(--add "$order:/lab/load-order.txt") path
	while IFS=$'\t' read -r _ path; do
		adds+=(--add "$MODULES_DIR/$path:/modules/$path")
	done <"$order"
	write_guest_script "$work/guest.sh"
	"$LAB_SRC_DIR/run-vm.sh" --kernel "$BOOT_KERNEL" --script "$work/guest.sh" \
		--out "$cap" "${adds[@]}" || die "the capture VM run failed"
	check_capture "$cap"
	printf '%s\n' "$params" >"$cap/.params"
	log "captured $(wc -l <"$cap/kallsyms-nomod.txt") + $(grep -c '	\[' "$cap/kallsyms-mods.txt") module symbols"
}

main() {
	local t0 modules params
	t0="$(now)"
	modules="${KLPSYM_LAB_MODULES:-$DEFAULT_MODULES}"
	load_kernel_env
	params="image=${IMAGE_SHA256:-} modules=$modules script=$(md5sum <"${BASH_SOURCE[0]}" | cut -d' ' -f1)"
	with_lock "$KLPSYM_LAB_DIR/.capture.lock" capture "$modules" "$params"
	log "capture-kallsyms done in $(elapsed "$t0")s"
	printf 'CAPTURE_DIR=%s\nKALLSYMS_NOMOD=%s\nKALLSYMS_MODS=%s\n' \
		"$KLPSYM_LAB_DIR/capture" "$KLPSYM_LAB_DIR/capture/kallsyms-nomod.txt" \
		"$KLPSYM_LAB_DIR/capture/kallsyms-mods.txt"
}

main "$@"
