# shellcheck shell=bash
# Shared helpers for the real-kernel lab scripts. Sourced, never executed.
#
# Conventions kept by every lab script:
# - machine-readable results (KEY=VALUE) go to stdout, everything else to stderr;
# - nothing reads stdin (CI runs us with no standard input);
# - every step is idempotent: a second run reuses what the first one left in the cache.

set -euo pipefail

LAB_SRC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LAB_CACHE="${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	printf '[lab] ERROR: %s\n' "$*" >&2
	exit 1
}

# Seconds since the epoch with sub-second precision, for timings in logs.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# apt-get update at most once per script run: a fresh machine has empty lists, and the
# archive only keeps the newest kernel ABI, so stale lists point at vanished .debs.
APT_UPDATED=0
apt_update_once() {
	if [ "$APT_UPDATED" = 0 ]; then
		log "apt-get update"
		apt-get update -qq </dev/null >&2 || die "apt-get update failed"
		APT_UPDATED=1
	fi
}

# ensure_packages PKG...: apt-get install the packages that are not installed yet.
ensure_packages() {
	local missing=() p installed
	# One dpkg-query for all: it prints only the packages it knows, with their state.
	installed="$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true)"
	for p in "$@"; do
		grep -qx "$p install ok installed" <<<"$installed" || missing+=("$p")
	done
	[ "${#missing[@]}" -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || die "need root to apt-get install: ${missing[*]}"
	apt_update_once
	log "apt-get install ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >&2 ||
		die "apt-get install ${missing[*]} failed"
}

# with_lock FILE CMD...: run CMD in a subshell under an exclusive flock so that concurrent
# lab runs do not write the same cache folder at once. Call it in a plain context (not after
# `if`, `||`, `&&`), else bash ignores `set -e` inside CMD; to look at its status, wrap it
# in `set +e; with_lock ...; rc=$?; set -e` (the subshell turns -e back on for itself).
with_lock() {
	local lockfile="$1"
	shift
	mkdir -p "$(dirname "$lockfile")"
	(
		set -e
		flock -w 900 9 || die "timed out waiting for lock $lockfile"
		"$@"
	) 9>"$lockfile"
}

# load_kernel_env: run fetch-kernel.sh and import its KEY=VALUE lines (only the known keys,
# so that nothing in its output is ever evaluated as code).
load_kernel_env() {
	local out line key val
	out="$("$LAB_SRC_DIR/fetch-kernel.sh")" || die "fetch-kernel.sh failed"
	while IFS= read -r line; do
		key="${line%%=*}"
		val="${line#*=}"
		case "$key" in
		KLPSYM_LAB_DIR | KLPSYM_LAB_ABI | KLPSYM_LAB_VERSION | KERNEL_RELEASE | VMLINUZ | VMLINUX | MODULES_DIR | HEADERS_DIR | SYSTEM_MAP | CONFIG)
			printf -v "$key" '%s' "$val"
			export "${key?}"
			;;
		esac
	done <<<"$out"
	[ -n "${VMLINUX:-}" ] || die "fetch-kernel.sh printed no VMLINUX="
}
