#!/usr/bin/env bash
# klpsym as a Debian package, installed and used: builds it (scripts/build-deb.sh), installs it
# with dpkg -i, runs the README's first-contact commands through the installed /usr/bin/klpsym
# (against the running kernel and the lab's package), checks the manual pages and completions
# are where man and the shells look, then removes it. Usage: scripts/check-deb.sh IMAGE.deb
set -euo pipefail
cd "$(dirname "$0")/.."
image="${1:?usage: check-deb.sh IMAGE.deb}"
fail() { echo "check-deb: $*" >&2; exit 1; }
deb="$(bash scripts/build-deb.sh | tail -n 1)"
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Architecture\|Depends\):/  &/p'
dpkg -i "$deb" >/dev/null
trap 'dpkg -r klpsym >/dev/null 2>&1 || true' EXIT
bin=/usr/bin/klpsym
[ -x "$bin" ] || fail "$bin is not installed"
"$bin" --version
# First contact, on the running kernel (as root, /proc/kallsyms shows addresses).
if [ -r /proc/kallsyms ]; then
	"$bin" sympos init_once >/dev/null || [ $? = 1 ] || fail "sympos init_once on the running kernel"
	"$bin" lookup init_once >/dev/null || [ $? = 1 ] || fail "lookup init_once on the running kernel"
fi
# The same questions of a Debian kernel package: the answers the library gives.
out="$("$bin" sympos init_once -k "$image")" || fail "sympos on $image"
n="$(grep -c 'vmlinux' <<<"$out")"
[ "$n" -gt 1 ] || fail "sympos init_once listed $n definitions"
set +e
"$bin" lookup init_once -k "$image" >/dev/null
[ $? = 1 ] || fail "lookup init_once: expected exit 1 (ambiguous)"
"$bin" lookup init_once --sympos "$n" -k "$image" >/dev/null || fail "lookup init_once --sympos $n"
set -e
# Manual pages and completions where man and the shells look for them.
for page in klpsym klpsym-check klpsym-sympos; do
	[ -f "/usr/share/man/man1/$page.1.gz" ] || fail "no /usr/share/man/man1/$page.1.gz"
done
zcat /usr/share/man/man1/klpsym.1.gz | grep -q '^\.TH' || fail "klpsym.1 is not a roff page"
# A verb's page names itself as man finds it and shows the command as typed.
zcat /usr/share/man/man1/klpsym-check.1.gz | grep -q '^klpsym\\-check' ||
	fail "klpsym-check.1's NAME does not read klpsym-check"
zcat /usr/share/man/man1/klpsym-check.1.gz | sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' | grep -q 'klpsym check' ||
	fail "klpsym-check.1's SYNOPSIS does not read 'klpsym check'"
# Every page the main page's SEE ALSO names is installed.
for page in $(zcat /usr/share/man/man1/klpsym.1.gz | grep -o 'klpsym\\-[a-z]*(1)' | sed 's/\\//; s/(1)//' | sort -u); do
	[ -f "/usr/share/man/man1/$page.1.gz" ] || fail "klpsym.1 names $page(1), not installed"
done
# Stripped: no symbol table or DWARF left in the installed binary.
if readelf -S "$bin" | grep -qE ' \.(symtab|debug_info) '; then
	fail "$bin is not stripped ($(du -h "$bin" | cut -f1))"
fi
# Every relative link of the installed README resolves where the package put it.
doc=/usr/share/doc/klpsym
for link in $(grep -o '](\([^)#:]*\))' "$doc/README.md" | sed 's/^](//; s/)$//' | sort -u); do
	[ -e "$doc/$link" ] || fail "README.md links $link: not at $doc/$link"
done
if command -v man >/dev/null 2>&1; then
	MANPAGER=cat man klpsym 2>/dev/null | grep -q 'livepatch' || fail "man klpsym does not render"
fi
bash -c '. /usr/share/bash-completion/completions/klpsym && complete -p klpsym' >/dev/null ||
	fail "the bash completion does not define a completion for klpsym"
[ -s /usr/share/zsh/vendor-completions/_klpsym ] || fail "no zsh completion"
[ -s /usr/share/fish/vendor_completions.d/klpsym.fish ] || fail "no fish completion"
echo "check-deb: $deb installs and answers (init_once: $n definitions; man pages, completions and documents in place; binary $(du -h "$bin" | cut -f1), stripped)"
