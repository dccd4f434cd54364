#!/usr/bin/env bash
# Forget every recorded boot of the lab, keeping what was downloaded and built: the next
# scripts/test.sh boots every kernel again (captures, the livepatch and relocation oracles,
# the seed experiment, the klp-build records) from the same packages, chroots, case modules
# and klp-build kernel. What a fresh machine's CI meets, minus the downloads and builds: run
# it, then the test command, to see that the suite stays green over boots that interleave
# their lines differently (docs/verification.md records such runs).
#
# Usage: lab/forget-boots.sh          (KLPSYM_LAB_CACHE, default /var/cache/klpsym-lab)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cache="${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"
[ -d "$cache" ] || die "no lab cache at $cache"
n=0
for d in "$cache"/*/; do
	[ -f "$d/lab.env" ] || continue
	# The capture (keyed by .params), the livepatch oracle's recorded boots (.boots/KEY), the
	# relocation oracle (.stamp) and the seed experiment's boot (.boot-key).
	rm -f "$d/capture/.params" "$d/reloc/.stamp" "$d/seed/.boot-key"
	rm -rf "$d/livepatch/.boots"
	n=$((n + 1))
done
# The klp-build records (oracle/, oracle-debian/ of each build, keyed by .key).
for k in "$cache"/klp-build/*/oracle*/.key; do
	[ -f "$k" ] && rm -f "$k"
done
log "forgot the recorded boots of $n lab kernels and the klp-build records; downloads, chroots and builds kept"
