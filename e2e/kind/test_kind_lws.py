"""kind check of the rendered topologies against a real LWS v0.10.0 (marker ``kind``): runs e2e/kind/lws.sh —
kind cluster, the LWS release manifests applied server-side, every object of the three topology presets in both
forms applied with ``--dry-run=server``, teardown.

Run: ``python3 -m pytest e2e/kind -m kind -k lws``. Skips with the script's preflight reason where kind, docker,
kubectl, the node image or the LWS manifests cannot be had (as on the project's CI machines, testinfra.md §1a).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.kind

SCRIPT = Path(__file__).resolve().parent / "lws.sh"
PREFLIGHT_MISSING = 3


def test_every_rendered_topology_object_is_admitted_by_a_real_lws():
    res = subprocess.run(["bash", str(SCRIPT), "--preflight"], capture_output=True, text=True, timeout=600,
                         check=False)
    if res.returncode == PREFLIGHT_MISSING:
        reason = [ln for ln in res.stderr.splitlines() if "PREFLIGHT:" in ln]
        pytest.skip(reason[-1].split("PREFLIGHT:", 1)[1].strip() if reason else res.stderr.strip())
    assert res.returncode == 0, f"preflight failed unexpectedly: {res.stderr}"
    res = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1800, check=False)
    assert res.returncode == 0 and res.stdout.strip().endswith("LWS E2E OK"), res.stderr[-4000:]
