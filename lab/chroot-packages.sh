# Sourced after lab/lib.sh by lab/toolchain.sh and lab/klp-build/build.sh: packages added once
# to one of the lab's debootstrap chroots, recorded in a stamp file inside it.

# chroot_add_packages ROOT STAMP RECIPE CC LOG WHAT PACKAGE...: unless the first line of
# ROOT/STAMP is RECIPE already, installs the packages with the chroot's own apt (its output in
# LOG), checks that CC runs there and writes STAMP: RECIPE, then CC's version line (which the
# build keys of what the chroot compiles read). WHAT names the packages in the log.
chroot_add_packages() {
	local root="$1" stamp="$2" recipe="$3" cc="$4" logf="$5" what="$6" t0
	shift 6
	if [ -f "$root/$stamp" ] && [ "$(head -n1 "$root/$stamp")" = "$recipe" ]; then
		return 0
	fi
	t0="$(now)"
	log "apt-get install $* in $root"
	# sid's Release carries a Valid-Until date (a week ahead); a mirror snapshot may be past it:
	# the chroot's lists are only read once, here, so its date is not checked (debootstrap
	# does not check it either).
	in_toolchain "$root" /bin/sh -c "apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Check-Date=false update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $* && apt-get clean" \
		</dev/null >"$logf" 2>&1 ||
		die "installing $* in $root failed (log: $logf)"
	chroot "$root" "$cc" --version >/dev/null || die "$root has no working $cc"
	{
		printf '%s\n' "$recipe"
		chroot "$root" "$cc" --version | head -n1
	} >"$root/$stamp.tmp"
	mv "$root/$stamp.tmp" "$root/$stamp"
	log "$what added to $root in $(elapsed "$t0")s: $(sed -n 2p "$root/$stamp")"
}
