#!/usr/bin/env bash
# The Python package as a user gets it: a fresh virtualenv, `pip install ./python` (maturin
# builds the extension from the workspace), then its pytest suite against the lab's packages
# (KLPSYM_TEST_* as scripts/test.sh exports them). KLPSYM_PY_PROFILE chooses the cargo profile
# the extension is built with (default release; CI passes ci, whose artifacts the tests built).
# Usage: scripts/check-python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${KLPSYM_PY_PROFILE:-release}"
venv="$(mktemp -d "${TMPDIR:-/tmp}/klpsym-venv.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
CARGO_TARGET_DIR="$PWD/target" pip install --quiet --config-settings=build-args="--profile=$profile" ./python pytest
python -c 'import klpsym, sys; print("klpsym", klpsym.__version__, "for Python", sys.version.split()[0])'
# From the repository's root: the installed package is imported, not python/klpsym's sources.
# Bounded: a test that waits for an event bounds itself, and the whole suite is stopped (and
# fails) after 15 minutes whatever happens, so a lost event can never hold CI to its limit.
KLPSYM_BIN="${KLPSYM_BIN:-$PWD/target/ci/klpsym}" timeout -k 10 900 python -m pytest -q -p no:cacheprovider python/tests
