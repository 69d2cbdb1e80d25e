"""Seams where the cold-start log tracker plugs into the operator.

The controller calls ``observer.observe(key, pods)`` in every reconcile of resource ``key``
(``(namespace, name)``) with the pods it owns, and puts the returned snapshot into
``decide(... Observed(coldstart=snapshot))``. The observer follows the container logs itself
(``CoreV1Api.read_namespaced_pod_log(follow=True, _preload_content=False)``), feeds them to the
tracker in ``gpustack_k3.coldstart`` and calls ``enqueue(key)`` whenever the tracker's state
changes, so the next reconcile writes the new phase. ``forget(key)`` is called when the resource
is gone; ``close()`` when the operator stops.

The real observer is ``gpustack_k3.operator.coldstart_bridge.PodLogColdStart`` (the operator's
default). Cold-start histograms: the factory receives the operator's
``gpustack_k3.metrics.ColdStartMetrics`` (on the operator registry, served at ``/metrics``) and
passes its ``listener`` to each tracker.

The snapshot is a plain mapping (``ColdStartSnapshot``); ``decide`` reads:
``attempt`` (int, a container restart starts a new attempt), ``cacheWarm`` (bool | None),
``totalSeconds`` (container start → serving, when known),
``phases`` (list of {name, start, end, seconds}), ``current`` (phase name or None),
``weightsLoaded`` / ``graphsCaptured`` / ``graphsSkipped`` / ``serving`` / ``warm`` (bool
milestones), ``failedPhase`` / ``reason`` (when the attempt failed: the root cause), ``pod``, ``engine``,
``compileCache`` ({state: hit|miss|partial, hits, misses, compileSeconds}), ``memory`` (the engine's own
figures under their status names, ``MEMORY_STATUS_KEYS``) and
``verdict`` (None or {phase: Degraded|Failed, reason, message}: a phase over its budget → Degraded,
a crash → Failed); ``syncing`` (True while the log backlog is still being read after an operator
restart: ``decide`` then keeps the cold-start status it wrote last); ``warmup`` (the post-Ready warm-up's
summary, ``gpustack_k3.operator.warmup``: ok, seconds, completed, errors, ttftMsP50, ...; ``ok`` None while
it runs).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

from gpustack_k3.coldstart.plancheck import plan_check

Key = tuple[str, str]

# report "memory" figure (gpustack_k3/coldstart/catalog.py FIGURES) -> status.coldStart.memory key
# (gpustack_k3/api/v1alpha1/status.py EngineMemory); a test checks that every figure has one
MEMORY_STATUS_KEYS = {
    "kv_cache_gib": "kvCacheGiB", "kv_cache_tokens": "kvCacheTokens", "max_concurrency": "maxConcurrency",
    "concurrency_len": "concurrencyLen", "max_running_requests": "maxRunningRequests", "context_len": "contextLen",
    "mamba_cache_size": "mambaCacheSize", "mamba_state_gib": "mambaStateGiB", "kv_cache_blocks": "kvCacheBlocks",
}
# status.plan key (gpustack_k3/operator/hooks.py plan summary) -> report figure it plans
PLAN_FIGURES = {"kvCacheGiB": "kv_cache_gib", "kvTokens": "kv_cache_tokens", "maxConcurrency": "max_concurrency",
                "maxRunningRequests": "max_running_requests", "maxModelLen": "concurrency_len"}


def memory_status(memory: Mapping[str, Any]) -> dict[str, Any]:
    """A report's ``memory`` under the status names."""
    return {MEMORY_STATUS_KEYS[k]: v for k, v in memory.items() if k in MEMORY_STATUS_KEYS}


def plan_check_status(plan: Mapping[str, Any], memory: Mapping[str, Any] | None) -> dict | None:
    """``status.planCheck``: the plan summary next to the engine's figures (``status.coldStart.memory``),
    drift in percent; None until the engine printed a figure the plan has."""
    if not memory:
        return None
    inverse = {v: k for k, v in MEMORY_STATUS_KEYS.items()}
    planned = {PLAN_FIGURES[k]: v for k, v in plan.items() if k in PLAN_FIGURES and isinstance(v, (int, float))}
    check = plan_check(planned, {inverse[k]: v for k, v in memory.items() if k in inverse})
    if not check["figures"]:
        return None
    return {"figures": [{"figure": MEMORY_STATUS_KEYS[r["figure"]], "planned": r["planned"], "engine": r["engine"],
                         "driftPct": r["drift_pct"]} for r in check["figures"]],
            "maxAbsDriftPct": check["max_abs_drift_pct"],
            "notPrinted": [MEMORY_STATUS_KEYS[f] for f in check["not_printed"]]}


class ColdStartPhase(TypedDict, total=False):
    name: str
    start: str
    end: str | None
    seconds: float | None


class ColdStartVerdict(TypedDict, total=False):
    phase: str
    reason: str
    message: str


class CompileCacheSnapshot(TypedDict, total=False):
    state: str
    hits: int
    misses: int
    compileSeconds: float | None


class ColdStartSnapshot(TypedDict, total=False):
    attempt: int
    cacheWarm: bool | None
    compileCache: CompileCacheSnapshot
    memory: dict[str, Any]
    phases: list[ColdStartPhase]
    current: str | None
    totalSeconds: float | None
    weightsLoaded: bool
    graphsCaptured: bool
    graphsSkipped: bool
    serving: bool
    failedPhase: str | None
    reason: str | None
    pod: str
    engine: str
    warm: bool
    verdict: ColdStartVerdict | None
    syncing: bool
    warmup: dict


class ColdStartObserver(Protocol):
    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartSnapshot | None: ...

    def forget(self, key: Key) -> None: ...

    def close(self) -> None: ...


# factory(api_client, enqueue, metrics) -> observer; api_client is the operator's
# kubernetes.client.ApiClient, metrics its gpustack_k3.metrics.ColdStartMetrics (or None)
ColdStartFactory = Callable[[Any, Callable[[Key], None], Any], ColdStartObserver]


class NoColdStart:
    """No log tracking: conditions WeightsLoaded/GraphsCaptured/Warm stay Unknown."""

    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartSnapshot | None:
        return None

    def forget(self, key: Key) -> None:
        return None

    def close(self) -> None:
        return None
