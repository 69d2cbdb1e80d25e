"""The committed parser dumps are what their released wheels give: tools/engine_parsers/dump.py is re-run
against each wheel in the cache and must reproduce the committed file byte for byte.

The wheels come from `bash .ci/setup_engine_wheels.sh` (tier engine_wheels); without them the test skips, except
under CI=true, where a missing wheel fails (CI prepares them).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tiers
from tools.engine_parsers import dump as dump_tool

REPO = Path(__file__).resolve().parents[2]

TARGETS = dump_tool.catalog_targets()


def test_the_catalog_names_a_wheel_for_every_released_dump():
    assert {(e, v) for e, v, _ in TARGETS} >= {("vllm", "0.33.0"), ("vllm", "0.11.0"), ("vllm", "0.28.0"),
                                                ("sglang", "0.5.23")}


@pytest.mark.engine
@pytest.mark.engine_wheels
@pytest.mark.parametrize("engine,version,path", TARGETS, ids=[f"{e}=={v}" for e, v, _ in TARGETS])
def test_dump_matches_its_wheel(engine, version, path, tmp_path):
    tiers.engine_wheel(dump_tool.DIST[engine], version)     # skips outside CI, fails under CI=true
    out = tmp_path / path.name
    p = subprocess.run([sys.executable, str(REPO / "tools" / "engine_parsers" / "dump.py"), f"{engine}=={version}",
                        "--out", str(out)], capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert out.read_text() == path.read_text(), (
        f"{path.name} differs from its wheel: regenerate with `python3 tools/engine_parsers/dump.py` and review")
