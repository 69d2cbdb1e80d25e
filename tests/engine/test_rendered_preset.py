"""The real-engine tier end to end: our renderer's argv for the CPU preset, started by the local runtime
(whose log follow is the cold-start supervisor), tracked to Ready, serving a completion (issue 8 item 3);
then `coldstart LOG --spec` compares the engine's own memory figures with the plan (plan_check)."""
from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.coldstart_cmd import coldstart
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.core.launch import build_launch
from gpustack_k3.runtime.local import LocalProcess

pytestmark = pytest.mark.engine


def preset_launch(vllm_cpu, port: int, **vllm):
    """The CPU preset with this host's model path and port (and ``vllm`` spec overrides)."""
    data = load_catalog().presets["vllm-cpu-smollm2"].document
    doc = DeploymentDocument.model_validate(data)
    doc.spec.model.path = str(vllm_cpu.model)
    doc.spec.serving.port = port
    for k, v in vllm.items():
        setattr(doc.spec.vllm, k, v)
    launch, findings, plan = build_launch(doc)
    assert not [f for f in findings if f.severity == "error"]
    argv = [str(vllm_cpu.python), *launch.argv[1:]]          # `python` of the image = the venv's interpreter
    assert argv[1:3] == ["-m", "vllm.entrypoints.launchers.api_server.entry"]
    env = {k: v for k, v in launch.env.items() if not v.startswith("/cache/")}  # no /cache volume on this host
    return doc, launch, plan, argv, env


def test_cpu_preset_argv_runs_to_ready_with_phases_and_plan_check(vllm_cpu, free_port, tmp_path):
    import httpx

    port = free_port
    doc, launch, plan, argv, env = preset_launch(vllm_cpu, port)
    tracker = ColdStartTracker(engine="vllm")
    chunks: list[bytes] = []
    proc = LocalProcess(argv, host="127.0.0.1", port=port, env=env, on_output=chunks.append, tracker=tracker)
    proc.start()
    try:
        ready = proc.wait_ready(launch.startup_budget_s, interval_s=0.5)
        with proc.follower.lock:
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
    # the engine's own figures (cpu_worker.py:260, kv_cache_utils.py:2327 @0.32.0)
    mem = rep["memory"]
    assert mem["kv_cache_tokens"] > 0 and mem["concurrency_len"] == 1024 and mem["kv_cache_gib"] > 0
    # the same log through the CLI with the spec: planned vs engine, drift in percent
    log = tmp_path / "engine.log"
    log.write_bytes(b"".join(chunks))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc.model_dump(mode="json", exclude_none=True)))
    out = CliRunner().invoke(coldstart, [str(log), "--spec", str(spec), "-o", "json"])
    assert out.exit_code == 0, out.output
    check = json.loads(out.output)["plan_check"]
    by = {row["figure"]: row for row in check["figures"]}
    assert set(by) == {"kv_cache_gib", "kv_cache_tokens", "max_concurrency"} and check["not_printed"] == []
    assert by["kv_cache_tokens"]["engine"] == mem["kv_cache_tokens"]
    assert by["kv_cache_tokens"]["planned"] == plan.kv_cache_tokens
    assert all(abs(row["drift_pct"]) < 1.0 for row in check["figures"]), check   # the planner predicts this preset
