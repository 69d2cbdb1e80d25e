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

The observation is typed (``gpustack_k3.operator.observation.ColdStartObservation``): the ``ColdStart`` status
model and beside it what only ``decide`` reads (milestones, a typed ``Verdict``, ``syncing`` while the log
backlog is still being read after an operator restart, per-role phases). The post-Ready warm-up's summary
(``gpustack_k3.operator.warmup``) is put in as the model's ``warmup``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from gpustack_k3.operator.observation import ColdStartObservation

Key = tuple[str, str]


class ColdStartObserver(Protocol):
    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartObservation | None: ...

    def report_phase(self, key: Key, pod_uid: str, phase: str, start: float | None, end: float | None,
                     details: dict | None = None) -> bool: ...

    def forget(self, key: Key) -> None: ...

    def close(self) -> None: ...


# factory(api_client, enqueue, metrics) -> observer; api_client is the operator's
# kubernetes.client.ApiClient, metrics its gpustack_k3.metrics.ColdStartMetrics (or None)
ColdStartFactory = Callable[[Any, Callable[[Key], None], Any], ColdStartObserver]


class NoColdStart:
    """No log tracking: conditions WeightsLoaded/GraphsCaptured/Warm stay Unknown."""

    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartObservation | None:
        return None

    def report_phase(self, key: Key, pod_uid: str, phase: str, start: float | None, end: float | None,
                     details: dict | None = None) -> bool:
        return False

    def forget(self, key: Key) -> None:
        return None

    def close(self) -> None:
        return None
