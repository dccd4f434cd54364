#!/usr/bin/env bash
# The library's example programs (crates/klpsym/examples/) against the lab's packages: each
# must run, and its answers must be the command's for the same questions.
# Usage: scripts/check-examples.sh IMAGE.deb DBG.deb VMLINUX_DBG LIVEPATCH_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
image="${1:?usage: check-examples.sh IMAGE.deb DBG.deb VMLINUX_DBG LIVEPATCH_DIR}"
dbg="${2:?}" vmlinux="${3:?}" lp="${4:?}"
fail() { echo "check-examples: $*" >&2; exit 1; }
cargo build -q --profile ci -p klpsym --examples
cargo build -q --profile ci -p klpsym-cli
ex=target/ci/examples klpsym=target/ci/klpsym
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/kernel" "$work/fleet"
ln -s "$image" "$dbg" "$work/kernel/"
ko="$lp/unique/klp_unique.ko"

# 1. definitions: positions and files, and the kernel's verdict for one file.
out="$("$ex/definitions" init_once fs/inode.c "$image" "$dbg")"
printf '%s\n' "$out" | head -12
pos="$(sed -n 's/^init_once in fs\/inode.c: position \([0-9]*\) at .*/\1/p' <<<"$out")"
want="$("$klpsym" lookup init_once --file fs/inode.c -k "$image" -k "$dbg" --json | json 'd["results"][0]["position"]')"
[ -n "$pos" ] && [ "$pos" = "$want" ] || fail "definitions: position '$pos', klpsym lookup --file says '$want'"
grep -q 'fs/inode.c:' <<<"$out" || fail "definitions: no source file and line listed"

# 2. symbolize: a batch of addresses as %pS, each as klpsym addr prints it.
addrs="$("$klpsym" sympos init_once -k "$image" --json | json '" ".join(c["address"] for c in d["results"][0]["candidates"])')"
set -- $addrs
batch=("$1" "$(printf '0x%x' $(($1 + 5)))" 0x10)
out="$("$ex/symbolize" "$image" "${batch[@]}")"
printf '%s\n' "$out"
for a in "${batch[@]}"; do
	# addr exits 1 when an address has no symbol (0x10 here): its JSON is the answer.
	want="$({ "$klpsym" addr "$a" -k "$image" --json || [ $? = 1 ]; } | json 'd["results"][0]["addresses"][0]["text"]')"
	got="$(awk -v a="$(printf '0x%016x' "$a")" '($1 "") == a { $1 = ""; sub(/^ /, ""); print }' <<<"$out")"
	[ "$got" = "$want" ] || fail "symbolize $a: the example says '$got', klpsym addr '$want'"
done

# 3. check_bindings: the patch on its own kernel (image + -dbg), built for the -dbg vmlinux.
out="$("$ex/check_bindings" "$ko" "$work/kernel" "$vmlinux")"
printf '%s\n' "$out"
grep -q ': Accepted$' <<<"$out" || fail "check_bindings: not accepted"
grep -q 'fs/proc/cmdline.c: as built' <<<"$out" || fail "check_bindings: cmdline_proc_show not bound as built with its file"

# 4. check_matrix: a folder with the kernel, a damaged package and a note: a record each.
ln -s "$image" "$work/fleet/"
head -c 100000 "$image" >"$work/fleet/linux-image-0.0.0-broken_0.0-1_amd64.deb"
echo "kernels for the fleet" >"$work/fleet/NOTES.txt"
out="$("$ex/check_matrix" "$ko" "$work/fleet" 2>"$work/notes")"
printf '%s\n' "$out"
[ "$(grep -c '"verdict"' <<<"$out")" = 1 ] || fail "check_matrix: expected one verdict"
[ "$(grep -c '"error"' <<<"$out")" = 1 ] || fail "check_matrix: expected one failed kernel"
want="$("$klpsym" check "$ko" -k "$image" --json | json 'd["results"][0]["report"]["verdict"]["kind"]')"
grep -q "\"verdict\":\"$want\"" <<<"$out" || fail "check_matrix: the verdict is not klpsym check's ($want)"
grep -q 'NOTES.txt' "$work/notes" || fail "check_matrix: the note was not passed over with a word"

# 5. cancel: an open stopped from another thread ends cancelled, promptly.
out="$("$ex/cancel" "$image" 1)"
printf '%s\n' "$out"
grep -q '^cancelled after 1 ms' <<<"$out" || fail "cancel: $out"
echo "check-examples: the five examples run and agree with the command"
