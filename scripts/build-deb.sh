#!/usr/bin/env bash
# klpsym as a Debian package: the release binary (stripped), its manual pages (`klpsym man --dir`) and
# shell completions (`klpsym completions`), made from the clap definition by the binary
# itself, packed by cargo-deb (installed on first use). Writes target/debian/klpsym_*.deb and
# prints its path last. KLPSYM_DEB_PROFILE chooses the cargo profile (default release; CI
# passes ci, the build its tests made). Usage: scripts/build-deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb
profile="${KLPSYM_DEB_PROFILE:-release}"
cargo build --profile "$profile" -p klpsym-cli
bin="target/$profile/klpsym"
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" man --dir "$assets/man"
gzip -9n "$assets"/man/*.1
"$bin" completions bash >"$assets/completions/klpsym.bash"
"$bin" completions zsh >"$assets/completions/_klpsym"
"$bin" completions fish >"$assets/completions/klpsym.fish"
# Stripped, its debug info split off into /usr/lib/debug/.build-id (what a -dbgsym package
# would carry), so the installed binary is the size of its code.
deb="$(cargo deb -p klpsym-cli --profile "$profile" --no-build --separate-debug-symbols 2>&1 | tail -n 1)"
[ -f "$deb" ] || { echo "build-deb: cargo deb did not say where the package is: $deb" >&2; exit 1; }
echo "$deb"
