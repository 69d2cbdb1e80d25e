"""Prometheus metrics for cold start, shared by the CLI runners and the operator.

Per start, fed live by the tracker (``listener``): phase durations, the phase in progress, failures. The
operator also exports the figures its status holds per resource (``ColdStartStatusFigures``, read at scrape
time): the engine's memory figures, the drift from the plan, the compile-cache state.

``ColdStartMetrics(registry=CollectorRegistry())`` keeps tests isolated; the operator passes
nothing and gets the process-wide default registry. ``metrics.listener`` plugs into
``ColdStartTracker(listeners=[...])`` so every phase transition updates the metrics live.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from gpustack_k3.api.v1alpha1.constants import CONDITION_KV_TRANSFER
from gpustack_k3.api.v1alpha1.status import K3DeploymentStatus
from gpustack_k3.coldstart.phases import PHASES

if TYPE_CHECKING:
    from gpustack_k3.coldstart.tracker import PhaseTransition

# Cold-start phases run from seconds (server_ready) to an hour (weights_download).
PHASE_BUCKETS = (1, 5, 10, 30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 3600, 7200)


class ColdStartMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        reg = REGISTRY if registry is None else registry
        self.registry = reg
        self.phase_seconds = Histogram(
            "gpustack_k3_cold_start_phase_seconds", "Duration of one cold-start phase",
            ["engine", "phase"], buckets=PHASE_BUCKETS, registry=reg)
        self.current_phase = Gauge(
            "gpustack_k3_cold_start_current_phase",
            "1 for the cold-start phase in progress, 0 for the others", ["engine", "phase"], registry=reg)
        self.failures = Counter(
            "gpustack_k3_cold_start_failures", "Cold starts that failed, by the phase they failed in",
            ["engine", "phase"], registry=reg)

    def _set_current(self, engine: str, phase: str | None) -> None:
        for p in PHASES:
            self.current_phase.labels(engine=engine, phase=p).set(1 if p == phase else 0)

    def listener(self, ev: PhaseTransition) -> None:
        """Feed tracker transitions: start → current phase, end → histogram, failed → counter."""
        engine = ev.engine or "unknown"
        if ev.event == "start" and ev.phase:
            self._set_current(engine, ev.phase)
        elif ev.event == "end" and ev.phase:
            if ev.seconds is not None and ev.seconds >= 0:
                self.phase_seconds.labels(engine=engine, phase=ev.phase).observe(ev.seconds)
            if ev.phase in ("server_ready", "warm"):
                self._set_current(engine, None)
        elif ev.event == "failed":
            self.failures.labels(engine=engine, phase=ev.phase or "unknown").inc()
            self._set_current(engine, None)


class ColdStartStatusFigures:
    """Collector of the cold-start figures the operator wrote into each resource's status, read from the
    informer cache at scrape time (level-based, like ``gpustack_k3_operator_resources``):
    ``gpustack_k3_cold_start_engine_memory{namespace,name,figure}`` (status.coldStart.memory),
    ``gpustack_k3_cold_start_plan_drift_percent{namespace,name,figure}`` (status.planCheck) and
    ``gpustack_k3_cold_start_compile_cache{namespace,name,state}`` (1 for the current start's state)."""

    def __init__(self, store) -> None:
        self.store = store   # list_keys() / get(namespace, name), the operator's CR cache

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        memory = GaugeMetricFamily("gpustack_k3_cold_start_engine_memory",
                                   "The engine's own memory figures from its start-up log (status.coldStart.memory)",
                                   labels=["namespace", "name", "figure"])
        drift = GaugeMetricFamily("gpustack_k3_cold_start_plan_drift_percent",
                                  "Engine figure vs plan, (engine - planned) / planned x 100 (status.planCheck)",
                                  labels=["namespace", "name", "figure"])
        cache = GaugeMetricFamily("gpustack_k3_cold_start_compile_cache",
                                  "1 for the compile-cache state of the current start (status.coldStart.compileCache)",
                                  labels=["namespace", "name", "state"])
        for ns, name in self.store.list_keys():
            raw = (self.store.get(ns, name) or {}).get("status") or {}
            try:   # the status as its model (what the operator wrote; other writers' fields left aside)
                status = K3DeploymentStatus.model_validate(
                    {k: v for k, v in raw.items() if k in K3DeploymentStatus.model_fields})
            except ValueError:
                continue
            cs = status.coldStart
            if cs is not None and cs.memory is not None:
                for figure, value in cs.memory.model_dump(by_alias=True, exclude_none=True).items():
                    memory.add_metric([ns, name, figure], value)
            for row in status.planCheck.figures if status.planCheck is not None else []:
                if row.driftPct is not None:
                    drift.add_metric([ns, name, row.figure], row.driftPct)
            if cs is not None and cs.compileCache is not None:
                cache.add_metric([ns, name, cs.compileCache.state], 1)
        yield memory
        yield drift
        yield cache


KV_TRANSFER_STATUSES = ("True", "False", "Unknown")


class KVTransferConditions:
    """Collector of ``gpustack_k3_kv_transfer{namespace,name,status}`` (docs/design/010-pd-rollouts.md §4): 1 for the
    current status of each P/D resource's ``KVTransfer`` condition, 0 for the two others (kube-state-metrics'
    condition form: ``== 1`` selects, no series vanishes on a change), read from the status the operator wrote
    (the informer cache) at scrape time; no series for a resource without the condition."""

    def __init__(self, store, condition: str = CONDITION_KV_TRANSFER) -> None:
        self.store, self.condition = store, condition

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        g = GaugeMetricFamily("gpustack_k3_kv_transfer", "1 for the status of the KVTransfer condition (P/D)",
                              labels=["namespace", "name", "status"])
        for ns, name in self.store.list_keys():
            conds = ((self.store.get(ns, name) or {}).get("status") or {}).get("conditions") or []
            now = next((c.get("status") for c in conds if c.get("type") == self.condition), None)
            if now is None:
                continue
            for s in KV_TRANSFER_STATUSES:
                g.add_metric([ns, name, s], 1.0 if s == now else 0.0)
        yield g
