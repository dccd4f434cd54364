"""The lab's inputs, handed over by scripts/test.sh (KLPSYM_TEST_*), and a small kallsyms."""

import os
import pathlib
import subprocess
import json

import pytest

SAMPLE = """ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 t init_once
ffffffff81000140 T do_thing
ffffffff81000200 t init_once
ffffffff81000280 t init_once
ffffffff81000300 T _etext
ffffffffc0000000 t init_once\t[nf_tables]
ffffffffc0000040 T nft_do_chain\t[nf_tables]
ffffffffc0000080 t helper\t[nf_tables]
"""


@pytest.fixture
def sample(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "kallsyms"
    p.write_text(SAMPLE)
    return p


def lab(var: str) -> str:
    """A lab input; without it the test is skipped, and under KLPSYM_REQUIRE_LAB it fails."""
    v = os.environ.get(var)
    if not v:
        if os.environ.get("KLPSYM_REQUIRE_LAB"):
            pytest.fail(f"{var} is not set: no real kernel (run scripts/test.sh)")
        pytest.skip(f"{var} is not set: no real kernel (run scripts/test.sh)")
    return v


def cli(*args: str) -> dict:
    """The command's JSON answer (KLPSYM_BIN, else klpsym on PATH)."""
    exe = os.environ.get("KLPSYM_BIN", "klpsym")
    out = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    return json.loads(out.stdout)
