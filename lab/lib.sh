# shellcheck shell=bash
# Shared helpers for the real-kernel lab scripts. Sourced, never executed.
#
# Conventions kept by every lab script:
# - machine-readable results (KEY=VALUE) go to stdout, everything else to stderr;
# - nothing reads stdin (CI runs us with no standard input);
# - every step is idempotent: a second run reuses what the first one left in the cache.

set -euo pipefail

LAB_SRC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Canonical (no symlink, absolute): the chroot builds bind-mount it at this very path.
LAB_CACHE="$(realpath -m "${KLPSYM_LAB_CACHE:-/var/cache/klpsym-lab}")"
export LAB_CACHE
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

# The kernel packages come from a private apt configuration per suite (its own sources list,
# lists and cache under $LAB_CACHE/apt/<suite>): the host's apt state is never used or
# touched, and any suite the archive serves (bullseye, bookworm, trixie, sid) works the same.
# KLPSYM_LAB_SUITE picks it (default bookworm); KLPSYM_LAB_MIRROR and
# KLPSYM_LAB_SECURITY_MIRROR the archives.
export LAB_SUITE="${KLPSYM_LAB_SUITE:-bookworm}"
# KLPSYM_LAB_ARCH: the kernel's Debian architecture, amd64 (default) or arm64. An arm64 kernel
# has its own apt configuration ($LAB_CACHE/apt/<suite>-arm64, APT::Architectures=arm64): its
# packages are downloaded and unpacked, never installed on the (amd64) host.
export LAB_ARCH="${KLPSYM_LAB_ARCH:-amd64}"
case "$LAB_ARCH" in
amd64 | arm64) ;;
*) die "KLPSYM_LAB_ARCH must be amd64 or arm64, not '$LAB_ARCH'" ;;
esac
# The folder and ABI suffix of non-amd64 kernels ("" for amd64, "-arm64" else): the arm64
# kernel of a suite must not share the amd64 kernel's folders.
LAB_ARCH_SUFFIX=""
[ "$LAB_ARCH" = amd64 ] || LAB_ARCH_SUFFIX="-$LAB_ARCH"
# KLPSYM_LAB_FLAVOUR: the Debian kernel flavour, the architecture's own by default (amd64,
# arm64); another flavour of the same release (cloud-amd64) is another build of one source
# with another configuration. Its packages are linux-image-<abi>-<flavour> and friends.
export LAB_FLAVOUR="${KLPSYM_LAB_FLAVOUR:-$LAB_ARCH}"
[[ "$LAB_FLAVOUR" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "KLPSYM_LAB_FLAVOUR must be a Debian flavour name (cloud-amd64), not '$LAB_FLAVOUR'"
# The folder suffix of a kernel ("" for the amd64 flavour, "-arm64", "-cloud-amd64"), and the
# kernel's name in the lab (the suite, or SUITE/FLAVOUR for a flavour other than the
# architecture's own): what a case's load_on= and built_for= name.
LAB_DIR_SUFFIX=""
[ "$LAB_FLAVOUR" = amd64 ] || LAB_DIR_SUFFIX="-$LAB_FLAVOUR"
export LAB_KERNEL_ID="$LAB_SUITE"
[ "$LAB_FLAVOUR" = "$LAB_ARCH" ] || LAB_KERNEL_ID="$LAB_SUITE/$LAB_FLAVOUR"
LAB_MIRROR="${KLPSYM_LAB_MIRROR:-http://deb.debian.org/debian}"
LAB_SECURITY_MIRROR="${KLPSYM_LAB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
LAB_APT_DIR="$LAB_CACHE/apt/$LAB_SUITE$LAB_ARCH_SUFFIX"
LAB_APT_OPTS=(
	-o "Dir::Etc::sourcelist=$LAB_APT_DIR/sources.list" -o "Dir::Etc::sourceparts=$LAB_APT_DIR/parts"
	-o "Dir::State::Lists=$LAB_APT_DIR/lists" -o "Dir::Cache=$LAB_APT_DIR/cache"
	-o "Dir::State::status=$LAB_APT_DIR/status" -o "Dir::Etc::preferences=$LAB_APT_DIR/preferences"
	-o "Dir::Etc::preferencesparts=$LAB_APT_DIR/parts" -o "APT::Architecture=$LAB_ARCH"
	-o "APT::Architectures::=$LAB_ARCH" -o "Acquire::Languages=none"
)
# A foreign kernel's configuration also lists amd64, as a second architecture: the kbuild
# package whose host tools (fixdep, modpost, objtool) must run here is the amd64 build
# (`apt-get download linux-kbuild-<ver>:amd64`).
[ "$LAB_ARCH" = amd64 ] || LAB_APT_OPTS+=(-o "APT::Architectures::=amd64")
LAB_APT_UPDATED=0

# lab_apt_update: refresh the suite's private lists (at most once per script run), under the
# suite's lock (concurrent lab runs share the lists).
lab_apt_update() {
	[ "$LAB_APT_UPDATED" = 0 ] || return 0
	mkdir -p "$LAB_APT_DIR/lists/partial" "$LAB_APT_DIR/cache/archives/partial" "$LAB_APT_DIR/parts"
	# A stable suite's newest kernel is often in its -security or -updates pocket.
	{
		printf 'deb %s %s main\n' "$LAB_MIRROR" "$LAB_SUITE"
		case "$LAB_SUITE" in
		# A backports pocket holds its kernels, headers and kbuild on its own.
		sid | unstable | experimental | *-backports) ;;
		*)
			printf 'deb %s %s-updates main\n' "$LAB_MIRROR" "$LAB_SUITE"
			printf 'deb %s %s-security main\n' "$LAB_SECURITY_MIRROR" "$LAB_SUITE"
			;;
		esac
	} >"$LAB_APT_DIR/sources.list.new"
	mv "$LAB_APT_DIR/sources.list.new" "$LAB_APT_DIR/sources.list"
	: >"$LAB_APT_DIR/preferences"
	touch "$LAB_APT_DIR/status"
	chown -R _apt "$LAB_APT_DIR/lists/partial" "$LAB_APT_DIR/cache/archives/partial" 2>/dev/null || true
	log "apt-get update ($LAB_SUITE, private lists in $LAB_APT_DIR)"
	# A suite's Release changes its Suite field when Debian releases (testing -> stable): the
	# lists kept from before must still update.
	with_lock "$LAB_APT_DIR/.lock" apt-get "${LAB_APT_OPTS[@]}" -o Acquire::AllowReleaseInfoChange::Suite=true \
		-o Acquire::AllowReleaseInfoChange::Codename=true -o Acquire::AllowReleaseInfoChange::Version=true \
		update -qq </dev/null >&2 || die "apt-get update of $LAB_SUITE failed"
	touch "$LAB_APT_DIR/.updated"
	LAB_APT_UPDATED=1
}

# lab_apt_fresh: the suite's lists were fetched less than a day ago (else they are fetched
# again: the archive keeps only each suite's newest kernel, and the lab follows it). apt keeps
# the server's dates on the list files, so the stamp is our own.
lab_apt_fresh() {
	if [ -z "$(find "$LAB_APT_DIR/.updated" -mmin -1440 2>/dev/null)" ] ||
		! compgen -G "$LAB_APT_DIR/lists/*Packages*" >/dev/null; then
		lab_apt_update
	fi
}

# lab_apt_cache ARGS...: apt-cache over the suite's lists.
lab_apt_cache() {
	lab_apt_fresh
	apt-cache "${LAB_APT_OPTS[@]}" "$@"
}

# lab_apt_download DIR PKG=VER: apt-get download into DIR from the suite's archive.
lab_apt_download() {
	lab_apt_fresh
	(cd "$1" && apt-get "${LAB_APT_OPTS[@]}" download -qq "$2" </dev/null >&2)
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
		KLPSYM_LAB_DIR | KLPSYM_LAB_ABI | KLPSYM_LAB_VERSION | KLPSYM_LAB_SUITE | KERNEL_RELEASE | VMLINUZ | VMLINUX | BOOT_KERNEL | MODULES_DIR | HEADERS_DIR | KBUILD_DIR | SYSTEM_MAP | CONFIG | IMAGE_DEB | IMAGE_SHA256)
			printf -v "$key" '%s' "$val"
			export "${key?}"
			;;
		esac
	done <<<"$out"
	# BOOT_KERNEL: what run-vm.sh boots (amd64: the ELF vmlinux, arm64: the raw Image).
	[ -n "${BOOT_KERNEL:-}" ] || die "fetch-kernel.sh printed no BOOT_KERNEL="
}

# in_toolchain ROOT CMD...: run CMD on the host (ROOT empty) or inside the chroot ROOT made by
# toolchain.sh. In the chroot the lab cache (headers, build folders) is bind-mounted at its own
# path and /proc is mounted (the newest objtool reads it), in a private mount namespace that
# vanishes with the command: nothing stays mounted.
in_toolchain() {
	local root="$1"
	shift
	if [ -z "$root" ]; then
		"$@"
		return
	fi
	unshare --mount --propagation private -- /bin/bash -c '
		set -e
		root="$1" cache="$2"
		shift 2
		mkdir -p "$root$cache"
		mount --bind "$cache" "$root$cache"
		mount -t proc proc "$root/proc"
		exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C "$@"
	' in_toolchain "$root" "$(realpath "$LAB_CACHE")" "$@"
}

# lab_module_cat FILE: a module's ELF bytes on stdout, whether the package ships it plain
# (.ko) or compressed (.ko.xz, .ko.zst, .ko.gz).
lab_module_cat() {
	case "$1" in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -dc "$1" ;;
	*.gz) gzip -dc "$1" ;;
	*) cat "$1" ;;
	esac
}
