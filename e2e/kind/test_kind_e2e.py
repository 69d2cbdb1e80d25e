"""kind e2e (marker ``kind``): runs e2e/kind/run.sh — kind cluster, chart installed with the real helm,
every preset applied as a K3Deployment, the invalid example refused by the API server's CEL, teardown.

Run: ``python3 -m pytest e2e/kind -m kind``. Skips with the script's preflight reason where kind, docker,
kubectl, helm or the node image cannot be had (as on the project's CI machines, testinfra.md §1a).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.kind

SCRIPT = Path(__file__).resolve().parent / "run.sh"
from e2e.kind.kindpreflight import preflight


def test_invalid_example_refused_by_the_api_server():
    preflight(SCRIPT)
    res = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1800, check=False)
    assert res.returncode == 0 and res.stdout.strip().endswith("E2E OK"), res.stderr[-4000:]
