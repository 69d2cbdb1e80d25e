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
milestones), ``failedPhase`` / ``reason`` (when the attempt failed), ``pod``, ``engine`` and
``verdict`` (None or {phase: Degraded|Failed, reason, message}: a phase over its budget → Degraded,
a crash → Failed); ``syncing`` (True while the log backlog is still being read after an operator
restart: ``decide`` then keeps the cold-start status it wrote last); ``warmup`` (the post-Ready warm-up's
summary, ``gpustack_k3.operator.warmup``: ok, seconds, completed, errors, ttftMsP50, ...; ``ok`` None while
it runs).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

Key = tuple[str, str]


class ColdStartPhase(TypedDict, total=False):
    name: str
    start: str
    end: str | None
    seconds: float | None


class ColdStartVerdict(TypedDict, total=False):
    phase: str
    reason: str
    message: str


class ColdStartSnapshot(TypedDict, total=False):
    attempt: int
    cacheWarm: bool | None
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
