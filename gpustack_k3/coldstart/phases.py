"""Canonical cold-start phases, in order. The same names are used in CLI JSON, CR status and metrics.

Platform phases are reported by whoever watches the pod/container (operator, docker/local runners)
through ``ColdStartTracker.platform_event``; the others are read from the engine's own log.
"""
from __future__ import annotations

PLATFORM_PHASES: tuple[str, ...] = ("scheduled", "image_pull", "container_start")
LOG_PHASES: tuple[str, ...] = (
    "process_start",     # interpreter up, args parsed, engine processes spawned, distributed init
    "weights_download",  # hub download (vLLM "Time spent downloading weights", HF progress bars)
    "weights_load",      # checkpoint shards into GPU memory
    "compile",           # torch.compile / Dynamo / Inductor, CuTeDSL/Triton JIT
    "profile_run",       # vLLM's initial profiling/warm-up forward pass (memory profiling, JIT warm-up)
    "kv_cache",          # memory profiling and KV-cache allocation
    "cuda_graphs",       # warm-up per size and CUDA-graph capture (target and draft)
    "server_ready",      # engine init done → HTTP server declares itself ready
    "warm",              # first real request served after ready
)
PHASES: tuple[str, ...] = PLATFORM_PHASES + LOG_PHASES
PHASE_INDEX: dict[str, int] = {name: i for i, name in enumerate(PHASES)}

# Generous default stall budgets (seconds a phase may stay open). A cold start of Kimi-K3 on
# 8xB300 takes ~10 min end to end (docs/sources.md#cold-start); these budgets only catch real hangs.
DEFAULT_BUDGETS: dict[str, float] = {
    "scheduled": 1800.0,
    "image_pull": 3600.0,
    "container_start": 600.0,
    "process_start": 900.0,
    "weights_download": 7200.0,
    "weights_load": 1800.0,
    "compile": 1800.0,
    "profile_run": 1800.0,
    "kv_cache": 900.0,
    "cuda_graphs": 1800.0,
    "server_ready": 900.0,
}
