"""Compile cache per start, from the engine's own lines: the real vLLM CPU engine started twice on one
cache directory without --enforce-eager. First start: torch inductor's FX graph cache misses (it
compiles); second start: it hits, and the compile phase is shorter.

vLLM 0.32's CPU build compiles with CompilationMode.DYNAMO_TRACE_ONCE (vllm/platforms/cpu.py:355-376),
so vLLM's own compiled-graph cache lines (compilation/backends.py) are never printed, and its AOT
artefact cannot be reloaded on CPU (decorators.py:315 calls finalize_loading, which the plain inductor
function lacks: "Compiling model again due to a load failure", tests/fixtures/logs/vllm-0.32.0-cpu-
compiled-warm.log). The test therefore turns AOT off and reads torch's cache lines, printed at INFO with
TORCH_LOGS=torch._inductor.codecache. The two logs recorded this way are tests/fixtures/logs/
vllm-0.32.0-cpu-compile-cache-{miss,hit}.log.

What is compiled does not matter for the claim (the second start on one cache directory hits and compiles for
less time), so the model is cut to two decoder layers with dummy weights (`--hf-overrides`, `--load-format
dummy`, both parsed by the engine itself): the test's two starts took 855 s with the full model and 237 s with
two layers (pytest --durations, one 2-core machine with other work running both times)."""
from __future__ import annotations

import json

import pytest
from vllm_cpu_harness import preset_launch

from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.runtime.local import LocalProcess

pytestmark = pytest.mark.engine


def start(vllm_cpu, port: int, cache: dict[str, str]) -> dict:
    _doc, launch, _plan, argv, env = preset_launch(vllm_cpu, port, enforceEager=False)
    argv = [*argv, "--load-format", "dummy", "--hf-overrides", json.dumps({"num_hidden_layers": 2})]
    tracker = ColdStartTracker(engine="vllm")
    proc = LocalProcess(argv, host="127.0.0.1", port=port, env={**env, **cache}, tracker=tracker)
    proc.start()
    try:
        ready = proc.wait_ready(2400, interval_s=1.0)   # a compiled start on a shared 2-core VM: minutes
        assert ready.ready, ready.reason
    finally:
        proc.stop()
    return tracker.finish().to_dict()


@pytest.mark.timeout(5400)
def test_second_start_on_one_cache_directory_hits(vllm_cpu, free_port, tmp_path):
    cache = {"VLLM_CACHE_ROOT": str(tmp_path / "vllm"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
             "VLLM_USE_AOT_COMPILE": "0", "TORCH_LOGS": "torch._inductor.codecache"}
    first = start(vllm_cpu, free_port, cache)
    second = start(vllm_cpu, free_port, cache)
    assert first["compile_cache"]["state"] == "miss", first["compile_cache"]
    assert second["compile_cache"]["state"] == "hit", second["compile_cache"]
    assert "fx graph cache hit for key" in second["compile_cache"]["evidence"][0]
    assert second["compile_cache"]["compile_seconds"] < first["compile_cache"]["compile_seconds"]
