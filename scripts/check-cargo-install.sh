#!/usr/bin/env bash
# README's first way to install, exercised: `cargo install --locked --path crates/klpsym-cli`
# into a temporary root, then the README's first-contact questions through the installed
# binary. CI passes KLPSYM_INSTALL_PROFILE=ci and builds in this target folder, so nothing is
# compiled twice. Usage: scripts/check-cargo-install.sh IMAGE.deb
set -euo pipefail
cd "$(dirname "$0")/.."
image="${1:?usage: check-cargo-install.sh IMAGE.deb}"
fail() { echo "check-cargo-install: $*" >&2; exit 1; }
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
CARGO_TARGET_DIR="$PWD/target" cargo install -q --locked --path crates/klpsym-cli \
	--root "$root" --profile "${KLPSYM_INSTALL_PROFILE:-release}"
bin="$root/bin/klpsym"
[ -x "$bin" ] || fail "cargo install left no $bin"
"$bin" --version
out="$("$bin" sympos init_once -k "$image")" || fail "sympos on $image"
n="$(grep -c 'vmlinux' <<<"$out")"
[ "$n" -gt 1 ] || fail "sympos init_once listed $n definitions"
"$bin" lookup init_once --sympos "$n" -k "$image" >/dev/null || fail "lookup init_once --sympos $n"
echo "check-cargo-install: cargo install --locked --path crates/klpsym-cli installs and answers (init_once: $n definitions)"
