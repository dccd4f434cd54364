# Guest side of livepatch-oracle.sh (busybox sh, sourced by /init after guest-lib.sh).
#
# Runs every case listed in /lab/lp/cases.txt, one after the other in this one boot, from
# its plan file /lab/lp/<case>/plan, whose lines are:
#   patch NAME                 the patch module's name (= /sys/kernel/livepatch/NAME)
#   load patch GUESTPATH FLAGS finit_module(2) the patch module (exactly one call, with FLAGS)
#   load module GUESTPATH NAME finit_module(2) a module of the kernel package
#   exercise CMD...            after all loads: run CMD, record its output
# and writes $OUT/<case>/oracle.txt (format: ../livepatch/README.md) and
# $OUT/<case>/kallsyms-modules.txt. Between cases everything is unloaded again: the patch
# is disabled (enabled=0), its sysfs folder must vanish (transition done), then rmmod of
# the patch and of the modules in reverse load order.
LP=/lab/lp
LIVEPATCH=/sys/kernel/livepatch
TRACING=/sys/kernel/tracing

# The walks, counted with kprobes: klp_find_callback runs once per kallsyms entry the
# kernel's lookups visit (every walk before 6.2, module walks since), klp_match_callback
# (6.2+) once per match of a name-sorted vmlinux lookup, and kallsyms_expand_symbol (often a
# .constprop clone) once per vmlinux name read: every entry of a walk before 6.2, every name
# the binary search of kallsyms_lookup_names() and its scan over equal names compare since.
# After each load step the oracle records how many calls that step made ("visits=<probe>
# <count>"), for comparison with klpsym check's symbols_visited.
PROBES=""
mount -t tracefs nodev "$TRACING" 2>/dev/null || true
_expand="$(sed -n '/ [tT] kallsyms_expand_symbol$/{s/.* //p;q;};/ [tT] kallsyms_expand_symbol\./{s/.* //p;q;}' /proc/kallsyms)"
for _p in klp_find_callback:klp_find_callback klp_match_callback:klp_match_callback \
	${_expand:+kallsyms_expand_symbol:$_expand}; do
	_ev="${_p%%:*}"
	if echo "p:klpsym_$_ev ${_p#*:}" >>"$TRACING/kprobe_events" 2>/dev/null &&
		echo 1 >"$TRACING/events/kprobes/klpsym_$_ev/enable" 2>/dev/null; then
		PROBES="$PROBES $_ev"
	fi
done

# probe_hits FN: the kprobe's hit count so far.
probe_hits() {
	_h="$(sed -n "s/^ *klpsym_$1 *\([0-9]*\).*/\1/p" "$TRACING/kprobe_profile")"
	echo "${_h:-0}"
}

# sleep_short: 0.1 s (busybox sleep takes fractions when built with FANCY_SLEEP).
sleep_short() { sleep 0.1 2>/dev/null || sleep 1; }

# wait_transition PATCH: until PATCH's transition is 0 or its folder is gone; 1 on timeout.
wait_transition() {
	_i=0
	while [ -d "$LIVEPATCH/$1" ] && [ "$(cat "$LIVEPATCH/$1/transition" 2>/dev/null)" != 0 ]; do
		_i=$((_i + 1))
		[ "$_i" -gt 300 ] && return 1
		sleep_short
	done
	return 0
}

# wait_gone PATCH: until PATCH's sysfs folder is gone (unpatching finished and the patch
# freed); 1 on timeout.
wait_gone() {
	_i=0
	while [ -d "$LIVEPATCH/$1" ]; do
		_i=$((_i + 1))
		[ "$_i" -gt 300 ] && return 1
		sleep_short
	done
	return 0
}

# klog KEY: drain the kernel log (dmesg -c) into KEY=<line> lines, timestamps stripped, the
# step's kmark lines included: the host keeps what lies between them (klpsym_testkit::klog),
# and nothing here filters.
klog() {
	dmesg -c | sed 's/^\[[ 0-9.]*\] //' >/tmp/klog
	while IFS= read -r _l; do
		echo "$1=$_l"
	done </tmp/klog
}

run_case() {
	c="$1"
	plan="$LP/$c/plan"
	o="$OUT/$c"
	mkdir -p "$o"
	f="$o/oracle.txt"
	p="$(sed -n 's/^patch //p' "$plan")"
	mods=""
	verdict=accepted
	: >/tmp/addr_enable
	dmesg -c >/dev/null
	{
		echo "case=$c"
		echo "patch=$p"
		echo "kernel=$(uname -r)"
	} >"$f"
	while read -r kind a b name; do
		[ "$kind" = load ] || continue
		# A patch line's fourth field is finit_module(2)'s flags (3: ignore symbol versions
		# and vermagic, as modprobe --force).
		flags=0
		if [ "$a" = patch ]; then
			echo "load=patch $p" >>"$f"
			flags="${name:-0}"
			[ "$flags" = 0 ] || echo "load_flags=$flags" >>"$f"
		else
			echo "load=module $name" >>"$f"
		fi
		for _fn in $PROBES; do eval "before_$_fn=$(probe_hits "$_fn")"; done
		kmark begin "$c load $a $name"
		res="$(load_module "$b" "" "$flags")"
		for _fn in $PROBES; do
			eval "_b=\$before_$_fn"
			echo "visits=$_fn $(($(probe_hits "$_fn") - _b))" >>"$f"
		done
		rc="$(echo "$res" | sed -n 's/.* rc=\([-0-9]*\) .*/\1/p')"
		errno="$(echo "$res" | sed -n 's/.* errno=\([A-Z0-9]*\).*/\1/p')"
		{
			echo "rc=${rc:-?}"
			echo "errno=${errno:-?}"
		} >>"$f"
		[ "$rc" = 0 ] || verdict=refused
		[ "$rc" = 0 ] && [ "$a" = module ] && mods="$name $mods"
		wait_transition "$p" || echo "note=transition still 1 after 30 s" >>"$f"
		kmark end "$c load $a $name"
		klog dmesg >>"$f"
		sed -n 's/^KLPADDR /addr_enable /p' /tmp/klog >>/tmp/addr_enable
	done <"$plan"
	if [ -d "$LIVEPATCH/$p" ]; then
		echo "enabled=$(cat "$LIVEPATCH/$p/enabled")" >>"$f"
		echo "transition=$(cat "$LIVEPATCH/$p/transition")" >>"$f"
		# Every object folder (Debian 5.10's have no `patched` attribute, seen in the lab).
		for od in "$LIVEPATCH/$p"/*/; do
			[ -d "$od" ] || continue
			ob="$(basename "$od")"
			echo "object=$ob patched=$(cat "$od/patched" 2>/dev/null || echo '?')" >>"$f"
			for fd in "$od"*/; do
				[ -d "$fd" ] && echo "func=$ob $(basename "$fd")" >>"$f"
			done
		done
	else
		echo "enabled=absent" >>"$f"
	fi
	cat /tmp/addr_enable >>"$f"
	if [ -r "/sys/module/$p/parameters/klp_addrs" ]; then
		sed 's/^KLPADDR /addr /' "/sys/module/$p/parameters/klp_addrs" >>"$f"
	fi
	# The module lines of /proc/kallsyms while the patch is loaded: with the capture's vmlinux
	# lines and the sysfs lines above, what `klpsym status` is judged against (outside the
	# guest, so a boot depends only on the bytes it boots).
	grep "	\[" /proc/kallsyms >"$o/kallsyms-modules.txt"
	if [ -d "$LIVEPATCH/$p" ]; then
		sed -n 's/^exercise //p' "$plan" >/tmp/exercises
		while IFS= read -r cmd; do
			echo "run=$cmd" >>"$f"
			kmark begin "$c run"
			sh -c "$cmd" >/tmp/run.out 2>&1 </dev/null
			kmark end "$c run"
			sed 's/^/out=/' /tmp/run.out >>"$f"
			klog run_dmesg >>"$f"
			sed -n 's/^KLPREL /reloc /p' /tmp/klog >>"$f"
		done </tmp/exercises
	fi
	echo "verdict=$verdict" >>"$f"
	# Teardown, so that the next case starts from a kernel without patches or modules.
	cleanup=ok
	kmark begin "$c teardown"
	if [ -d "$LIVEPATCH/$p" ]; then
		echo 0 >"$LIVEPATCH/$p/enabled" || cleanup="failed: enabled=0 refused"
		wait_gone "$p" || cleanup="failed: patch $p still in $LIVEPATCH after 30 s"
	fi
	if [ -d "/sys/module/$p" ]; then
		rmmod "$p" >/tmp/rmmod.out 2>&1 || cleanup="failed: rmmod $p: $(cat /tmp/rmmod.out)"
	fi
	for m in $mods; do
		rmmod "$m" >/tmp/rmmod.out 2>&1 || cleanup="failed: rmmod $m: $(cat /tmp/rmmod.out)"
	done
	kmark end "$c teardown"
	klog teardown >>"$f"
	echo "cleanup=$cleanup" >>"$f"
	emit cases "$c verdict=$verdict cleanup=$cleanup"
}

dmesg >"$OUT/boot-dmesg.txt"
while read -r c; do
	[ -n "$c" ] && run_case "$c"
done <"$LP/cases.txt"
exit 0
