#!/usr/bin/env bash
# The README's library example (crates/klpsym/examples/quickstart.rs) against a kernel
# package: it must run, and its answers must be the command's for the same questions.
# Usage: scripts/check-quickstart.sh IMAGE.deb LIVEPATCH_DIR (the lab's: a case's module).
set -euo pipefail
cd "$(dirname "$0")/.."
deb="${1:?usage: check-quickstart.sh IMAGE.deb LIVEPATCH_DIR}"
lp="${2:?usage: check-quickstart.sh IMAGE.deb LIVEPATCH_DIR}"
ko="$lp/unique/klp_unique.ko"
cargo build -q --profile ci -p klpsym --example quickstart
cargo build -q --profile ci -p klpsym-cli
out="$(target/ci/examples/quickstart "$deb" "$ko" init_once)"
printf '%s\n' "$out"
fail() { echo "check-quickstart: $*" >&2; exit 1; }
pos="$(grep -c '^definition ' <<<"$out")"
[ "$pos" -gt 0 ] || fail "no definition of init_once listed"
addr="$(sed -n "s/^lookup init_once,$pos: //p" <<<"$out")"
want="$(target/ci/klpsym lookup init_once --sympos "$pos" --kernel "$deb" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["address"])')"
[ "$addr" = "$want" ] || fail "lookup init_once,$pos: the example says '$addr', klpsym lookup '$want'"
sym="$(sed -n 's/^symbolize \(0x[0-9a-f]*\): //p' <<<"$out")"
at="$(sed -n 's/^symbolize \(0x[0-9a-f]*\): .*/\1/p' <<<"$out")"
want="$(target/ci/klpsym addr "$at" --kernel "$deb" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["addresses"][0]["text"])')"
[ "$sym" = "$want" ] || fail "symbolize $at: the example says '$sym', klpsym addr '$want'"
verdict="$(sed -n 's/^check: //p' <<<"$out")"
want="$(target/ci/klpsym check "$ko" --kernel "$deb" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["report"]["verdict"]["kind"])')"
case "$verdict:$want" in
"Accepted:accepted" | "RefusedAtLoad:refused_at_load" | "RefusedWhenModuleLoads:refused_when_module_loads" | "OrdinaryModule:ordinary_module") ;;
*) fail "check: the example says '$verdict', klpsym check '$want'" ;;
esac
echo "check-quickstart: the example's answers are klpsym's (init_once,$pos at $addr; $sym; $verdict)"
