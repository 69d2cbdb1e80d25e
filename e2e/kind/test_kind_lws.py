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
from e2e.kind.kindpreflight import preflight


def test_every_rendered_topology_object_is_admitted_by_a_real_lws():
    preflight(SCRIPT, timeout=600)
    res = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1800, check=False)
    assert res.returncode == 0 and res.stdout.strip().endswith("LWS E2E OK"), res.stderr[-4000:]
