"""kind e2e of a real engine (marker ``kind``, issue 8 item 4): ``e2e/kind/run.sh --engine`` builds the
operator image (Dockerfile) and the CPU engine image (e2e/images/vllm-cpu: vLLM 0.32.0 CPU +
SmolLM2-135M), installs the chart with that operator, applies e2e/kind/smollm2-cpu.yaml, waits for
``status.phase`` Ready and checks here, from the resource as the API server returned it, that
``status.coldStart`` reports weights_load, kv_cache and server_ready and that a completion was served.

Run: ``python3 -m pytest e2e/kind -m kind -k engine``. Skips with the script's preflight reason where
kind, docker, kubectl, helm, the node/registry/base images (Docker Hub) or enough CPU and memory for the
rendered engine pod are missing (as on the project's CI machines, testinfra.md §1a).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.kind

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "run.sh"

from e2e.kind.k3status import coldstart_problems
from e2e.kind.kindpreflight import preflight


def test_cpu_engine_goes_ready_with_coldstart_phases(tmp_path):
    preflight(SCRIPT, "--engine", timeout=900)
    env = {**os.environ, "GPUSTACK_K3_E2E_OUT": str(tmp_path)}
    res = subprocess.run(["bash", str(SCRIPT), "--engine"], capture_output=True, text=True, timeout=3600,
                         check=False, env=env)
    assert res.returncode == 0 and res.stdout.strip().endswith("E2E OK"), res.stderr[-6000:]
    cr = json.loads((tmp_path / "smollm2-cpu.json").read_text())
    assert coldstart_problems(cr) == []
    names = [p["name"] for p in cr["status"]["coldStart"]["phases"]]
    assert names.index("weights_load") < names.index("kv_cache") < names.index("server_ready")
    completion = json.loads((tmp_path / "completion.json").read_text())
    assert completion["choices"][0]["text"].strip()
