#!/usr/bin/env bash
# docs/verification.md's "verified against", livepatch-matrix, file:line and seed tables, from
# what the last test run judged.
#
# Usage: scripts/lab-tables.sh LAB_ENV_FILES SUMMARY
#   LAB_ENV_FILES  the lab kernels (lab.env files, ':'-separated: KLPSYM_TEST_LAB_KERNELS)
#   SUMMARY        what the livepatch-oracle test judged per kernel (KLPSYM_TEST_SUMMARY;
#                  written only when every kernel agreed with klpsym)
# scripts/test.sh runs it after the tests pass and writes target/lab-tables.md. Markdown on
# stdout.
set -euo pipefail
envs="${1:?usage: lab-tables.sh LAB_ENV_FILES SUMMARY}"
summary="${2:?usage: lab-tables.sh LAB_ENV_FILES SUMMARY}"
[ -s "$summary" ] || { echo "lab-tables.sh: $summary is empty: the oracle test did not pass" >&2; exit 1; }
# The binary scripts/test.sh built (its ci profile), else a release build.
# The binary the tests ran (profile ci), built when missing; KLPSYM_BIN names another.
klpsym="${KLPSYM_BIN:-$(dirname "$0")/../target/ci/klpsym}"
[ -x "$klpsym" ] || (cd "$(dirname "$0")/.." && cargo build -q --profile ci -p klpsym-cli)

get() { sed -n "s/^$2=//p" "$1"; }
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

IFS=: read -r -a files <<<"$envs"
# Kernels without the livepatch oracle (LIVEPATCH_SKIPPED=, e.g. Debian's arm64 kernels have
# no CONFIG_LIVEPATCH): in the first table only, with what applies to them.
lp_files=()
for f in "${files[@]}"; do [ -n "$(get "$f" LIVEPATCH_DIR)" ] && lp_files+=("$f"); done

# reloc_cell ENV: the relocation oracle's cases (lab_reloc judged them before this runs):
# relocations read back from loaded modules, their distinct types, and the refused modules.
reloc_cell() {
	local dir rels n types refused
	dir="$(get "$1" RELOC_DIR)"
	if [ -z "$dir" ]; then
		printf -- '-'
		return
	fi
	rels="$(awk '$2 == "loaded" { print $1 }' "$dir/index.txt" | while read -r c; do
		sed -n '/^Relocation section .\.rela\.klpsym_reloc/,/^$/p' "$dir/$c/relocs.txt" | awk '$3 ~ /^R_/ { print $3 }'
	done)"
	n="$(grep -c . <<<"$rels")"
	types="$(sort -u <<<"$rels" | grep -c .)"
	refused="$(awk '$2 == "refused"' "$dir/index.txt" | wc -l)"
	printf '%s relocations of %s types read back; %s refusals' "$n" "$types" "$refused"
}

echo "| kernel | arch | image | modules | tables (dump byte-identical to the booted kernel) | livepatch cases matched | klp relocation targets | visit counts (kprobe) | relocation arithmetic (ordinary modules) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for f in "${files[@]}"; do
	rel="$(get "$f" RELEASE)"
	line="$(grep "^release=$rel " "$summary" || true)"
	format="$("$klpsym" info --kernel "$(get "$f" VMLINUZ)" --json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["format"] or "?")' 2>/dev/null || echo "?")"
	modfmt="$(sed -n 2p "$(get "$f" MODULES_LOADED)" | awk -F'\t' '{ n = $2; sub(/.*\.ko/, ".ko", n); print n }')"
	if [ -z "$(get "$f" LIVEPATCH_DIR)" ]; then
		printf '| Debian %s (%s) | %s | %s | %s | vmlinuz; with %s modules | n/a (%s) | - | - | %s |\n' \
			"$rel" "$(get "$f" SUITE)" "$(get "$f" ARCH)" "$format" "$modfmt" \
			"$(wc -l <"$(get "$f" MODULES_LOADED)")" "$(get "$f" LIVEPATCH_SKIPPED)" "$(reloc_cell "$f")"
		continue
	fi
	[ -n "$line" ] || { echo "lab-tables.sh: $rel is not in $summary" >&2; exit 1; }
	index="$(get "$f" LIVEPATCH_DIR)/index.txt"
	skipped="$(awk '$2 == "skipped"' "$index" | wc -l)"
	total="$(wc -l <"$index")"
	visits="$(field "$line" visits)"
	[ "$visits" = 0 ] && visits="-"
	printf '| Debian %s (%s) | %s | %s | %s | vmlinuz, vmlinux, -dbg vmlinux; with %s modules | %s of %s (%s not applicable) | %s | %s | %s |\n' \
		"$rel" "$(get "$f" SUITE)" "$(get "$f" ARCH)" "$format" "$modfmt" \
		"$(wc -l <"$(get "$f" MODULES_LOADED)")" "$(field "$line" compared)" "$total" "$skipped" \
		"$(field "$line" relocations)" "$visits" "$(reloc_cell "$f")"
done

echo
printf '| case |'
for f in "${lp_files[@]}"; do printf ' %s |' "$(get "$f" RELEASE)"; done
echo
printf '| --- |'
for _ in "${lp_files[@]}"; do printf ' --- |'; done
echo
cases="$(awk '{ print $1 }' "$(get "${lp_files[0]}" LIVEPATCH_DIR)/index.txt")"
for c in $cases; do
	printf '| `%s` |' "$c"
	for f in "${lp_files[@]}"; do
		o="$(get "$f" LIVEPATCH_DIR)/$c/oracle.txt"
		v="$(awk -v c="$c" '$1 == c { print $2 }' "$(get "$f" LIVEPATCH_DIR)/index.txt")"
		case "$v" in
		skipped) printf ' n/a (%s) |' "$(sed -n -e 's/^skipped=not applicable: [^ ]* has no //p' \
			-e 's/^skipped=not applicable: loaded on the kernels of \(.*\) only$/\1 only/p' "$o")" ;;
		refused)
			# the first kernel line of the refusal, shortened
			why="$(sed -n 's/^dmesg=//p' "$o" | grep -v -e 'taints kernel' -e 'tainting kernel' -e '^KLP' \
				-e '^klplab: ' -e '^tsc: ' -e '^clocksource: ' \
				-e 'enabling patch' -e 'transition' -e 'patching complete' -e 'applying patch' \
				-e 'reverting patch' -e 'unpatching' | head -n1 | cut -c1-60)"
			printf ' refused: %s |' "${why//|/\\|}" ;;
		*) printf ' %s |' "$v" ;;
		esac
	done
	echo
done

# file:line against the two addr2lines (crates/klpsym-elf/tests/lab_lines.rs's summary lines).
echo
echo "| kernel | vmlinux addresses | as binutils | as llvm-addr2line | binutils: another file or line 0 | binutils: a neighbouring row | llvm: another name | in \`__pfx_\` padding | module addresses | as binutils |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
grep '^file-line ' "$summary" | while IFS= read -r line; do
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(field "$line" release)" \
		"$(field "$line" vmlinux_addresses)" "$(field "$line" as_binutils)" "$(field "$line" as_llvm)" \
		"$(field "$line" binutils_file_habit)" "$(field "$line" binutils_neighbour_row)" \
		"$(field "$line" llvm_naming_habit)" "$(field "$line" padding)" \
		"$(field "$line" module_addresses)" "$(field "$line" module_as_binutils)"
done

echo
echo "| kernel | relocations | load (finit_module) | longest a 1 ms task waited | TCP retransmits (loopback, 1 KiB/ms) | klpsym: entries visited | longest unbroken | preemption | idle baseline |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for f in "${lp_files[@]}"; do
	results="$(get "$f" SEED_RESULTS)"
	[ -n "$results" ] || continue
	base="$(grep '^SEED module=- ' "$results" | tr ' ' '\n' | sed -n 's/^max_us=//p')"
	grep '^SEED module=klp_seed_' "$results" | while IFS= read -r line; do
		m="$(field "$line" module)"
		n="${m#klp_seed_}"
		n="${n%.ko}"
		cost="$("$klpsym" check "$(get "$f" SEED_DIR)/$m" -k "$(get "$f" VMLINUZ)" --json |
			python3 -c 'import json,sys; c=json.load(sys.stdin)["results"][0]["resolution_cost"]; print(c["symbols_visited"], c["longest_unbroken_visits"], c["preemption"])')" ||
			{ echo "lab-tables.sh: klpsym check of $m failed" >&2; exit 1; }
		read -r visited unbroken preempt <<<"$cost"
		printf '| %s | %s | %.2f s | %.1f ms | %s | %s | %s | %s | %.1f ms |\n' "$(get "$f" RELEASE)" "$n" \
			"$(awk -v u="$(field "$line" load_us)" 'BEGIN { print u / 1e6 }')" \
			"$(awk -v u="$(field "$line" max_us)" 'BEGIN { print u / 1e3 }')" \
			"$(field "$line" retrans)" "$visited" "$unbroken" "$preempt" "$(awk -v u="$base" 'BEGIN { print u / 1e3 }')"
	done
done
