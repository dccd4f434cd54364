# Guest side of reloc-oracle.sh (busybox sh, sourced by /init after guest-lib.sh).
#
# Loads every case module of /lab/reloc/cases.txt (/lab/reloc/<case>.ko), one after the
# other in this one boot, each with exactly one finit_module(2) call, and writes for each
# case $OUT/<case>/:
#   errno     0 when the module loaded, else the errno name (ENOEXEC, ...)
#   dmesg     the kernel lines printed during that load, timestamps stripped, between its
#             kmark lines (the host keeps what lies between them: klpsym_testkit::klog)
#   sections  (loaded modules) "NAME ADDR" for every file of /sys/module/<case>/sections/
# and, after all loads, $OUT/kallsyms (/proc/kallsyms, read as root: real addresses).
# Loaded modules stay loaded, so that kallsyms shows them all.
R=/lab/reloc

dmesg >"$OUT/boot-dmesg.txt"
while read -r c; do
	[ -n "$c" ] || continue
	o="$OUT/$c"
	mkdir -p "$o"
	dmesg -c >/dev/null
	kmark begin "$c"
	res="$(load_module "$R/$c.ko")"
	kmark end "$c"
	errno="$(echo "$res" | sed -n 's/.* errno=\([A-Z0-9]*\).*/\1/p')"
	echo "${errno:-?}" >"$o/errno"
	dmesg -c | sed 's/^\[[ 0-9.]*\] //' >"$o/dmesg"
	if [ "$errno" = 0 ] && [ -d "/sys/module/$c/sections" ]; then
		for f in /sys/module/"$c"/sections/* /sys/module/"$c"/sections/.*; do
			[ -f "$f" ] || continue
			echo "$(basename "$f") $(cat "$f")"
		done | LC_ALL=C sort >"$o/sections"
	fi
	emit cases "$c errno=${errno:-?}"
done <"$R/cases.txt"
cat /proc/kallsyms >"$OUT/kallsyms"
exit 0
